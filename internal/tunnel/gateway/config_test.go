package gateway

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// checkRoundTrip converts g to the wg-quick model, renders that as a
// wg-quick file, parses it back and compares it with g.
func checkRoundTrip(t *testing.T, g *Gateway) {
	t.Helper()
	c := g.Config()
	back, err := wgquick.Parse("rt.conf", c.Marshal())
	if err != nil {
		t.Fatalf("the wg-quick form of %s does not parse: %v\n%s", g.Path, err, c.Marshal())
	}
	in := back.Interface
	if (in.PrivateKey == nil) != (g.PrivateKey == nil) || in.PrivateKey != nil && *in.PrivateKey != *g.PrivateKey {
		t.Error("private key changed")
	}
	if !reflect.DeepEqual(in.ListenPort, g.ListenPort) {
		t.Errorf("listen port %v, want %v", in.ListenPort, g.ListenPort)
	}
	if fw := uint32(0); in.FwMark != nil {
		fw = *in.FwMark
		if fw != g.FwMark {
			t.Errorf("fwmark %d, want %d", fw, g.FwMark)
		}
	} else if g.FwMark != 0 {
		t.Errorf("fwmark lost")
	}
	if !reflect.DeepEqual(append([]netip.Prefix{}, in.Addresses...), append([]netip.Prefix{}, g.Addresses...)) {
		t.Errorf("addresses %v, want %v", in.Addresses, g.Addresses)
	}
	if in.MTU != g.MTU || in.Table != g.Table {
		t.Errorf("mtu/table %d %q, want %d %q", in.MTU, in.Table, g.MTU, g.Table)
	}
	for _, h := range [][2][]string{{in.PreUp, g.PreUp}, {in.PostUp, g.PostUp}, {in.PreDown, g.PreDown}, {in.PostDown, g.PostDown}} {
		if len(h[0])+len(h[1]) > 0 && !reflect.DeepEqual(h[0], h[1]) {
			t.Errorf("hooks %q, want %q", h[0], h[1])
		}
	}
	if len(back.Peers) != len(g.Sites) {
		t.Fatalf("%d peers, want %d", len(back.Peers), len(g.Sites))
	}
	for i, p := range back.Peers {
		s := g.Sites[i]
		if p.PublicKey != s.PublicKey || p.Endpoint != s.Endpoint || !reflect.DeepEqual(p.AllowedIPs, s.Networks) {
			t.Errorf("peer %d = %+v, want site %+v", i, p, s)
		}
		if (p.PresharedKey == nil) != (s.PresharedKey == nil) || p.PresharedKey != nil && *p.PresharedKey != *s.PresharedKey {
			t.Errorf("peer %d: preshared key changed", i)
		}
		ka := uint16(0)
		if p.PersistentKeepalive != nil {
			ka = *p.PersistentKeepalive
		}
		if ka != s.PersistentKeepalive {
			t.Errorf("peer %d: keepalive %d, want %d", i, ka, s.PersistentKeepalive)
		}
	}
}

func TestConfigRoundTrip(t *testing.T) {
	for _, src := range []string{good, `[interface]
name = "gw-full"
private_key = "` + testPriv + `"
listen_port = 4500
addresses = ["10.90.0.1/24", "fd00:90::1/64"]
mtu = 1380
fwmark = 51820
table = "off"
pre_up = "echo pre %i"
post_up = ["echo a", "echo b"]
pre_down = ["echo c"]
post_down = "echo d"

[[site]]
name = "b"
public_key = "` + keyB + `"
preshared_key = "` + testPSK + `"
endpoint = "gw.b.example:4500"
networks = ["10.20.0.0/16", "fd00:20::/48"]
persistent_keepalive = 25

[[site]]
name = "c"
public_key = "` + keyC + `"
networks = ["128.0.0.0/1"]
`} {
		g, err := Parse("gw.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, g)
	}
}

// TestConfigCarriesPositions checks that the wg-quick model points back
// into the gateway file, so that `up` reports an endpoint that does not
// resolve as FILE:LINE of the site's endpoint.
func TestConfigCarriesPositions(t *testing.T) {
	g, err := Parse("/etc/wirelane/gw.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	c := g.Config()
	if c.Path != "/etc/wirelane/gw.toml" || c.Name != "gw" {
		t.Errorf("path %q name %q", c.Path, c.Name)
	}
	if c.Peers[0].Line != 6 || c.Peers[0].EndpointLine != 9 || c.Peers[1].EndpointLine != 0 {
		t.Errorf("peer lines %d %d %d", c.Peers[0].Line, c.Peers[0].EndpointLine, c.Peers[1].EndpointLine)
	}
	// The model is a copy: changing it leaves the gateway alone.
	c.Peers[0].AllowedIPs[0] = netip.MustParsePrefix("1.2.3.0/24")
	if g.Sites[0].Networks[0] != netip.MustParsePrefix("10.20.0.0/16") {
		t.Error("Config shares slices with the gateway")
	}
}

func TestPositionsIndexEveryKey(t *testing.T) {
	src := "# c\n[interface]\nname = 'x' # c\n\n[[site]]\nnetworks = [\n  \"a\", # one\n  'b',\n]\n[[site]]\n\"quoted key\" = \"\"\"\nnot = a key\n\"\"\"\nk = { a = 1, b = [2] }\n"
	p := scanPositions(src)
	for path, want := range map[string]Pos{
		"interface":           {2, 1},
		"interface.name":      {3, 1},
		"site[0]":             {5, 1},
		"site[0].networks":    {6, 1},
		"site[0].networks[0]": {7, 3},
		"site[0].networks[1]": {8, 3},
		"site[1]":             {10, 1},
		"site[1].quoted key":  {11, 1},
		"site[1].k":           {14, 1},
		"site[1].k.a":         {14, 7},
		"site[1].k.b[0]":      {14, 19},
	} {
		if got := p.at(path); got != want {
			t.Errorf("%s at %v, want %v", path, got, want)
		}
	}
	if got := p.at("site[1].not"); got.Known() {
		t.Errorf("text inside a multi-line string was taken for a key at %v", got)
	}
}
