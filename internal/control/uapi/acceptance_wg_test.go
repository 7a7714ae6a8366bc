package uapi_test

// Acceptance tests with the real `wg` tool (wireguard-tools) against the
// device itself, over a /var/run/wireguard socket: wg setconf, showconf,
// show dump, set and errors, and a 131,071-prefix peer written by wg and
// read back by wg. They need root and the wg tool, and skip otherwise.

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/tun/memtun"
)

// wgDevice serves a new device (down, in memory) on a unique UAPI socket and
// returns it with the interface name wg must use.
func wgDevice(t *testing.T) (*device.Device, *conntest.Network, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: wg only talks to /var/run/wireguard")
	}
	if _, err := exec.LookPath("wg"); err != nil {
		t.Skip("needs the wg tool (apt package wireguard-tools)")
	}
	nw := conntest.NewNetwork()
	d := device.NewDevice(memtun.New("wg", 1420), nw.NewBind(netip.MustParseAddr("192.0.2.1")), device.Options{})
	t.Cleanup(d.Close)
	name := fmt.Sprintf("wla%d%c", os.Getpid()%100000, 'a'+len(t.Name())%26)
	l, err := uapi.Listen(name)
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
			go uapi.Serve(c, d)
		}
	}()
	return d, nw, name
}

// wg runs the wg tool; it fails the test unless the outcome is wantFail,
// and returns standard output (standard error when it failed).
func wg(t *testing.T, wantFail bool, args ...string) string {
	t.Helper()
	cmd := exec.Command("wg", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	must(t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("wg %s hung", strings.Join(args, " "))
	}
	if (err != nil) != wantFail {
		t.Fatalf("wg %s: err %v (want failure: %v)\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, wantFail, stdout.String(), stderr.String())
	}
	if wantFail {
		return stderr.String()
	}
	return stdout.String()
}

func b64Key(k [32]byte) string { return base64.StdEncoding.EncodeToString(k[:]) }

func TestAcceptanceRealWGAgainstDevice(t *testing.T) {
	d, nw, name := wgDevice(t)
	priv := mustKey(t)
	p1, p2 := mustKey(t).PublicKey(), mustKey(t).PublicKey()
	psk, err := noise.GeneratePresharedKey()
	must(t, err)
	conf := fmt.Sprintf(`[Interface]
PrivateKey = %s
ListenPort = 51999
FwMark = 0x1234

[Peer]
PublicKey = %s
PresharedKey = %s
AllowedIPs = 10.0.0.0/24, fd00::/64
Endpoint = [2001:db8::1]:51821
PersistentKeepalive = 25

[Peer]
PublicKey = %s
AllowedIPs = 0.0.0.0/0
Endpoint = 192.0.2.7:9
`, b64Key(priv), b64Key(p1), b64Key(psk), b64Key(p2))
	path := filepath.Join(t.TempDir(), "wg.conf")
	must(t, os.WriteFile(path, []byte(conf), 0o600))
	wg(t, false, "setconf", name, path)

	// wg show dump: one line for the device, one per peer, tab-separated.
	dump := wg(t, false, "show", name, "dump")
	want := []string{
		strings.Join([]string{b64Key(priv), b64Key(priv.PublicKey()), "51999", "0x1234"}, "\t"),
		strings.Join([]string{b64Key(p1), b64Key(psk), "[2001:db8::1]:51821", "10.0.0.0/24,fd00::/64", "0", "0", "0", "25"}, "\t"),
		strings.Join([]string{b64Key(p2), "(none)", "192.0.2.7:9", "0.0.0.0/0", "0", "0", "0", "off"}, "\t"),
	}
	if got := strings.Split(strings.TrimSuffix(dump, "\n"), "\n"); !slices.Equal(got, want) {
		t.Fatalf("wg show dump:\n%s\nwant:\n%s", dump, strings.Join(want, "\n"))
	}

	// wg set: an unclamped key comes back clamped; a peer removed; a prefix
	// removed from another.
	raw := mustKey(t)
	raw[0] |= 7
	raw[31] |= 0x80
	keyFile := filepath.Join(t.TempDir(), "key")
	must(t, os.WriteFile(keyFile, []byte(b64Key(raw)+"\n"), 0o600))
	wg(t, false, "set", name, "private-key", keyFile, "peer", b64Key(p2), "remove", "peer", b64Key(p1), "allowed-ips", "10.0.0.0/24")
	clamped := raw
	clamped.Clamp()
	if got := strings.TrimSpace(wg(t, false, "show", name, "private-key")); got != b64Key(clamped) {
		t.Fatalf("wg show private-key: %s, want the clamped %s", got, b64Key(clamped))
	}
	if got := wg(t, false, "show", name, "allowed-ips"); got != b64Key(p1)+"\t10.0.0.0/24\n" {
		t.Fatalf("wg show allowed-ips:\n%q", got)
	}

	// Errors come back as wg reports them: a listen port another socket
	// holds (errno -98), and the device keeps its port.
	must(t, d.Up())
	squat := nw.NewBind(netip.MustParseAddr("192.0.2.1"))
	if _, _, err := squat.Open(6000); err != nil {
		t.Fatal(err)
	}
	if out := wg(t, true, "set", name, "listen-port", "6000"); !strings.Contains(out, "Address already in use") {
		t.Fatalf("wg set listen-port in use: %q", out)
	}
	if got := strings.TrimSpace(wg(t, false, "show", name, "listen-port")); got != "51999" {
		t.Fatalf("listen port after the refusal: %s", got)
	}
	if out := wg(t, true, "set", name, "peer", "not-a-key"); !strings.Contains(out, "Key is not the correct length or format") {
		t.Fatalf("wg set with a bad key: %q", out)
	}
}

func TestAcceptanceRealWG131071Prefixes(t *testing.T) {
	_, _, name := wgDevice(t)
	pub := mustKey(t).PublicKey()
	var sb strings.Builder
	pfx := bigPrefixes(bigPrefixCount)
	for i, c := range pfx {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(c.Prefix.String())
	}
	// Too long for one command-line argument: through a file.
	path := filepath.Join(t.TempDir(), "big.conf")
	must(t, os.WriteFile(path, []byte("[Peer]\nPublicKey = "+b64Key(pub)+"\nAllowedIPs = "+sb.String()+"\n"), 0o600))
	wg(t, false, "addconf", name, path)
	out := wg(t, false, "show", name, "allowed-ips")
	line := strings.TrimSuffix(out, "\n")
	k, list, ok := strings.Cut(line, "\t")
	if !ok || k != b64Key(pub) {
		t.Fatalf("wg show allowed-ips starts %q", line[:min(len(line), 100)])
	}
	got := strings.Split(list, " ")
	if len(got) != bigPrefixCount {
		t.Fatalf("wg read back %d allowed IPs, want %d", len(got), bigPrefixCount)
	}
	want := make(map[string]bool, len(pfx))
	for _, c := range pfx {
		want[c.Prefix.String()] = true
	}
	for _, g := range got {
		if !want[g] {
			t.Fatalf("%q read back twice or never set", g)
		}
		delete(want, g)
	}
}
