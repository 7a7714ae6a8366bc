package uapi

// These tests drive the real `wg` tool (wireguard-tools) against Serve. wg
// only looks in /var/run/wireguard, so they need root and use a unique
// interface name there; they skip otherwise.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/curve25519"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/device"
)

// wgServer serves h on a real /var/run/wireguard socket under a unique name
// until the test ends, and returns that name.
func wgServer(t *testing.T, h Handler) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: wg only talks to /var/run/wireguard")
	}
	if _, err := exec.LookPath("wg"); err != nil {
		t.Skip("needs the wg tool (apt package wireguard-tools)")
	}
	// Unique across processes (pid) and within this one (counter); at
	// most 10 bytes, well inside IFNAMSIZ.
	name := fmt.Sprintf("wlu%d%c", os.Getpid()%100000, 'a'+wgServers.Add(1)%26)
	l, err := Listen(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go Serve(c, h)
		}
	}()
	return name
}

// wgServers counts the names wgServer handed out in this process.
var wgServers atomic.Int32

// runWG runs wg with args and returns its standard output; it fails the
// test when wg fails unless wantFail is set, in which case it returns
// standard error.
func runWG(t *testing.T, wantFail bool, args ...string) string {
	t.Helper()
	cmd := exec.Command("wg", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("wg %s hung", strings.Join(args, " "))
	}
	if wantFail {
		if err == nil {
			t.Fatalf("wg %s succeeded, want failure; output %q", strings.Join(args, " "), stdout.String())
		}
		return stderr.String()
	}
	if err != nil {
		t.Fatalf("wg %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

func b64(t testing.TB, hexKey string) string {
	k := mustKey(t, hexKey)
	return base64.StdEncoding.EncodeToString(k[:])
}

func TestRealWGShowDump(t *testing.T) {
	h := goldenHandler(t)
	name := wgServer(t, h)

	if ifs := runWG(t, false, "show", "interfaces"); !strings.Contains(" "+strings.TrimSpace(ifs)+" ", " "+name+" ") {
		t.Fatalf("wg show interfaces = %q, want it to list %s", ifs, name)
	}

	priv := mustKey(t, hexPriv)
	pub, err := curve25519.X25519(priv[:], curve25519.Basepoint)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		b64(t, hexPriv), base64.StdEncoding.EncodeToString(pub), "51820", "0xca6c",
	}, "\t") + "\n" +
		strings.Join([]string{
			b64(t, hexPub1), b64(t, hexPSK), "[2001:db8::1]:51821", "10.0.0.0/24,fd00::/64",
			"1700000000", "18446744073709551615", "1099511627776", "25",
		}, "\t") + "\n" +
		strings.Join([]string{
			b64(t, hexPub2), "(none)", "192.0.2.7:9", "(none)", "0", "0", "0", "off",
		}, "\t") + "\n"
	if got := runWG(t, false, "show", name, "dump"); got != want {
		t.Fatalf("wg show dump:\n%s\nwant:\n%s", got, want)
	}
	// The human form, which also sorts peers and reads every field.
	human := runWG(t, false, "show", name)
	for _, frag := range []string{"listening port: 51820", "fwmark: 0xca6c", "endpoint: [2001:db8::1]:51821",
		"allowed ips: 10.0.0.0/24, fd00::/64", "persistent keepalive: every 25 seconds", "preshared key: (hidden)"} {
		if !strings.Contains(human, frag) {
			t.Errorf("wg show lacks %q:\n%s", frag, human)
		}
	}
}

func TestRealWGSet(t *testing.T) {
	h := &fakeHandler{}
	name := wgServer(t, h)
	dir := t.TempDir()
	privFile, pskFile := filepath.Join(dir, "priv"), filepath.Join(dir, "psk")
	os.WriteFile(privFile, []byte(b64(t, hexPriv)+"\n"), 0o600)
	os.WriteFile(pskFile, []byte(b64(t, hexPSK)+"\n"), 0o600)

	runWG(t, false, "set", name, "listen-port", "51820", "fwmark", "0x1234", "private-key", privFile,
		"peer", b64(t, hexPub1), "preshared-key", pskFile, "endpoint", "[2001:db8::1]:51821",
		"persistent-keepalive", "25", "allowed-ips", "10.0.0.0/24,fd00::/64",
		"peer", b64(t, hexPub2), "remove")
	want := device.Config{
		PrivateKey: ptr(mustKey(t, hexPriv)),
		ListenPort: ptr(uint16(51820)),
		FwMark:     ptr(uint32(0x1234)),
		Peers: []device.PeerConfig{{
			PublicKey:           mustKey(t, hexPub1),
			PresharedKey:        ptr(mustKey(t, hexPSK)),
			Endpoint:            ptr(netip.MustParseAddrPort("[2001:db8::1]:51821")),
			PersistentKeepalive: ptr(uint16(25)),
			ReplaceAllowedIPs:   true,
			AllowedIPs: []device.AllowedIPChange{
				{Prefix: netip.MustParsePrefix("10.0.0.0/24")},
				{Prefix: netip.MustParsePrefix("fd00::/64")},
			},
		}, {PublicKey: mustKey(t, hexPub2), Remove: true}},
	}
	sets := h.applied()
	if len(sets) != 1 || !reflect.DeepEqual(sets[0], want) {
		t.Fatalf("wg set applied:\n%s\nwant:\n%s", formatSetAll(sets), formatSet(&want))
	}

	// setconf replaces the peers and sends each peer's allowed IPs.
	conf := filepath.Join(dir, "wg.conf")
	os.WriteFile(conf, []byte("[Interface]\nPrivateKey = "+b64(t, hexPriv)+"\nListenPort = 4000\n\n[Peer]\nPublicKey = "+
		b64(t, hexPub2)+"\nAllowedIPs = 192.168.0.0/16, ::/0\nEndpoint = 127.0.0.1:4001\n"), 0o600)
	runWG(t, false, "setconf", name, conf)
	sets = h.applied()
	last := sets[len(sets)-1]
	if !last.ReplacePeers || *last.ListenPort != 4000 || len(last.Peers) != 1 ||
		last.Peers[0].PublicKey != mustKey(t, hexPub2) || *last.Peers[0].Endpoint != netip.MustParseAddrPort("127.0.0.1:4001") ||
		!last.Peers[0].ReplaceAllowedIPs || len(last.Peers[0].AllowedIPs) != 2 {
		t.Fatalf("wg setconf applied:\n%s", formatSet(&last))
	}
}

func TestRealWGSeesErrors(t *testing.T) {
	h := &fakeHandler{setErr: &Error{Errno: ErrnoAddrUse, Msg: "port in use"}}
	name := wgServer(t, h)
	if msg := runWG(t, true, "set", name, "listen-port", "1"); !strings.Contains(msg, "Address already in use") {
		t.Fatalf("wg set stderr %q, want EADDRINUSE's message", msg)
	}

	h2 := &fakeHandler{getErr: &Error{Errno: ErrnoIO, Msg: "device gone"}}
	name2 := wgServer(t, h2)
	// wg's get parser takes only unsigned numbers, so any errno=-N makes
	// it fail with EPROTO, as with the reference implementation.
	if msg := runWG(t, true, "show", name2, "dump"); !strings.Contains(msg, "Unable to access interface") {
		t.Fatalf("wg show stderr %q", msg)
	}
}

// TestRealWG131071AllowedIPs has wg read a peer with 131,071 allowed IPs,
// the kernel's own test size, through the streaming writer.
func TestRealWG131071AllowedIPs(t *testing.T) {
	const n = 131071
	h := &fakeHandler{peers: []fakePeer{{info: device.PeerStatus{PublicKey: mustKey(t, hexPub1)}, gen: n}}}
	name := wgServer(t, h)
	out := runWG(t, false, "show", name, "allowed-ips")
	key, list, ok := strings.Cut(strings.TrimSuffix(out, "\n"), "\t")
	if !ok || key != b64(t, hexPub1) {
		t.Fatalf("unexpected output start %q", out[:min(len(out), 80)])
	}
	ips := strings.Split(list, " ")
	if len(ips) != n || ips[0] != "10.0.0.0/32" || ips[n-1] != genPrefix(n-1).String() {
		t.Fatalf("wg read %d allowed IPs (first %q), want %d", len(ips), ips[0], n)
	}
}

// TestRealWGRemovesStaleSocket checks the other side of stale handling:
// after our listener is gone without unlinking, wg cleans up and Listen
// can claim the name again.
func TestRealWGStaleSocketIsNotListed(t *testing.T) {
	h := &fakeHandler{}
	name := wgServer(t, h)
	path := SocketPath(name)
	staleSocket(t, path+".tmp")
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	if ifs := runWG(t, false, "show", "interfaces"); strings.Contains(" "+strings.TrimSpace(ifs)+" ", " "+name+" ") {
		t.Fatalf("wg lists a stale socket: %q", ifs)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("wg left the stale socket: %v", err)
	}
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("socket still answers")
	}
}

// TestWgctrlClient checks interop with the Go UAPI client the project's
// tools use (golang.zx2c4.com/wireguard/wgctrl, userspace backend).
func TestWgctrlClient(t *testing.T) {
	h := goldenHandler(t)
	// wgctrl reads the byte counters as signed 64-bit numbers (wg reads
	// them unsigned), so keep them in its range here.
	h.peers[0].info.RxBytes = 1<<63 - 1
	name := wgServer(t, h)
	c, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d, err := c.Device(name)
	if err != nil {
		t.Fatal(err)
	}
	if d.ListenPort != 51820 || d.FirewallMark != 51820 || len(d.Peers) != 2 {
		t.Fatalf("device %+v", d)
	}
	p := d.Peers[0]
	if p.PublicKey != wgtypes.Key(mustKey(t, hexPub1)) || p.PresharedKey != wgtypes.Key(mustKey(t, hexPSK)) ||
		p.Endpoint.String() != "[2001:db8::1]:51821" || p.LastHandshakeTime != time.Unix(1700000000, 123456789) ||
		p.PersistentKeepaliveInterval != 25*time.Second || len(p.AllowedIPs) != 2 || p.ProtocolVersion != 1 {
		t.Fatalf("peer %+v", p)
	}

	port := 1234
	err = c.ConfigureDevice(name, wgtypes.Config{ListenPort: &port, Peers: []wgtypes.PeerConfig{{
		PublicKey: wgtypes.Key(mustKey(t, hexPub2)), UpdateOnly: true,
		AllowedIPs: []net.IPNet{{IP: net.IPv4(10, 9, 0, 0), Mask: net.CIDRMask(16, 32)}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	sets := h.applied()
	if len(sets) != 1 || *sets[0].ListenPort != 1234 || len(sets[0].Peers) != 1 || !sets[0].Peers[0].UpdateOnly ||
		!reflect.DeepEqual(sets[0].Peers[0].AllowedIPs, []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("10.9.0.0/16")}}) {
		t.Fatalf("wgctrl applied:\n%s", formatSetAll(sets))
	}

	refusing := wgServer(t, &fakeHandler{setErr: &Error{Errno: ErrnoInvalid, Msg: "refused"}})
	if err := c.ConfigureDevice(refusing, wgtypes.Config{ListenPort: &port}); err == nil || !strings.Contains(err.Error(), "errno=-22") {
		t.Fatalf("wgctrl got %v, want the errno", err)
	}
}
