package uapi_test

// A differential fuzz target for the UAPI set parser and its semantics: the
// same set request goes to this device and to the reference device
// (golang.zx2c4.com/wireguard/device, brought down so that listen_port and
// fwmark only record), each on a fresh connection, and both must accept or
// refuse it with the same errno.

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/tun/memtun"
)

func FuzzAcceptanceUAPIAgainstReference(f *testing.F) {
	d := device.NewDevice(memtun.New("fz", 1420), conntest.NewNetwork().NewBind(netip.MustParseAddr("192.0.2.1")), device.Options{})
	f.Cleanup(d.Close)
	ref := wgdevice.NewDevice(tuntest.NewChannelTUN().TUN(), wgconn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
	f.Cleanup(ref.Close)
	// Its channel TUN reports itself up, and the device follows a moment
	// later: wait for that, then take it down.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if g, _ := ref.IpcGet(); strings.Contains(g, "listen_port=") {
			break
		}
		if time.Now().After(deadline) {
			f.Fatal("the reference device did not come up")
		}
	}
	if err := ref.Down(); err != nil {
		f.Fatal(err)
	}
	pub := "public_key=" + hexKey(mustKey(f).PublicKey()) + "\n"
	for _, s := range []string{
		"private_key=" + hexKey(mustKey(f)) + "\nlisten_port=51820\nfwmark=7\nreplace_peers=true\n",
		pub + "preshared_key=" + strings.Repeat("ab", 32) + "\nendpoint=[2001:db8::1]:1\npersistent_keepalive_interval=25\n",
		pub + "replace_allowed_ips=true\nallowed_ip=10.0.0.0/8\nallowed_ip=-10.0.0.0/8\nprotocol_version=1\n",
		pub + "update_only=true\nremove=true\n",
		"listen_port=0x10\n",
		"fwmark=0x10\n",
		"listen_port=051820\n",
		pub + "endpoint=1.2.3.4:0\n",
		pub + "allowed_ip=1.2.3.4\n",
		pub + "allowed_ip=::ffff:1.2.3.4/128\n",
		pub + "persistent_keepalive_interval=+1\n",
		"private_key=\n",
		"=\n",
		"public_key" + "\n",
	} {
		f.Add(s)
	}
	ask := func(serve func(net.Conn), req string) string {
		c1, c2 := net.Pipe()
		defer c2.Close()
		go serve(c1)
		go func() { c2.Write([]byte(req)) }()
		c2.SetDeadline(time.Now().Add(5 * time.Second))
		rd := bufio.NewReader(c2)
		var sb strings.Builder
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					return sb.String() + "<no answer within 5s>"
				}
				return sb.String() + "<closed>"
			}
			if line == "\n" {
				return sb.String()
			}
			sb.WriteString(line)
		}
	}
	f.Fuzz(func(t *testing.T, body string) {
		// One set operation: lines without blank ones or NUL, ending in a
		// newline.
		if strings.Contains(body, "\n\n") || strings.HasPrefix(body, "\n") || strings.ContainsAny(body, "\x00\r") || len(body) > 4096 {
			return
		}
		if !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		req := "set=1\n" + body + "\n"
		ours := ask(func(c net.Conn) { uapi.Serve(c, d) }, req)
		theirs := ask(func(c net.Conn) { ref.IpcHandle(c) }, req)
		if ours != theirs && !knownDivergence(body, ours, theirs) {
			t.Fatalf("set %q: ours %q, reference %q", body, ours, theirs)
		}
	})
}

// knownDivergence lists the deliberate differences from the reference, each
// stricter than it.
func knownDivergence(body, ours, theirs string) bool {
	if ours == "errno=-22\n" && theirs == "errno=-71\n" {
		// A line longer than uapi.MaxLineLen is refused as invalid before
		// anything else is looked at; the reference, which has no limit,
		// calls it a protocol error when it has no '='.
		for _, l := range strings.Split(body, "\n") {
			if len(l) > uapi.MaxLineLen && !strings.Contains(l, "=") {
				return true
			}
		}
		return false
	}
	if ours != "errno=-22\n" || theirs != "errno=0\n" {
		return false
	}
	for _, l := range strings.Split(body, "\n") {
		// Endpoint port 0: nothing can be sent there; the reference
		// accepts it and fails on every send.
		if v, ok := strings.CutPrefix(l, "endpoint="); ok {
			// Any spelling of port 0 ("…:0", "…:00").
			if i := strings.LastIndexByte(v, ':'); i >= 0 && i+1 < len(v) && strings.Trim(v[i+1:], "0") == "" {
				return true
			}
		}
	}
	return false
}
