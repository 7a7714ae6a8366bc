package server

import (
	"errors"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

func writeFiles(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestParseConfigFull(t *testing.T) {
	var k wrap.StaticKey
	k[5] = 9
	dir := writeFiles(t, map[string]string{"ca.crt": testpki.FixtureCA, "server.crt": testpki.FixtureCert, "ta.key": string(k.Format())})
	text := `# comment
mode server
tls-server
port 11940
proto udp4
local 127.0.0.1
dev tun
topology subnet
server 10.8.0.0 255.255.255.0
ca ca.crt
cert server.crt
<key>
` + testpki.FixtureKey + `</key>
tls-auth ta.key 0
auth SHA256
dh none
data-ciphers AES-128-GCM:?BF-CBC:CHACHA20-POLY1305
push "route 10.99.0.0 255.255.255.0"
push "dhcp-option DNS 10.8.0.1"
route 10.50.0.0 255.255.0.0
keepalive 10 60
client-to-client
duplicate-cn
max-clients 10
reneg-sec 120
remote-cert-tls client
verb 3
persist-key
`
	c, err := ParseConfig([]byte(text), "server.conf", dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != netip.MustParseAddrPort("127.0.0.1:11940") || c.Proto != UDP || c.Network != netip.MustParsePrefix("10.8.0.0/24") {
		t.Fatalf("listen %v proto %v network %v", c.Listen, c.Proto, c.Network)
	}
	if string(c.CA) != testpki.FixtureCA || string(c.Cert) != testpki.FixtureCert || string(c.Key) != testpki.FixtureKey {
		t.Fatalf("PEM %q %q %q", c.CA, c.Cert, c.Key)
	}
	if c.TLSAuth == nil || *c.TLSAuth != k || c.KeyDirection != wrap.Direction0 || c.Auth != "SHA256" {
		t.Fatalf("tls-auth %v dir %v auth %q", c.TLSAuth != nil, c.KeyDirection, c.Auth)
	}
	if len(c.DataCiphers) != 2 || c.DataCiphers[0] != data.AES128GCM || c.DataCiphers[1] != data.ChaCha20Poly1305 {
		t.Fatalf("ciphers %v", c.DataCiphers)
	}
	if strings.Join(c.Push, "|") != "route 10.99.0.0 255.255.255.0|dhcp-option DNS 10.8.0.1" {
		t.Fatalf("push %q", c.Push)
	}
	if len(c.Routes) != 1 || c.Routes[0] != netip.MustParsePrefix("10.50.0.0/16") {
		t.Fatalf("routes %v", c.Routes)
	}
	if c.Ping != 10 || c.PingRestart != 60 || !c.ClientToClient || !c.DuplicateCN || c.MaxClients != 10 || c.RenegSec != 120 || c.RemoteCertTLS != "client" {
		t.Fatalf("%+v", c)
	}
	if len(c.Warnings) != 3 || c.Warnings[0].Directive != "dh" || c.Warnings[2].Line != 31 {
		t.Fatalf("warnings %v", c.Warnings)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\nproto tcp6-server\n"+testpki.FixtureInline), "s.conf", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != netip.MustParseAddrPort("[::]:1194") || c.Proto != TCP || len(c.DataCiphers) != 0 {
		t.Fatalf("listen %v proto %v ciphers %v", c.Listen, c.Proto, c.DataCiphers)
	}
}

func TestParseConfigErrors(t *testing.T) {
	const base = "server 10.8.0.0 255.255.255.0\n" + testpki.FixtureInline
	for _, tc := range []struct {
		name, text string
		line       int
		want       string
	}{
		{"no pool", "<ca>\n" + testpki.FixtureCA + "</ca>\n", 0, "no `server NET MASK`"},
		{"no CA", "server 10.8.0.0 255.255.255.0\n", 0, "no CA certificate"},
		{"host bits", "server 10.8.0.1 255.255.255.0\n", 1, "has host bits set"},
		{"bad mask", "server 10.8.0.0 255.0.255.0\n", 1, "non-contiguous netmask"},
		{"tiny pool", "server 10.8.0.0 255.255.255.252\n", 1, "/29 or larger"},
		{"compression pushed, not framed", base + "push \"compress stub-v2\"\n", 17, "s.conf:17: push: clients are told to use compress stub-v2 framing, but the server's own is none"},
		{"compression pushed, other framing", base + "comp-lzo no\npush \"compress stub-v2\"\n", 18, "the server's own is comp-lzo"},
		{"bad pushed compression", base + "push \"compress lz5\"\n", 17, "unknown algorithm"},
		{"net30", base + "topology net30\n", 17, "topology \"net30\""},
		{"tls-crypt-v2", base + "tls-crypt-v2 k.key\n", 17, "tls-crypt-v2"},
		{"client directive", base + "remote 1.2.3.4\n", 17, "client directive"},
		{"unclosed block", "<ca>\nx\n", 1, "not closed"},
		{"bad quote", base + "push \"route 1.2.3.4\n", 17, "unterminated quote"},
		{"push ifconfig", base + "push \"ifconfig 10.8.0.9 255.255.255.0\"\n", 17, "pushed by the server itself"},
		{"push comma", base + "push \"route 1.2.3.4,x\"\n", 17, "comma"},
		{"bad cipher", base + "data-ciphers BF-CBC\n", 17, "s.conf:17: data-ciphers: data: unsupported cipher"},
		{"bad ncp-ciphers", base + "ncp-ciphers BF-CBC\n", 17, "s.conf:17: data-ciphers: data: unsupported cipher"},
		{"no CA names no line", "server 10.8.0.0 255.255.255.0\n", 0, "s.conf: ca: no CA certificate given"},
		{"cert without key", "server 10.8.0.0 255.255.255.0\n<ca>\n" + testpki.FixtureCA + "</ca>\n<cert>\n" + testpki.FixtureCert + "</cert>\n", 7, "s.conf:7: cert: the server needs both cert and key"},
		{"bad keepalive", base + "keepalive 10 15\n", 17, "at least twice"},
		{"bad port", base + "port 70000\n", 17, "bad number"},
		{"client key direction", base + "<tls-auth>\n" + string(new(wrap.StaticKey).Format()) + "</tls-auth>\nkey-direction 1\n", 37, "s.conf:37: key-direction: a server uses key direction 0"},
		{"file refs forbidden", "ca ca.crt\n", 1, "file references are not allowed"},
		{"tap", base + "dev tap0\n", 17, "only tun devices"},
		{"server-ipv6 IPv4", base + "server-ipv6 10.9.0.0/24\n", 17, "want an IPv6 prefix"},
		{"server-ipv6 /120", base + "server-ipv6 fd42::/120\n", 17, "/64 to /112"},
		{"server-ipv6 host bits", base + "server-ipv6 fd42::1/64\n", 17, "has host bits set"},
		{"server-ipv6 too small", "server 10.8.0.0 255.255.0.0\nserver-ipv6 fd42::/112\n" + testpki.FixtureInline,
			2, "too small for the 65533 clients"},
		{"ifconfig-ipv6", base + "ifconfig-ipv6 fd42::1/64 fd42::2\n", 17, "use server-ipv6"},
		{"push ifconfig-ipv6", base + "push \"ifconfig-ipv6 fd42::9/64 fd42::1\"\n", 17, "pushed by the server itself"},
		{"route-ipv6 gateway", base + "route-ipv6 fd99::/64 fd42::7\n", 17, "gateways"},
		{"route-ipv6 IPv4", base + "route-ipv6 10.0.0.0/8\n", 17, "want an IPv6 prefix"},
		{"both wraps", base + "<tls-auth>\n" + string(new(wrap.StaticKey).Format()) + "</tls-auth>\n<tls-crypt>\n" + string(new(wrap.StaticKey).Format()) + "</tls-crypt>\n", 37, "s.conf:37: tls-crypt: tls-auth and tls-crypt are mutually exclusive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.text), "s.conf", "")
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %v is not a *ConfigError", err)
			}
			if ce.Line != tc.line || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q (line %d), want line %d and %q", err, ce.Line, tc.line, tc.want)
			}
		})
	}
}

func TestClientDirectivesInAServerFileAreErrors(t *testing.T) {
	const base = "server 10.8.0.0 255.255.255.0\n" + testpki.FixtureInline // 16 lines
	for _, line := range []string{
		"client", "tls-client", "pull", "remote 192.0.2.1 1194", "remote-random", "nobind", "auth-user-pass",
		"resolv-retry infinite", "connect-retry 5", "route-nopull", "pull-filter ignore route", "http-proxy p 8080",
		"<auth-user-pass>",
	} {
		text := base + "verb 3\n" + line + "\n"
		name := strings.Fields(line)[0]
		if strings.HasPrefix(line, "<") {
			text += "u\np\n</auth-user-pass>\n"
		}
		_, err := ParseConfig([]byte(text), "s.conf", "")
		var ce *ConfigError
		if !errors.As(err, &ce) || !errors.Is(err, config.ErrWrongRole) {
			t.Errorf("%s: got %v, want a wrong-side *ConfigError", line, err)
			continue
		}
		want := "s.conf:18: " + name + ": a client directive in a server configuration"
		if ce.Line != 18 || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %q, want %q", line, err, want)
		}
	}
}

// TestOneModelForBothSides parses the directives both sides share in a
// client and a server file: config.Common comes out the same, apart from
// each side's defaults.
func TestOneModelForBothSides(t *testing.T) {
	var k wrap.StaticKey
	k[1] = 42
	shared := testpki.FixtureInline + "<tls-auth>\n" + string(k.Format()) + "</tls-auth>\n" +
		"key-direction 0\nauth SHA256\ntls-version-min 1.3\ndata-ciphers AES-128-GCM:CHACHA20-POLY1305\nkeepalive 5 30\n"
	srv, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\n"+shared), "s.conf", "")
	if err != nil {
		t.Fatal(err)
	}
	cli, err := config.Parse([]byte("client\nremote h\n"+shared+"reneg-sec 0\n"), "c.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(srv.Common, cli.Common) {
		t.Fatalf("Common differs:\nserver %+v\nclient %+v", srv.Common, cli.Common)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("server 10.8.0.0 255.255.255.0\n" + testpki.FixtureInline + "push \"route 10.1.0.0 255.255.0.0\"\n"))
	f.Add([]byte("port 1\nproto tcp\nkeepalive 1 2\n<tls-crypt>\n-----BEGIN OpenVPN Static key V1-----\n00\n</tls-crypt>\n"))
	f.Add([]byte("push 'a \\\" b'\n\"\n<x>\n"))
	f.Add([]byte("server 10.8.0.0 255.255.0.0\nserver-ipv6 fd42::/112\nroute-ipv6 fd99::/64\n" + testpki.FixtureInline))
	f.Add([]byte("server-ipv6 fd42::/64\n" + testpki.FixtureInline))
	f.Add([]byte("server 10.8.0.0 255.255.255.0\nclient\nremote h\n<auth-user-pass>\nu\np\n</auth-user-pass>\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		c, err := ParseConfig(text, "fuzz.conf", "")
		if err == nil && (!(c.Network.IsValid() || c.Network6.IsValid()) || len(c.CA) == 0 || !c.Listen.IsValid()) {
			t.Fatalf("accepted an incomplete configuration: %+v", c)
		}
		var ce *ConfigError
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("error %v has no location", err)
		}
	})
}

func TestPool(t *testing.T) {
	p, err := newPool(netip.MustParsePrefix("10.8.0.0/29"))
	if err != nil {
		t.Fatal(err)
	}
	if p.server != netip.MustParseAddr("10.8.0.1") || p.size() != 5 {
		t.Fatalf("server %v size %d", p.server, p.size())
	}
	var got []string
	for i := 0; i < 5; i++ {
		a, err := p.get()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, a.String())
	}
	if strings.Join(got, " ") != "10.8.0.2 10.8.0.3 10.8.0.4 10.8.0.5 10.8.0.6" {
		t.Fatalf("addresses %v", got)
	}
	if _, err := p.get(); !errors.Is(err, errPoolFull) {
		t.Fatalf("sixth address: %v", err)
	}
	p.put(netip.MustParseAddr("10.8.0.4"))
	if a, _ := p.get(); a != netip.MustParseAddr("10.8.0.4") {
		t.Fatalf("reused %v", a)
	}
	if _, err := newPool(netip.MustParsePrefix("10.8.0.0/30")); err == nil {
		t.Fatal("accepted a /30 pool")
	}
}

func TestParseConfigIPv6(t *testing.T) {
	c, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\nserver-ipv6 fd42:42::/64\nroute-ipv6 fd99::/64\n"+
		"push \"route-ipv6 fd99::/64\"\n"+testpki.FixtureInline), "s.conf", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Network6 != netip.MustParsePrefix("fd42:42::/64") || len(c.Routes) != 1 || c.Routes[0] != netip.MustParsePrefix("fd99::/64") ||
		len(c.Push) != 1 || c.Push[0] != "route-ipv6 fd99::/64" {
		t.Fatalf("%+v", c)
	}
}

// server-ipv6 alone makes an IPv6-only server; even its smallest prefix
// holds all of its client slots.
func TestParseConfigIPv6Only(t *testing.T) {
	for _, pfx := range []string{"fd42:42::/64", "fd42:42::/112"} {
		c, err := ParseConfig([]byte("server-ipv6 "+pfx+"\n"+testpki.FixtureInline), "s.conf", "")
		if err != nil {
			t.Fatalf("%s: %v", pfx, err)
		}
		if c.Network.IsValid() || c.Network6 != netip.MustParsePrefix(pfx) {
			t.Fatalf("%s: pools %v %v", pfx, c.Network, c.Network6)
		}
	}
}

// The IPv6 pool pairs each IPv4 pool address with PREFIX::1000 + index.
func TestPool6(t *testing.T) {
	p4, err := newPool(netip.MustParsePrefix("10.8.0.0/24"))
	if err != nil {
		t.Fatal(err)
	}
	p6, err := newPool6(netip.MustParsePrefix("fd42:42::/64"), p4)
	if err != nil {
		t.Fatal(err)
	}
	if p6.server != netip.MustParseAddr("fd42:42::1") {
		t.Fatalf("server %s", p6.server)
	}
	for v4, want := range map[string]string{"10.8.0.2": "fd42:42::1000", "10.8.0.3": "fd42:42::1001", "10.8.0.254": "fd42:42::10fc"} {
		if got := p6.addrFor(netip.MustParseAddr(v4)); got != netip.MustParseAddr(want) {
			t.Errorf("addrFor(%s) = %s, want %s", v4, got, want)
		}
	}
	big, _ := newPool(netip.MustParsePrefix("10.0.0.0/8"))
	if p6, err := newPool6(netip.MustParsePrefix("2001:db8:0:1::/64"), big); err != nil ||
		p6.addrFor(netip.MustParseAddr("10.255.255.254")) != netip.MustParseAddr("2001:db8:0:1::100:ffc") {
		t.Fatalf("/8 in /64: %v", err)
	}
	if _, err := newPool6(netip.MustParsePrefix("fd42::/112"), big); err == nil {
		t.Fatal("a /112 accepted for a /8 IPv4 pool")
	}
	if p6, err := newPool6(netip.MustParsePrefix("fd42::/112"), p4); err != nil || !p6.network.Contains(p6.addrFor(netip.MustParseAddr("10.8.0.254"))) {
		t.Fatalf("/112 for a /24: %v", err)
	}
}

func TestIPAddrs(t *testing.T) {
	v6 := make([]byte, 40)
	v6[0] = 0x60
	copy(v6[8:], netip.MustParseAddr("fd42::1000").AsSlice())
	copy(v6[24:], netip.MustParseAddr("fd42::1").AsSlice())
	if src, dst, ok := ipAddrs(v6); !ok || src != netip.MustParseAddr("fd42::1000") || dst != netip.MustParseAddr("fd42::1") {
		t.Fatalf("IPv6: %s %s %v", src, dst, ok)
	}
	v4 := make([]byte, 20)
	v4[0] = 0x45
	copy(v4[12:], []byte{10, 8, 0, 2, 10, 8, 0, 1})
	if src, dst, ok := ipAddrs(v4); !ok || src != netip.MustParseAddr("10.8.0.2") || dst != netip.MustParseAddr("10.8.0.1") {
		t.Fatalf("IPv4: %s %s %v", src, dst, ok)
	}
	for _, bad := range [][]byte{nil, v6[:39], v4[:19], {0x50, 0, 0, 0}} {
		if _, _, ok := ipAddrs(bad); ok {
			t.Errorf("% x accepted", bad)
		}
	}
}

func TestMaskString(t *testing.T) {
	for bits, want := range map[int]string{0: "0.0.0.0", 8: "255.0.0.0", 24: "255.255.255.0", 29: "255.255.255.248", 32: "255.255.255.255"} {
		if got := maskString(bits); got != want {
			t.Errorf("maskString(%d) = %s, want %s", bits, got, want)
		}
	}
}

// TestMisspeltServerDirectivesGetSuggestions checks that an unknown
// directive's warning in a server file names the likely one, at its line.
func TestMisspeltServerDirectivesGetSuggestions(t *testing.T) {
	const base = "server 10.8.0.0 255.255.255.0\n" + testpki.FixtureInline // 16 lines
	for _, c := range []struct{ line, want string }{
		{"keepalve 10 60", "line 17: keepalve: unknown directive ignored; did you mean keepalive?"},
		{"duplicat-cn", "line 17: duplicat-cn: unknown directive ignored; did you mean duplicate-cn?"},
		{"data-cipher AES-256-GCM", "line 17: data-cipher: unknown directive ignored; did you mean data-ciphers?"},
		{"frobnicate", "line 17: frobnicate: unknown directive ignored"},
	} {
		cfg, err := ParseConfig([]byte(base+c.line+"\n"), "s.conf", "")
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if len(cfg.Warnings) != 1 || cfg.Warnings[0].String() != c.want {
			t.Errorf("%s: warnings %v, want %q", c.line, cfg.Warnings, c.want)
		}
	}
}
