package ovpntunnel

import (
	"encoding/json"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/tun"
)

// TestCountedTUNCountsWhatTheKernelRefuses: on a real TUN device, a
// packet the kernel takes counts nothing; one it refuses (not IPv4 or
// IPv6: EINVAL) and a write to the device set down (EIO) each count one;
// writes after Close do not (the tunnel is ending).
func TestCountedTUNCountsWhatTheKernelRefuses(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (a network namespace and a TUN device)")
	}
	ns := netns.New(t, "svctun")
	var raw tun.Device
	var err error
	if e := testnet.InNamespace(ns.Name, func() { raw, err = tun.CreateTUN("svctun0", 1500) }); e != nil || err != nil {
		t.Fatalf("TUN: %v %v", e, err)
	}
	d := &countedTUN{Device: raw}
	defer d.Close()
	netns.Run(t, ns, "ip", "addr", "add", "10.251.9.1/24", "dev", "svctun0")
	netns.Run(t, ns, "ip", "link", "set", "svctun0", "up")
	write := func(p []byte) error {
		b := make([]byte, tun.Offset+len(p))
		copy(b[tun.Offset:], p)
		_, err := d.Write([][]byte{b}, tun.Offset)
		return err
	}
	good := testnet.ICMPEcho(8, netip.MustParseAddr("10.251.9.2"), netip.MustParseAddr("10.251.9.1"), 1, 1, []byte("hello"))
	if err := write(good); err != nil {
		t.Fatalf("a good packet: %v", err)
	}
	if n := d.count(); n != 0 {
		t.Fatalf("after a good packet: %d errors", n)
	}
	bad := append([]byte(nil), good...)
	bad[0] = 0x05 // version 0: the kernel knows no such protocol
	if err := write(bad); err == nil {
		t.Fatal("the kernel took a packet of IP version 0")
	}
	if n := d.count(); n != 1 {
		t.Fatalf("after a refused packet: %d errors, want 1", n)
	}
	netns.Run(t, ns, "ip", "link", "set", "svctun0", "down")
	if err := write(good); err == nil {
		t.Fatal("a write to the device set down succeeded")
	}
	if n := d.count(); n != 2 {
		t.Fatalf("after a write to the device set down: %d errors, want 2", n)
	}
	d.Close()
	write(good)
	if n := d.count(); n != 2 {
		t.Fatalf("a write after Close counted: %d errors", n)
	}
}

// TestStatusCounters: tun_errors, socket_send_errors and handshakes_failed are optional
// fields (absent at zero, so readers of the earlier schema see the same
// JSON) and shown by FormatStatus when present, with a client's drops, in
// the words `show` uses for the service's counters (service.CounterLines);
// FormatStatusCounters prints the service's counters instead of the file's.
func TestStatusCounters(t *testing.T) {
	st := TunnelStatus{Kind: KindServer, Interface: "tun7", Address: "10.8.0.1/24"}
	b, _ := json.Marshal(st)
	if strings.Contains(string(b), "tun_errors") || strings.Contains(string(b), "handshakes_failed") {
		t.Fatalf("zero counters in the JSON: %s", b)
	}
	st.TUNErrors = 3
	st.SocketSendErrors = 4
	st.HandshakesFailed = map[string]uint64{"verify": 2, "tls_wrap": 5}
	b, _ = json.Marshal(st)
	for _, want := range []string{`"tun_errors":3`, `"socket_send_errors":4`, `"handshakes_failed":{"tls_wrap":5,"verify":2}`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("status JSON lacks %s: %s", want, b)
		}
	}
	st.DroppedData = 6
	var text strings.Builder
	FormatStatus(&text, []TunnelStatus{st})
	for _, want := range []string{"  dropped: bad_data 6\n", "  tun errors: 3\n", "  socket errors: send 4\n", "  failed handshakes: tls_wrap 5, verify 2\n"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("formatted status lacks %q:\n%s", want, text.String())
		}
	}
	text.Reset()
	svc := func(TunnelStatus) ([]service.Counter, bool) {
		return []service.Counter{{Name: "wirelane_openvpn_dropped_packets_total", Labels: map[string]string{"reason": "spoofed"}, Value: 8}}, true
	}
	FormatStatusCounters(&text, []TunnelStatus{st}, svc)
	if !strings.Contains(text.String(), "  dropped: spoofed 8\n") || strings.Contains(text.String(), "tun errors") || strings.Contains(text.String(), "bad_data") {
		t.Fatalf("with the service's counters, want only theirs:\n%s", text.String())
	}
}
