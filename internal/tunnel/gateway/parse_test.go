package gateway

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Fixed keys for tests (not secret: generated for these tests only).
const (
	testPriv = "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk="
	keyB     = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="
	keyC     = "TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0="
	testPSK  = "FpCyhws9cxwWoV4xELtfJvjJN+zQVRPISllRWgeopVE="
)

// good is a valid two-site file the bad cases below are variations of.
const good = `[interface]
private_key = "` + testPriv + `"
listen_port = 51820
addresses = ["10.90.0.1/24"]

[[site]]
name = "berlin"
public_key = "` + keyB + `"
endpoint = "192.0.2.2:51820"
networks = ["10.20.0.0/16", "10.90.0.2/32"]

[[site]]
name = "lisbon"
public_key = "` + keyC + `"
networks = ["10.30.0.0/16"]
`

func TestParseReportsEachProblemAtItsPlace(t *testing.T) {
	site := func(body string) string {
		return "[interface]\nprivate_key = \"" + testPriv + "\"\n\n[[site]]\nname = \"a\"\npublic_key = \"" + keyB + "\"\n" + body
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"a syntax error is reported with line and column", "[interface]\nlisten_port = = 5\n",
			"gw.toml:2:15: expected value but found '=' instead"},
		{"an unclosed string is a syntax error", "[interface]\nname = \"abc\n",
			"gw.toml:2:12: strings cannot contain newlines"},
		{"key material in a syntax error is not echoed", "[interface]\nprivate_key = " + testPriv + "\n",
			"gw.toml:2:15: expected value but found (not shown) instead"},
		{"an unknown key in the second site names that site's line", good + "\n[[site]]\nname = \"x\"\npublic_key = \"" + testPSK + "\"\nnetworks = [\"10.40.0.0/16\"]\nnmae = \"oops\"\n",
			"gw.toml:21:1: unknown key \"nmae\" in [[site]]; did you mean name?"},
		{"the same unknown key in two sites is reported twice", strings.Replace(good, "name = ", "nmae = 1\nname = ", 2),
			"gw.toml:7:1: unknown key \"nmae\" in [[site]]; did you mean name?\n" +
				"gw.toml:14:1: unknown key \"nmae\" in [[site]]; did you mean name?"},
		{"an unknown top-level table", good + "\n[peer]\nx = 1\n",
			"gw.toml:17:1: unknown table or key \"peer\" (want [interface], [[site]] and [fleet])"},
		{"keys are case-sensitive", strings.Replace(good, "listen_port", "Listen_Port", 1),
			"gw.toml:3:1: unknown key \"Listen_Port\" (names are lower case: listen_port)"},
		{"a mis-cased table is reported once", strings.Replace(good, "[interface]", "[Interface]", 1),
			"gw.toml:1:1: unknown key \"Interface\" (names are lower case: interface)\ngw.toml: no [interface] table: the gateway needs at least private_key_file (or private_key)"},
		{"a byte order mark does not shift positions", "\ufeff" + strings.Replace(good, "51820\n", "0\n", 1),
			"gw.toml:3:1: listen_port = 0 is out of range (a UDP port from 1 to 65535; leave it out for a random port)"},
		{"an unknown sub-table is reported once", good + "[site.x]\ny = 1\n",
			"gw.toml:16:1: unknown key \"x\" in [[site]] (known: name, public_key, preshared_key, preshared_key_file, endpoint, networks, persistent_keepalive)"},
		{"a wrong type names both types", strings.Replace(good, "51820\n", "\"51820\"\n", 1),
			"gw.toml:3:1: listen_port must be an integer (a UDP port from 1 to 65535; leave it out for a random port), not a string"},
		{"a port out of range", strings.Replace(good, "51820\n", "70000\n", 1),
			"gw.toml:3:1: listen_port = 70000 is out of range (a UDP port from 1 to 65535; leave it out for a random port)"},
		{"a bad CIDR in a multi-line array points at the element",
			site("networks = [\n  \"10.50.0.0/16\",\n  \"10.60.0.0/33\",\n]\n"),
			"gw.toml:9:3: site \"a\": networks: \"10.60.0.0/33\" is not a CIDR prefix (like 10.20.0.0/16 or fd00:20::/48)"},
		{"host bits set", site("networks = [\"10.50.1.0/16\"]\n"),
			"gw.toml:7:13: site \"a\": network 10.50.1.0/16 has host bits set; write 10.50.0.0/16 (or 10.50.1.0/32 for the single address)"},
		{"overlapping networks between sites", strings.Replace(good, "10.30.0.0/16", "10.20.128.0/17", 1),
			"gw.toml:15:13: site \"lisbon\": network 10.20.128.0/17 overlaps 10.20.0.0/16 of site \"berlin\" (line 10); a packet must have exactly one site to go to"},
		{"overlapping networks within a site", site("networks = [\"10.50.0.0/16\", \"10.50.3.0/24\"]\n"),
			"gw.toml:7:29: site \"a\": network 10.50.3.0/24 overlaps 10.50.0.0/16, also listed for this site (line 7)"},
		{"a network holding the gateway's own address", strings.Replace(good, "\"10.90.0.2/32\"", "\"10.90.0.0/24\"", 1),
			"gw.toml:10:29: site \"berlin\": network 10.90.0.0/24 contains this gateway's own address 10.90.0.1; list the remote tunnel address as a /32 instead"},
		{"duplicate site names", strings.Replace(good, "\"lisbon\"", "\"berlin\"", 1),
			"gw.toml:13:1: site name \"berlin\" is already used by the site at line 6"},
		{"duplicate public keys", strings.Replace(good, keyC, keyB, 1),
			"gw.toml:14:1: site \"lisbon\" has the same public_key as site \"berlin\" (line 6); each site is one peer"},
		{"a site with our own key", strings.Replace(good, keyC, mustPub(testPriv), 1),
			"gw.toml:14:1: site \"lisbon\": public_key is this gateway's own public key; use the remote site's key"},
		{"a bad public key is quoted, a bad private key is not", strings.Replace(strings.Replace(good, keyC, "abc", 1), testPriv, "xyz", 1),
			"gw.toml:2:1: private_key is not a valid key (want 44 characters of base64, as `wirelane genkey` prints)\ngw.toml:14:1: site \"lisbon\": public_key \"abc\" is not a valid key (want 44 characters of base64)"},
		{"both key forms", strings.Replace(good, "listen_port", "private_key_file = \"k\"\nlisten_port", 1),
			"gw.toml:3:1: give either private_key or private_key_file, not both"},
		{"no key at all", "[interface]\nlisten_port = 1\n\n[[site]]\nname = \"a\"\npublic_key = \"" + keyB + "\"\nnetworks = [\"10.1.0.0/16\"]\n",
			"gw.toml:1:1: [interface] needs private_key_file (a file holding the key, mode 0600) or private_key"},
		{"a site without name, key and networks", "[interface]\nprivate_key = \"" + testPriv + "\"\n[[site]]\nendpoint = \"h:1\"\n",
			"gw.toml:3:1: this [[site]] has no name\ngw.toml:3:1: site #1 has no public_key\ngw.toml:3:1: site #1 has no networks (the address ranges reached through it)"},
		{"no sites", "[interface]\nprivate_key = \"" + testPriv + "\"\n",
			"gw.toml: no [[site]] table: describe at least one remote site (or join a [fleet])"},
		{"site as a plain table", "[interface]\nprivate_key = \"" + testPriv + "\"\n[site]\nname = \"a\"\n",
			"gw.toml:3:1: site must be an array of tables ([[site]]), not a table"},
		{"an endpoint without port", site("networks = [\"10.1.0.0/16\"]\nendpoint = \"gw.example\"\n"),
			"gw.toml:8:1: site \"a\": endpoint \"gw.example\" has no port (want host:port)"},
		{"an IPv6 endpoint without brackets", site("networks = [\"10.1.0.0/16\"]\nendpoint = \"2001:db8::1:51820\"\n"),
			"gw.toml:8:1: site \"a\": endpoint \"2001:db8::1:51820\": an IPv6 address must be in brackets, as in [2001:db8::1]:51820"},
		{"mtu words other than auto", strings.Replace(good, "listen_port = 51820", "mtu = \"big\"", 1),
			"gw.toml:3:1: mtu must be \"auto\" or a number from 576 to 65535, not \"big\""},
		{"mtu too small", strings.Replace(good, "listen_port = 51820", "mtu = 100", 1),
			"gw.toml:3:1: mtu = 100 is out of range (\"auto\" or 576 to 65535)"},
		{"inline site tables get positions too", "site = [\n  { name = \"a\", public_key = \"" + keyB + "\", networks = [\"10.1.0.0/16\"] },\n  { name = \"b\", public_key = \"" + keyC + "\", networks = [\"10.1.2.0/24\"] },\n]\n[interface]\nprivate_key = \"" + testPriv + "\"\n",
			"gw.toml:3:90: site \"b\": network 10.1.2.0/24 overlaps 10.1.0.0/16 of site \"a\" (line 2); a packet must have exactly one site to go to"},
		{"a hook that is not a string", strings.Replace(good, "listen_port = 51820", "post_up = [\"echo up\", 5]", 1),
			"gw.toml:3:23: post_up: every element must be a string, not an integer"},
		{"a bad interface name", strings.Replace(good, "listen_port = 51820", "name = \"this name is far too long\"", 1),
			"gw.toml:3:1: name \"this name is far too long\" is not a valid interface name (1 to 15 of a-z A-Z 0-9 _ = + . -)"},
		{"a misspelt interface key gets a suggestion", strings.Replace(good, "listen_port = 51820", "listen_prot = 51820", 1),
			"gw.toml:3:1: unknown key \"listen_prot\" in [interface]; did you mean listen_port?"},
		{"a misspelt table gets a suggestion", good + "\n[[sites]]\nname = \"x\"\n",
			"gw.toml:17:1: unknown table or key \"sites\"; did you mean site?"},
		{"a file name that cannot name the interface", strings.Replace(good, "gw.toml", "", 1), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := "gw.toml"
			if tc.want == "" {
				file = "a-very-long-file-name.toml"
				tc.want = file + ": the file name does not make a valid interface name (\"a-very-long-file-name\"); set name in [interface] (1 to 15 of a-z A-Z 0-9 _ = + . -)"
			}
			g, err := Parse(file, []byte(tc.src))
			if err == nil {
				t.Fatalf("accepted:\n%s\n%+v", tc.src, g)
			}
			if err.Error() != tc.want {
				t.Errorf("error:\n%s\nwant:\n%s", err, tc.want)
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Errorf("error is %T, want a non-empty ErrorList", err)
			}
			if strings.Contains(err.Error(), testPriv) || strings.Contains(err.Error(), testPSK) {
				t.Errorf("error shows a secret key: %s", err)
			}
		})
	}
}

func mustPub(priv string) string {
	k, err := wgquick.ParseKey(priv)
	if err != nil {
		panic(err)
	}
	return k.PublicKey().String()
}

func TestParseGoodFile(t *testing.T) {
	g, err := Parse("/etc/wirelane/hq.toml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "hq" {
		t.Errorf("name %q, want hq (from the file name)", g.Name)
	}
	if g.ListenPort == nil || *g.ListenPort != 51820 {
		t.Errorf("listen port %v", g.ListenPort)
	}
	if len(g.Sites) != 2 || g.Sites[0].Name != "berlin" || g.Sites[1].Name != "lisbon" {
		t.Fatalf("sites %+v", g.Sites)
	}
	if g.Sites[0].Pos != (Pos{6, 1}) || g.Sites[0].EndpointPos != (Pos{9, 1}) {
		t.Errorf("site positions %v %v", g.Sites[0].Pos, g.Sites[0].EndpointPos)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("10.90.0.2/32")}
	if got := g.Sites[0].Networks; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("networks %v", got)
	}
}

func TestParseAcceptsAllForms(t *testing.T) {
	src := `interface.name = "wgx"
interface.private_key_file = "keys/gw.key"
interface.mtu = 1400
interface.fwmark = 0xca6c
interface.table = 1234
interface.post_up = "echo %i up"
interface.pre_down = ["echo a", "echo b"]

[[site]]
name = "v6"
public_key = "` + keyB + `"
preshared_key = "` + testPSK + `"
endpoint = "[2001:db8::1]:4500"
networks = ["fd00:20::/48", "10.20.0.5"]
persistent_keepalive = 0
`
	g, err := Parse("/srv/gw/a.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if g.Name != "wgx" || g.MTU != 1400 || g.FwMark != 0xca6c || g.Table != "1234" {
		t.Errorf("interface %+v", g)
	}
	if g.PrivateKeyFile != "/srv/gw/keys/gw.key" || g.PrivateKey != nil {
		t.Errorf("key file %q (relative paths are taken from the gateway file's directory)", g.PrivateKeyFile)
	}
	if len(g.PostUp) != 1 || len(g.PreDown) != 2 {
		t.Errorf("hooks %q %q", g.PostUp, g.PreDown)
	}
	s := g.Sites[0]
	if s.PresharedKey == nil || s.PresharedKey.String() != testPSK {
		t.Error("preshared key not kept")
	}
	if s.Networks[1] != netip.MustParsePrefix("10.20.0.5/32") {
		t.Errorf("a bare address is a host network: %v", s.Networks)
	}
}

func TestLoadKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) {
		if err := os.WriteFile(dir+"/"+name, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir+"/"+name, mode); err != nil {
			t.Fatal(err)
		}
	}
	src := "[interface]\nprivate_key_file = \"gw.key\"\n\n[[site]]\nname = \"a\"\npublic_key = \"" + keyB + "\"\npreshared_key_file = \"a.psk\"\nnetworks = [\"10.1.0.0/16\"]\n"
	load := func() (*Gateway, []string, error) {
		g, err := Parse(dir+"/gw.toml", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		w, err := g.LoadKeys()
		return g, w, err
	}

	write("gw.key", testPriv+"\n", 0o600)
	write("a.psk", testPSK+"\n", 0o640)
	g, warn, err := load()
	if err != nil {
		t.Fatal(err)
	}
	if g.PrivateKey == nil || g.PrivateKey.String() != testPriv || g.Sites[0].PresharedKey == nil {
		t.Fatal("keys not loaded")
	}
	if len(warn) != 1 || !strings.Contains(warn[0], "a.psk is readable by others (mode 0640)") {
		t.Errorf("warnings %q", warn)
	}
	if !strings.Contains(g.Summary(), "public key:     "+mustPub(testPriv)) {
		t.Errorf("summary lacks the public key:\n%s", g.Summary())
	}
	if s := g.Summary(); strings.Contains(s, testPriv) || strings.Contains(s, testPSK) {
		t.Errorf("summary shows a secret:\n%s", s)
	}

	write("gw.key", testPriv+"\n", 0o602)
	if _, _, err = load(); err == nil || err.Error() != dir+"/gw.toml:2:1: private key file "+dir+"/gw.key is writable by others (mode 0602); run chmod 600 on it" {
		t.Errorf("world-writable key file: %v", err)
	}
	write("gw.key", "not a key\n", 0o600)
	if _, _, err = load(); err == nil || !strings.HasPrefix(err.Error(), dir+"/gw.toml:2:1: private key file "+dir+"/gw.key does not hold a key") {
		t.Errorf("bad key file: %v", err)
	}
	write("gw.key", mustPrivOf(keyB), 0o600)
	if _, _, err = load(); err != nil {
		// keyB is not derived from a known private key, so this only
		// checks that a different key is accepted.
		t.Errorf("%v", err)
	}
	os.Remove(dir + "/a.psk")
	if _, _, err = load(); err == nil || !strings.HasPrefix(err.Error(), dir+"/gw.toml:7:1: preshared key file: stat "+dir+"/a.psk: no such file") {
		t.Errorf("missing psk file: %v", err)
	}
}

// mustPrivOf returns some private key other than testPriv (its argument
// only makes the call sites read clearly).
func mustPrivOf(string) string {
	k, err := wgquick.GeneratePrivateKey()
	if err != nil {
		panic(err)
	}
	return k.String()
}

// TestTableNameKeepsItsLine checks that a table name, which is looked up
// in /etc/iproute2/rt_tables only when the gateway comes up, carries its
// line into the wg-quick model, so that an unknown name is reported there
// as FILE:LINE.
func TestTableNameKeepsItsLine(t *testing.T) {
	src := strings.Replace(good, "listen_port = 51820", "table = \"nosuchtable\"", 1)
	g, err := Parse("gw.toml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if c := g.Config(); c.Interface.Table != "nosuchtable" || c.Interface.TableLine != 3 || c.Path != "gw.toml" {
		t.Errorf("Table %q at line %d of %q, want nosuchtable at line 3 of gw.toml", c.Interface.Table, c.Interface.TableLine, c.Path)
	}
}
