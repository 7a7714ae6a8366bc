package uapi_test

// Acceptance tests of the UAPI as it serves a real device: the same bytes
// sent to this device and to the reference implementation's device
// (golang.zx2c4.com/wireguard/device, in memory) must get the same
// answers, errno values included; and a 131,071-prefix peer reads back
// whole through Device.WriteStatus without the answer being built in
// memory. (That a client which stops reading stalls no traffic is the
// device's own test: TestStalledStatusDoesNotStallTraffic.)

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/tun/memtun"
)

// uapiClient is one client connection to a UAPI server.
type uapiClient struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

// ask writes req and returns the answer up to and including its blank line.
func (u *uapiClient) ask(req string) string {
	u.t.Helper()
	u.c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(u.c, req); err != nil {
		u.t.Fatalf("writing %q: %v", req, err)
	}
	var sb strings.Builder
	for {
		line, err := u.rd.ReadString('\n')
		if err != nil {
			u.t.Fatalf("reading the answer to %q: %v (so far %q)", req, err, sb.String())
		}
		sb.WriteString(line)
		if line == "\n" {
			return sb.String()
		}
	}
}

// ourUAPI serves d on one end of an in-memory connection.
func ourUAPI(t *testing.T, d *device.Device) *uapiClient {
	c1, c2 := net.Pipe()
	go uapi.Serve(c1, d)
	t.Cleanup(func() { c2.Close() })
	return &uapiClient{t: t, c: c2, rd: bufio.NewReader(c2)}
}

// refUAPI serves a new reference device the same way. Its channel TUN
// reports itself up, so the reference device comes up on its own.
func refUAPI(t *testing.T) (*uapiClient, *wgdevice.Device) {
	d := wgdevice.NewDevice(tuntest.NewChannelTUN().TUN(), wgconn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
	t.Cleanup(d.Close)
	c1, c2 := net.Pipe()
	go d.IpcHandle(c1)
	t.Cleanup(func() { c2.Close() })
	return &uapiClient{t: t, c: c2, rd: bufio.NewReader(c2)}, d
}

// canonicalGet orders what the protocol leaves unordered: peers by public
// key (the reference keeps them in a map) and each peer's allowed_ip lines.
// Every other line keeps its place.
func canonicalGet(s string) string { return canonical(s, true) }

// canonical sorts each peer's allowed_ip lines and, when sortPeers, the
// peers by public key.
func canonical(s string, sortPeers bool) string {
	lines := strings.SplitAfter(s, "\n")
	var head []string
	var peers [][]string
	for _, l := range lines {
		if strings.HasPrefix(l, "public_key=") {
			peers = append(peers, nil)
		}
		if strings.HasPrefix(l, "errno=") || l == "\n" || l == "" {
			continue
		}
		if len(peers) == 0 {
			head = append(head, l)
		} else {
			peers[len(peers)-1] = append(peers[len(peers)-1], l)
		}
	}
	for _, p := range peers {
		i := slices.IndexFunc(p, func(l string) bool { return strings.HasPrefix(l, "allowed_ip=") })
		if i >= 0 {
			slices.Sort(p[i:])
		}
	}
	if sortPeers {
		slices.SortFunc(peers, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	}
	out := strings.Join(head, "")
	for _, p := range peers {
		out += strings.Join(p, "")
	}
	return out
}

// TestAcceptanceUAPIGoldenAgainstReference: a whole wg-style conversation
// (two sets, then a get, then more sets and gets) on one connection, sent
// byte for byte to this device and to the reference; every answer must be
// the same, and the get answer must also match the exact lines wg parses.
func TestAcceptanceUAPIGoldenAgainstReference(t *testing.T) {
	d, _, _ := newSolo(t)
	ours := ourUAPI(t, d)
	ref, _ := refUAPI(t)
	priv := mustKey(t)     // generated keys are clamped: the reference does not clamp
	port := freeUDPPort(t) // the reference is up and really binds it
	p1, p2 := mustKey(t).PublicKey(), mustKey(t).PublicKey()
	psk, err := noise.GeneratePresharedKey()
	must(t, err)

	// What `wg setconf` sends for a two-peer configuration, then what
	// `wg set` sends to change one peer and remove an allowed IP.
	conversation := []string{
		"set=1\n" +
			"private_key=" + hexKey(priv) + "\n" +
			"listen_port=" + port + "\n" +
			"fwmark=4660\n" +
			"replace_peers=true\n" +
			"public_key=" + hexKey(p1) + "\n" +
			"preshared_key=" + hexKey(psk) + "\n" +
			"endpoint=[2001:db8::1]:51821\n" +
			"persistent_keepalive_interval=25\n" +
			"replace_allowed_ips=true\n" +
			"allowed_ip=10.0.0.0/24\n" +
			"allowed_ip=fd00::/64\n" +
			"public_key=" + hexKey(p2) + "\n" +
			"endpoint=192.0.2.7:9\n" +
			"replace_allowed_ips=true\n" +
			"allowed_ip=10.9.0.1/32\n" +
			"allowed_ip=0.0.0.0/0\n" +
			"\n",
		"get=1\n\n",
		"set=1\n" +
			"public_key=" + hexKey(p2) + "\n" +
			"update_only=true\n" +
			"allowed_ip=-0.0.0.0/0\n" +
			"persistent_keepalive_interval=0\n" +
			"public_key=" + hexKey(p1) + "\n" +
			"preshared_key=" + strings.Repeat("0", 64) + "\n" +
			"endpoint=198.51.100.1:1\n" +
			"\n",
		"get=1\n\n",
		"set=1\npublic_key=" + hexKey(p2) + "\nremove=true\n\n",
		"set=1\nfwmark=0\n\n",
		"get=1\n\n",
	}
	var answers []string
	for i, req := range conversation {
		a, b := ours.ask(req), ref.ask(req)
		if strings.HasPrefix(req, "get=1") {
			if !strings.HasSuffix(a, "errno=0\n\n") {
				t.Fatalf("operation %d: our get answer does not end in errno=0:\n%s", i, a)
			}
			if ca, cb := withoutCounters(canonicalGet(a)), withoutCounters(canonicalGet(b)); ca != cb {
				t.Fatalf("operation %d (%q): get answers differ\nours:\n%s\nreference:\n%s", i, req, ca, cb)
			}
		} else if a != b {
			t.Fatalf("operation %d (%q): ours %q, reference %q", i, req, a, b)
		}
		answers = append(answers, a)
	}

	// The first get, line by line, as wg's parser expects it, peers in
	// creation order (the reference may print them in any order, so ours is
	// pinned here).
	want := "private_key=" + hexKey(priv) + "\n" +
		"listen_port=" + port + "\n" +
		"fwmark=4660\n" +
		"public_key=" + hexKey(p1) + "\n" +
		"preshared_key=" + hexKey(psk) + "\n" +
		"protocol_version=1\n" +
		"endpoint=[2001:db8::1]:51821\n" +
		"last_handshake_time_sec=0\n" +
		"last_handshake_time_nsec=0\n" +
		"tx_bytes=0\n" +
		"rx_bytes=0\n" +
		"persistent_keepalive_interval=25\n" +
		"allowed_ip=10.0.0.0/24\n" +
		"allowed_ip=fd00::/64\n" +
		"public_key=" + hexKey(p2) + "\n" +
		"preshared_key=" + strings.Repeat("0", 64) + "\n" +
		"protocol_version=1\n" +
		"endpoint=192.0.2.7:9\n" +
		"last_handshake_time_sec=0\n" +
		"last_handshake_time_nsec=0\n" +
		"tx_bytes=0\n" +
		"rx_bytes=0\n" +
		"persistent_keepalive_interval=0\n" +
		"allowed_ip=0.0.0.0/0\n" +
		"allowed_ip=10.9.0.1/32\n" +
		"errno=0\n\n"
	if got := canonical(answers[1], false) + "errno=0\n\n"; got != want {
		t.Fatalf("first get:\n%s\nwant:\n%s", got, want)
	}
	// The last get: fwmark 0 is omitted, one peer left.
	if strings.Contains(answers[6], "fwmark=") || !strings.Contains(answers[6], "listen_port="+port+"\n") ||
		strings.Count(answers[6], "public_key=") != 1 {
		t.Fatalf("last get:\n%s", answers[6])
	}
}

// TestAcceptanceUAPIErrnoAgainstReference sends malformed requests to both
// implementations, each on a fresh connection with the faulty line last, and
// compares the errno answers.
func TestAcceptanceUAPIErrnoAgainstReference(t *testing.T) {
	pk := "public_key=" + hexKey(mustKey(t).PublicKey()) + "\n"
	cases := []struct {
		name, req string
		errno     string // expected, as on the wire
	}{
		{"unknown device key", "set=1\nbogus=1\n\n", "errno=-22\n\n"},
		{"bad listen_port", "set=1\nlisten_port=nope\n\n", "errno=-22\n\n"},
		{"listen_port too big", "set=1\nlisten_port=65536\n\n", "errno=-22\n\n"},
		{"bad fwmark", "set=1\nfwmark=-1\n\n", "errno=-22\n\n"},
		{"short private key", "set=1\nprivate_key=abcd\n\n", "errno=-22\n\n"},
		{"upper-case hex key", "set=1\n" + strings.ToUpper(pk) + "\n", ""}, // compared only
		{"replace_peers=false", "set=1\nreplace_peers=false\n\n", "errno=-22\n\n"},
		{"allowed_ip before public_key", "set=1\nallowed_ip=10.0.0.0/8\n\n", "errno=-22\n\n"},
		{"bad public key", "set=1\npublic_key=zz\n\n", "errno=-22\n\n"},
		{"prefix too long", "set=1\n" + pk + "allowed_ip=10.0.0.0/33\n\n", "errno=-22\n\n"},
		{"keepalive too big", "set=1\n" + pk + "persistent_keepalive_interval=65536\n\n", "errno=-22\n\n"},
		{"endpoint by name", "set=1\n" + pk + "endpoint=example.com:1\n\n", "errno=-22\n\n"},
		{"endpoint without port", "set=1\n" + pk + "endpoint=192.0.2.1\n\n", "errno=-22\n\n"},
		{"protocol_version=2", "set=1\n" + pk + "protocol_version=2\n\n", "errno=-22\n\n"},
		{"unknown peer key", "set=1\n" + pk + "bogus=1\n\n", "errno=-22\n\n"},
		{"remove=false", "set=1\n" + pk + "remove=false\n\n", "errno=-22\n\n"},
		{"line without =", "set=1\nnoequals\n\n", "errno=-71\n\n"},
		{"get with trailing data", "get=1\nx\n\n", ""}, // compared only
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := newSolo(t)
			ours := ourUAPI(t, d)
			ref, _ := refUAPI(t)
			a := ours.ask(tc.req)
			if tc.errno != "" && a != tc.errno {
				t.Errorf("ours answered %q, want %q", a, tc.errno)
			}
			// The reference may drop the connection after some errors; it
			// answers before that, so its answer is still comparable.
			b := ref.ask(tc.req)
			if errnoLine(a) != errnoLine(b) {
				t.Errorf("ours %q, reference %q", a, b)
			}
		})
	}
}

// withoutCounters blanks the tx_bytes and rx_bytes values: the reference
// counts an initiation it attempts while down, which is its own quirk.
func withoutCounters(s string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if k, _, ok := strings.Cut(l, "="); ok && (k == "tx_bytes" || k == "rx_bytes") {
			lines[i] = k + "=N\n"
		}
	}
	return strings.Join(lines, "")
}

// freeUDPPort returns a UDP port that was free a moment ago on every
// address, as a decimal string.
func freeUDPPort(t *testing.T) string {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return fmt.Sprint(c.LocalAddr().(*net.UDPAddr).Port)
}

// errnoLine returns the errno line of an answer.
func errnoLine(a string) string {
	for _, l := range strings.Split(a, "\n") {
		if strings.HasPrefix(l, "errno=") {
			return l
		}
	}
	return ""
}

// TestAcceptanceUAPIPortInUse: on a device that is up, a listen_port held by
// another socket is answered errno=-98, like the reference, and the device
// keeps its old port.
func TestAcceptanceUAPIPortInUse(t *testing.T) {
	squat, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		t.Fatal(err)
	}
	defer squat.Close()
	port := squat.LocalAddr().(*net.UDPAddr).Port

	d := device.NewDevice(memtun.New("wl0", 1420), conn.NewStdBind(), device.Options{})
	t.Cleanup(d.Close)
	must(t, d.Up())
	ours := ourUAPI(t, d)
	ref, refDev := refUAPI(t)
	must(t, refDev.Up())
	req := fmt.Sprintf("set=1\nlisten_port=%d\n\n", port)
	a, b := ours.ask(req), ref.ask(req)
	if a != "errno=-98\n\n" || a != b {
		t.Fatalf("port in use: ours %q, reference %q, want %q", a, b, "errno=-98\n\n")
	}
	g := ours.ask("get=1\n\n")
	if strings.Contains(g, fmt.Sprintf("listen_port=%d\n", port)) || !strings.Contains(g, "listen_port=") {
		t.Fatalf("after a refused port the get answer is:\n%s", g)
	}
}

// TestAcceptanceUAPIClampedKeyReadsBack: an unclamped private key is stored
// and reported clamped, and the public key derived from it is the clamped
// key's.
func TestAcceptanceUAPIClampedKeyReadsBack(t *testing.T) {
	d, _, _ := newSolo(t)
	u := ourUAPI(t, d)
	raw := mustKey(t)
	raw[0] |= 7
	raw[31] |= 0x80
	raw[31] &^= 0x40
	clamped := raw
	clamped.Clamp()
	if clamped == raw {
		t.Fatal("test key is already clamped")
	}
	if a := u.ask("set=1\nprivate_key=" + hexKey(raw) + "\n\n"); a != "errno=0\n\n" {
		t.Fatalf("set answered %q", a)
	}
	g := u.ask("get=1\n\n")
	if !strings.Contains(g, "private_key="+hexKey(clamped)+"\n") {
		t.Fatalf("get does not report the clamped key %s:\n%s", hexKey(clamped), g)
	}
	// Our own public key, derived from the clamped key, is refused as a peer.
	if a := u.ask("set=1\npublic_key=" + hexKey(clamped.PublicKey()) + "\nallowed_ip=10.0.0.0/8\n\n"); a != "errno=0\n\n" {
		t.Fatalf("own key as peer answered %q", a)
	}
	if g := u.ask("get=1\n\n"); strings.Contains(g, "public_key=") {
		t.Fatalf("a peer with our own public key was added:\n%s", g)
	}
	// A peer and then, in the same request, a private key whose public key
	// is that peer's: the peer goes.
	other := mustKey(t)
	if a := u.ask("set=1\nprivate_key=" + hexKey(other) + "\npublic_key=" + hexKey(mustKey(t).PublicKey()) + "\n\n"); a != "errno=0\n\n" {
		t.Fatalf("set answered %q", a)
	}
	if a := u.ask("set=1\npublic_key=" + hexKey(raw.PublicKey()) + "\n\n"); a != "errno=0\n\n" {
		t.Fatalf("set answered %q", a)
	}
	if a := u.ask("set=1\nprivate_key=" + hexKey(raw) + "\n\n"); a != "errno=0\n\n" {
		t.Fatalf("set answered %q", a)
	}
	if g := u.ask("get=1\n\n"); strings.Count(g, "public_key=") != 1 || strings.Contains(g, hexKey(raw.PublicKey())) {
		t.Fatalf("setting our key did not remove the peer with that public key:\n%s", g)
	}
}

// TestAcceptanceUAPI131071PrefixesThroughGet: one peer holding 131,071
// allowed IPs reads back in full, each prefix exactly once, through the
// device's Get over a UAPI connection; and Get streams: it allocates far
// less than the size of its answer.
func TestAcceptanceUAPI131071PrefixesThroughGet(t *testing.T) {
	d, _, _ := newSolo(t)
	pub := mustKey(t).PublicKey()
	pfx := bigPrefixes(bigPrefixCount)
	must(t, d.Configure(&device.Config{PrivateKey: ptr(mustKey(t)), Peers: []device.PeerConfig{{
		PublicKey: pub, AllowedIPs: pfx,
	}}}))
	u := ourUAPI(t, d)
	a := u.ask("get=1\n\n")
	if !strings.HasSuffix(a, "errno=0\n\n") {
		t.Fatalf("get did not end with errno=0: ...%q", a[max(0, len(a)-100):])
	}
	want := make(map[netip.Prefix]bool, len(pfx))
	for _, c := range pfx {
		want[c.Prefix] = true
	}
	n := 0
	for _, l := range strings.Split(a, "\n") {
		v, ok := strings.CutPrefix(l, "allowed_ip=")
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(v)
		if err != nil {
			t.Fatalf("bad allowed_ip line %q", l)
		}
		if !want[p] {
			t.Fatalf("%v reported twice or never set", p)
		}
		delete(want, p)
		n++
	}
	if n != bigPrefixCount || len(want) != 0 {
		t.Fatalf("read back %d prefixes, %d missing, want %d", n, len(want), bigPrefixCount)
	}

	// Streaming: the answer is about len(a) bytes; building it whole would
	// allocate at least that much.
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := uapi.NewWriter(io.Discard)
	must(t, d.WriteStatus(w))
	must(t, w.Flush())
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(len(a))/4 {
		t.Fatalf("WriteStatus allocated %d bytes for a %d-byte answer: it is not streamed", alloc, len(a))
	}
	// The connection carries on after the big answer.
	if a := u.ask("set=1\npublic_key=" + hexKey(pub) + "\nreplace_allowed_ips=true\nallowed_ip=10.0.0.0/8\n\n"); a != "errno=0\n\n" {
		t.Fatalf("set after the big get answered %q", a)
	}
	if a := u.ask("get=1\n\n"); strings.Count(a, "allowed_ip=") != 1 || !strings.Contains(a, "allowed_ip=10.0.0.0/8\n") {
		t.Fatalf("get after replace_allowed_ips:\n%s", a)
	}
}

// TestAcceptanceUAPISemanticsAgainstReference applies sequences of set
// operations that exercise the corner cases of the set semantics to both
// implementations and compares what get reports afterwards.
func TestAcceptanceUAPISemanticsAgainstReference(t *testing.T) {
	own := mustKey(t)
	k1, k2, k3 := mustKey(t).PublicKey(), mustKey(t).PublicKey(), mustKey(t).PublicKey()
	pk := func(k noise.PublicKey) string { return "public_key=" + hexKey(k) + "\n" }
	cases := []struct {
		name string
		sets []string
	}{
		{"update_only on a missing peer ignores its lines", []string{
			pk(k1) + "update_only=true\nallowed_ip=10.1.0.0/16\nendpoint=192.0.2.1:1\n" + pk(k2) + "allowed_ip=10.2.0.0/16\n",
		}},
		{"remove ignores the peer's later lines", []string{
			pk(k1) + "allowed_ip=10.1.0.0/16\n",
			pk(k1) + "remove=true\nallowed_ip=10.3.0.0/16\n" + pk(k2) + "allowed_ip=10.2.0.0/16\n",
		}},
		{"own public key as a peer is ignored with its lines", []string{
			pk(own.PublicKey()) + "allowed_ip=10.1.0.0/16\n" + pk(k2) + "allowed_ip=10.2.0.0/16\n",
		}},
		{"replace_peers alone removes everything", []string{
			pk(k1) + "allowed_ip=10.1.0.0/16\n" + pk(k2) + "allowed_ip=10.2.0.0/16\n",
			"replace_peers=true\n",
		}},
		{"replace_peers then a peer again", []string{
			pk(k1) + "allowed_ip=10.1.0.0/16\nendpoint=192.0.2.1:1\n" + pk(k2),
			"replace_peers=true\n" + pk(k1) + "allowed_ip=10.4.0.0/16\n",
		}},
		{"a prefix moves to the last peer that claims it", []string{
			pk(k1) + "allowed_ip=10.1.0.0/16\nallowed_ip=10.5.0.0/16\n" + pk(k2) + "allowed_ip=10.1.0.0/16\n",
		}},
		{"non-canonical prefixes are masked", []string{
			pk(k1) + "allowed_ip=10.1.2.3/8\nallowed_ip=fd00::1234/64\nallowed_ip=192.0.2.1/32\n",
		}},
		{"removing a prefix held by another peer changes nothing", []string{
			pk(k1) + "allowed_ip=10.1.0.0/16\n" + pk(k2) + "allowed_ip=-10.1.0.0/16\n",
		}},
		{"replace_allowed_ips then removal of a kept prefix", []string{
			pk(k1) + "allowed_ip=10.1.0.0/16\nallowed_ip=10.2.0.0/16\n",
			pk(k1) + "replace_allowed_ips=true\nallowed_ip=10.3.0.0/16\nallowed_ip=-10.3.0.0/16\nallowed_ip=10.4.0.0/16\n",
		}},
		// A 4in6 endpoint is left out on purpose: this device reports it as
		// plain IPv4 (conn normalises it), the reference as [::ffff:a.b.c.d].
		{"endpoints: IPv6, IPv4, replaced", []string{
			pk(k1) + "endpoint=192.0.2.9:7\n" + pk(k2) + "endpoint=[2001:db8::5]:65535\n" + pk(k3) + "endpoint=192.0.2.1:1\n",
			pk(k3) + "endpoint=198.51.100.4:4\n",
		}},
		{"link-local IPv6 endpoint with a zone", []string{
			pk(k1) + "endpoint=[fe80::1%lo]:51820\n",
		}},
		{"persistent keepalive changed and turned off", []string{
			pk(k1) + "persistent_keepalive_interval=25\n" + pk(k2) + "persistent_keepalive_interval=65535\n",
			pk(k1) + "persistent_keepalive_interval=0\n",
		}},
		{"preshared key set then cleared", []string{
			pk(k1) + "preshared_key=" + strings.Repeat("ab", 32) + "\n" + pk(k2) + "preshared_key=" + strings.Repeat("cd", 32) + "\n",
			pk(k2) + "preshared_key=" + strings.Repeat("0", 64) + "\n",
		}},
		{"private key cleared", []string{
			pk(k1),
			"private_key=" + strings.Repeat("0", 64) + "\n",
		}},
		{"private key matching a peer removes it", []string{
			pk(k1) + pk(noise.Key(mustHexKey(t, strings.Repeat("11", 32))).PublicKey()) + "allowed_ip=10.9.0.0/16\n",
			"private_key=" + strings.Repeat("11", 32) + "\n",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := newSolo(t)
			ours := ourUAPI(t, d)
			ref, _ := refUAPI(t)
			first := "set=1\nprivate_key=" + hexKey(own) + "\n"
			for i, s := range tc.sets {
				req := "set=1\n" + s + "\n"
				if i == 0 {
					req = first + s + "\n"
				}
				a, b := ours.ask(req), ref.ask(req)
				if a != b {
					t.Fatalf("set %d: ours %q, reference %q", i, a, b)
				}
			}
			a, b := comparableGet(ours.ask("get=1\n\n")), comparableGet(ref.ask("get=1\n\n"))
			if a != b {
				t.Fatalf("get differs\nours:\n%s\nreference:\n%s", a, b)
			}
		})
	}
}

// comparableGet canonicalises a get answer and blanks what legitimately
// differs between a down device and the reference, which comes up by
// itself: counters and the bound port.
func comparableGet(s string) string {
	var kept []string
	for _, l := range strings.SplitAfter(withoutCounters(canonicalGet(s)), "\n") {
		if !strings.HasPrefix(l, "listen_port=") {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "")
}

func mustHexKey(t *testing.T, s string) [32]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad hex key %q", s)
	}
	return [32]byte(b)
}

func TestDeviceSetGetTextRoundTrip(t *testing.T) {
	d, _, _ := newSolo(t)
	priv := mustKey(t)
	p1, p2 := mustKey(t).PublicKey(), mustKey(t).PublicKey()
	psk, _ := noise.GeneratePresharedKey()
	cfg := fmt.Sprintf(`private_key=%s
listen_port=51820
fwmark=7
public_key=%s
preshared_key=%s
endpoint=192.0.2.9:1234
persistent_keepalive_interval=0
allowed_ip=10.1.0.0/16
allowed_ip=fd00:1::/64
public_key=%s
endpoint=[2001:db8::9]:4321
allowed_ip=10.2.0.1/32
`, hexKey(priv), hexKey(p1), hexKey(psk), hexKey(p2))
	must(t, uapi.SetText(d, cfg))
	got, err := uapi.GetText(d)
	must(t, err)
	for _, want := range []string{
		"private_key=" + hexKey(priv) + "\n",
		"listen_port=51820\n",
		"fwmark=7\n",
		"public_key=" + hexKey(p1) + "\npreshared_key=" + hexKey(psk) + "\n",
		"endpoint=192.0.2.9:1234\n",
		"allowed_ip=10.1.0.0/16\nallowed_ip=fd00:1::/64\n",
		"public_key=" + hexKey(p2) + "\n",
		"endpoint=[2001:db8::9]:4321\n",
		"allowed_ip=10.2.0.1/32\n",
		"last_handshake_time_sec=0\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("get answer lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, hexKey(p1)) > strings.Index(got, hexKey(p2)) {
		t.Error("peers not in creation order")
	}
	if err := uapi.SetText(d, "bogus_key=1\n"); err == nil {
		t.Error("invalid line accepted")
	}
}

func TestDeviceServeConversation(t *testing.T) {
	d, _, _ := newSolo(t)
	c1, c2 := net.Pipe()
	go uapi.Serve(c1, d)
	defer c2.Close()
	priv := mustKey(t)
	peerKey := mustKey(t).PublicKey()
	rd := bufio.NewReader(c2)
	readAnswer := func() string {
		var sb strings.Builder
		for {
			line, err := rd.ReadString('\n')
			if err != nil {
				t.Fatalf("reading answer: %v", err)
			}
			if line == "\n" {
				return sb.String()
			}
			sb.WriteString(line)
		}
	}
	fmt.Fprintf(c2, "set=1\nprivate_key=%s\nlisten_port=7777\npublic_key=%s\nallowed_ip=10.9.0.0/16\n\n", hexKey(priv), hexKey(peerKey))
	if a := readAnswer(); a != "errno=0\n" {
		t.Fatalf("set answered %q", a)
	}
	fmt.Fprintf(c2, "set=1\nlisten_port=nope\n\n")
	if a := readAnswer(); a != "errno=-22\n" {
		t.Fatalf("bad set answered %q", a)
	}
	fmt.Fprintf(c2, "get=1\n\n")
	a := readAnswer()
	for _, want := range []string{"private_key=" + hexKey(priv), "listen_port=7777", "public_key=" + hexKey(peerKey), "allowed_ip=10.9.0.0/16", "errno=0"} {
		if !strings.Contains(a, want+"\n") {
			t.Errorf("get answer lacks %q:\n%s", want, a)
		}
	}
}

// BenchmarkAcceptanceDeviceGet measures a get=1 answer for one peer with
// 131,071 allowed IPs through Device.WriteStatus and a Writer, per answer.
func BenchmarkAcceptanceDeviceGet(b *testing.B) {
	d := device.NewDevice(memtun.New("get", 1420), conntest.NewNetwork().NewBind(netip.MustParseAddr("192.0.2.1")), device.Options{})
	b.Cleanup(d.Close)
	must(b, d.Configure(&device.Config{PrivateKey: ptr(mustKey(b)), Peers: []device.PeerConfig{{
		PublicKey: mustKey(b).PublicKey(), AllowedIPs: bigPrefixes(bigPrefixCount),
	}}}))
	var lines lineCounter
	w := uapi.NewWriter(&lines)
	must(b, d.WriteStatus(w))
	must(b, w.Flush())
	if lines.n < bigPrefixCount {
		b.Fatalf("get wrote %d lines, want at least %d", lines.n, bigPrefixCount)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w := uapi.NewWriter(io.Discard)
		if err := d.WriteStatus(w); err != nil {
			b.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			b.Fatal(err)
		}
	}
}
