package wgquick

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	testPriv = "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo="
	testPub  = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
)

func TestParseFullFile(t *testing.T) {
	b, err := os.ReadFile("testdata/full.conf")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("testdata/full.conf", b)
	if err != nil {
		t.Fatal(err)
	}
	in := c.Interface
	if in.PrivateKey == nil || in.PrivateKey.String() != testPriv {
		t.Errorf("PrivateKey not parsed")
	}
	if in.ListenPort == nil || *in.ListenPort != 51820 || in.FwMark == nil || *in.FwMark != 0x1234 {
		t.Errorf("ListenPort/FwMark = %v/%v", in.ListenPort, in.FwMark)
	}
	wantAddr := []netip.Prefix{netip.MustParsePrefix("10.0.0.2/24"), netip.MustParsePrefix("fd00::2/64"), netip.MustParsePrefix("10.0.1.2/32")}
	if !reflect.DeepEqual(in.Addresses, wantAddr) {
		t.Errorf("Addresses = %v, want %v", in.Addresses, wantAddr)
	}
	if len(in.DNS) != 2 || in.DNS[1] != netip.MustParseAddr("2606:4700:4700::1111") || !reflect.DeepEqual(in.DNSSearch, []string{"example.org"}) {
		t.Errorf("DNS = %v search %v", in.DNS, in.DNSSearch)
	}
	if in.MTU != 1380 || in.Table != "auto" || !in.SaveConfig {
		t.Errorf("MTU/Table/SaveConfig = %d/%q/%v", in.MTU, in.Table, in.SaveConfig)
	}
	if !reflect.DeepEqual(in.PreUp, []string{"echo pre %i"}) || len(in.PostUp)+len(in.PreDown)+len(in.PostDown) != 3 {
		t.Errorf("hooks = %q %q %q %q", in.PreUp, in.PostUp, in.PreDown, in.PostDown)
	}
	if len(c.Peers) != 2 {
		t.Fatalf("%d peers, want 2", len(c.Peers))
	}
	p := c.Peers[0]
	if p.PublicKey.String() != testPub || p.PresharedKey == nil || p.Endpoint != "vpn.example.org:51820" ||
		p.PersistentKeepalive == nil || *p.PersistentKeepalive != 25 || p.Line != 17 || p.EndpointLine != 22 {
		t.Errorf("peer 0 = %+v", p)
	}
	if got := c.Peers[1].AllowedIPs; len(got) != 1 || got[0] != netip.MustParsePrefix("10.9.0.0/24") {
		t.Errorf("AllowedIPs not masked: %v", got)
	}
	if !c.HasDefaultRoute() {
		t.Error("HasDefaultRoute = false")
	}
}

// TestBadConfigs checks that each bad line is reported as FILE:LINE: message.
func TestBadConfigs(t *testing.T) {
	const hdr = "[Interface]\nPrivateKey = " + testPriv + "\n"
	tests := []struct {
		name, src, want string
	}{
		{"key before any section", "PrivateKey = x\n", `f.conf:1: key "PrivateKey" outside of a section (an [Interface] or [Peer] line must come first)`},
		{"unknown section", hdr + "[Peers]\n", `f.conf:3: unknown section "[Peers]" (want [Interface] or [Peer])`},
		{"line without equals", hdr + "Address 10.0.0.1\n", `f.conf:3: expected "Key = Value", found a line starting with "Address"`},
		{"private key without equals", "[Interface]\nPrivateKey " + testPriv + "\n", `f.conf:2: expected "Key = Value", found a line starting with "PrivateKey"`},
		{"private key without equals or padding", "[Interface]\nPrivateKey " + testPriv[:43] + "\n", `f.conf:2: expected "Key = Value", found a line starting with "PrivateKey"`},
		{"private key alone on a line", "[Interface]\n" + testPriv + "\n", `f.conf:2: unknown key (not shown: it does not look like a setting name) in [Interface]`},
		{"private key before any section", testPriv + "\n", `f.conf:1: key (not shown: it does not look like a setting name) outside of a section (an [Interface] or [Peer] line must come first)`},
		{"unknown interface key", hdr + "Adress = 10.0.0.1\n", `f.conf:3: unknown key "Adress" in [Interface]; did you mean Address?`},
		{"unknown interface key, no suggestion", hdr + "Frobnicate = 1\n", `f.conf:3: unknown key "Frobnicate" in [Interface]`},
		{"peer key in interface", hdr + "AllowedIPs = 10.0.0.0/8\n", `f.conf:3: unknown key "AllowedIPs" in [Interface]; AllowedIPs belongs in [Peer]`},
		{"interface key in peer", hdr + "[Peer]\nPublicKey = " + testPub + "\nListenPort = 1\n", `f.conf:5: unknown key "ListenPort" in [Peer]; ListenPort belongs in [Interface]`},
		{"misspelt directive", hdr + "# wirelane: DNSOptinal = true\n", `f.conf:3: unknown Wirelane setting "DNSOptinal" in a "# wirelane:" comment; did you mean DNSOptional?`},
		{"bad directive value", hdr + "# wirelane: DNSOptional = yes\n", `f.conf:3: DNSOptional: "yes" is neither true nor false`},
		{"directive in peer", hdr + "[Peer]\nPublicKey = " + testPub + "\n#wirelane: DNSOptional = true\n", `f.conf:5: "# wirelane: DNSOptional" belongs in [Interface]`},
		{"unknown peer key", hdr + "[Peer]\nPublicKey = " + testPub + "\nAllowedIP = 10.0.0.0/8\n", `f.conf:5: unknown key "AllowedIP" in [Peer]; did you mean AllowedIPs?`},
		{"short private key", "[Interface]\nPrivateKey = abc=\n", "f.conf:2: PrivateKey is not a valid key (want 44 characters of base64, as `wirelane genkey` prints)"},
		{"private key with bad trailing bits", "[Interface]\nPrivateKey = dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCr=\n", "f.conf:2: PrivateKey is not a valid key (want 44 characters of base64, as `wirelane genkey` prints)"},
		{"bad public key", hdr + "[Peer]\nPublicKey = nope\n", `f.conf:4: PublicKey "nope" is not a valid key (want 44 characters of base64)`},
		{"peer without public key", hdr + "\n[Peer]\nAllowedIPs = 10.0.0.0/8\n[Peer]\n", `f.conf:4: [Peer] section has no PublicKey`},
		{"peer without public key at end", hdr + "[Peer]\nEndpoint = 1.2.3.4:5\n", `f.conf:3: [Peer] section has no PublicKey`},
		{"duplicate peer", hdr + "[Peer]\nPublicKey = " + testPub + "\n[Peer]\nPublicKey = " + testPub + "\n", `f.conf:5: the same PublicKey is already used by the peer on line 3; put all of a peer's settings in one [Peer] section`},
		{"listen port too big", hdr + "ListenPort = 70000\n", `f.conf:3: ListenPort: "70000" is not a port number from 0 to 65535`},
		{"bad fwmark", hdr + "FwMark = 0xZZ\n", `f.conf:3: FwMark: "0xZZ" is not off or a 32-bit number (decimal or 0x hex)`},
		{"bad address", hdr + "Address = 10.0.0.1/24, 10.0.0.300\n", `f.conf:3: Address: "10.0.0.300" is not an IP address (with or without a prefix length, as in 10.0.0.1/24)`},
		{"bad address prefix", hdr + "Address = 10.0.0.1/33\n", `f.conf:3: Address: "10.0.0.1/33" is not an IP address with a prefix length (as in 10.0.0.1/24; a bare address is taken as /32 or /128)`},
		{"bad dns", hdr + "DNS = 1.1.1.1, not*a*domain\n", `f.conf:3: DNS: "not*a*domain" is neither an IP address nor a search domain`},
		{"mtu not a number", hdr + "MTU = big\n", `f.conf:3: MTU: "big" is not a number between 68 and 65535`},
		{"mtu too small", hdr + "MTU = 20\n", `f.conf:3: MTU: "20" is not a number between 68 and 65535`},
		{"bad table", hdr + "Table = a b\n", `f.conf:3: Table: "a b" is not auto, off, a table number or a table name`},
		{"bad saveconfig", hdr + "SaveConfig = yes\n", `f.conf:3: SaveConfig: "yes" is neither true nor false`},
		{"bad allowed ip", hdr + "[Peer]\nPublicKey = " + testPub + "\nAllowedIPs = 10.0.0.0/8, 1.2.3/24\n", `f.conf:5: AllowedIPs: "1.2.3/24" is not an IP address or CIDR prefix`},
		{"endpoint without port", hdr + "[Peer]\nPublicKey = " + testPub + "\nEndpoint = 1.2.3.4\n", `f.conf:5: Endpoint: "1.2.3.4" has no port (want host:port)`},
		{"endpoint v6 without brackets", hdr + "[Peer]\nPublicKey = " + testPub + "\nEndpoint = 2001:db8::1:51820\n", `f.conf:5: Endpoint: "2001:db8::1:51820": an IPv6 address must be in brackets, as in [2001:db8::1]:51820`},
		{"endpoint port zero", hdr + "[Peer]\nPublicKey = " + testPub + "\nEndpoint = host:0\n", `f.conf:5: Endpoint: "host:0": port "0" is not a number from 1 to 65535`},
		{"bad keepalive", hdr + "[Peer]\nPublicKey = " + testPub + "\nPersistentKeepalive = -1\n", `f.conf:5: PersistentKeepalive: "-1" is not off or a number of seconds from 0 to 65535`},
		{"nul byte", hdr + "Address = 1\x00\n", `f.conf:3: line contains a NUL byte`},
		{"overlong line", hdr + "PostUp = " + strings.Repeat("x", maxLine) + "\n", `f.conf:3: line is longer than 65536 bytes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("f.conf", []byte(tt.src))
			if err == nil {
				t.Fatalf("parsed without error: %+v", c)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if err.Error() != tt.want {
				t.Errorf("error\n got: %s\nwant: %s", err, tt.want)
			}
			if strings.Contains(err.Error(), testPriv[:20]) {
				t.Errorf("error repeats the private key")
			}
		})
	}
}

// TestBareAddressIsAHost checks that an Address without a prefix length
// is a single host (/32, /128), as `ip address add` takes it from
// wg-quick.
func TestBareAddressIsAHost(t *testing.T) {
	c, err := Parse("f.conf", []byte("[Interface]\nAddress = 10.177.0.1, fd00::1\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.177.0.1/32"), netip.MustParsePrefix("fd00::1/128")}
	if !reflect.DeepEqual(c.Interface.Addresses, want) {
		t.Errorf("Addresses = %v, want %v", c.Interface.Addresses, want)
	}
}

// TestDNSOptionalDirective checks the "# wirelane: DNSOptional = true"
// comment: read in [Interface], kept by Strip (wg sees a comment) and
// written back by Marshal; the DNS and Table lines are remembered.
func TestDNSOptionalDirective(t *testing.T) {
	src := "[Interface]\nPrivateKey = " + testPriv + "\nDNS = 10.0.0.53\n  #  WIRELANE: DNSOptional = TRUE\nTable = 1234\n"
	c, err := Parse("f.conf", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !c.Interface.DNSOptional || c.Interface.DNSLine != 3 || c.Interface.TableLine != 5 {
		t.Errorf("DNSOptional %v, DNSLine %d, TableLine %d", c.Interface.DNSOptional, c.Interface.DNSLine, c.Interface.TableLine)
	}
	if !bytes.Contains(c.Strip(), []byte("WIRELANE: DNSOptional")) {
		t.Errorf("strip dropped the directive:\n%s", c.Strip())
	}
	if !bytes.Contains(c.Marshal(), []byte("\n# wirelane: DNSOptional = true\n")) {
		t.Errorf("marshal dropped the directive:\n%s", c.Marshal())
	}
	if c, _ := Parse("f.conf", []byte("[Interface]\n# wirelane is great\n# wirelanes: x\n")); c == nil || c.Interface.DNSOptional {
		t.Errorf("ordinary comments taken as directives")
	}
}

func TestAcceptedSpellings(t *testing.T) {
	src := "\xef\xbb\xbf\r\n  [INTERFACE]  \r\nlistenport=0\r\nfwmark = off\ntable=off\nsaveconfig = FALSE\n[Peer]\nPublicKey=" + testPub + "\nPersistentKeepalive = off\nAllowedIPs =\nEndpoint = 192.0.2.1:1"
	c, err := Parse("x", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if *c.Interface.ListenPort != 0 || *c.Interface.FwMark != 0 || c.Interface.Table != "off" || *c.Peers[0].PersistentKeepalive != 0 || c.Peers[0].Endpoint != "192.0.2.1:1" {
		t.Errorf("unexpected %+v %+v", c.Interface, c.Peers[0])
	}
}

func TestStripKeepsOnlyWGLines(t *testing.T) {
	b, _ := os.ReadFile("testdata/full.conf")
	c, err := Parse("full.conf", b)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Strip()
	for _, k := range []string{"Address", "DNS", "MTU", "Table", "PreUp", "PostUp", "PreDown", "PostDown", "SaveConfig"} {
		if bytes.Contains(s, []byte("\n"+k+" =")) {
			t.Errorf("strip kept %s:\n%s", k, s)
		}
	}
	if !bytes.Contains(s, []byte("# the server\n")) || !bytes.Contains(s, []byte("publickey = 0CpSGmRYqUs9GfMWgI2k7pAQBgY4mOiSWoMYa/0qKHY=\n")) {
		t.Errorf("strip lost verbatim lines:\n%s", s)
	}
	// The stripped text parses to the same wg part and nothing else.
	c2, err := Parse("stripped", s)
	if err != nil {
		t.Fatal(err)
	}
	want := c.Interface
	want.Addresses, want.DNS, want.DNSSearch, want.MTU, want.Table = nil, nil, nil, 0, ""
	want.PreUp, want.PostUp, want.PreDown, want.PostDown, want.SaveConfig = nil, nil, nil, nil, false
	want.DNSLine, want.TableLine = 0, 0
	normalize(c)
	normalize(c2)
	if !reflect.DeepEqual(c2.Interface, want) || !reflect.DeepEqual(c2.Peers, c.Peers) {
		t.Errorf("stripped config differs:\n%+v\n%+v", c2.Interface, want)
	}
}

// normalize drops what Marshal does not carry (source positions).
func normalize(c *Config) {
	c.Path, c.stripped = "", nil
	c.Interface.DNSLine, c.Interface.TableLine = 0, 0
	for i := range c.Peers {
		c.Peers[i].Line, c.Peers[i].EndpointLine = 0, 0
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	b, _ := os.ReadFile("testdata/full.conf")
	c, err := Parse("full.conf", b)
	if err != nil {
		t.Fatal(err)
	}
	out := c.Marshal()
	c2, err := Parse("out", out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	normalize(c)
	normalize(c2)
	if !reflect.DeepEqual(c, c2) {
		t.Errorf("round trip differs:\n%s", out)
	}
}

func TestPeerFriendlyName(t *testing.T) {
	src := "[Interface]\n# Name = not a peer\n" +
		"[Peer]\n#Name=Alice's phone \nPublicKey = " + testPub + "\n" +
		"[Peer]\n# name = bob = laptop # old\n# Comment = x\nPublicKey = " + testPriv + "\n" +
		"[Peer]\n# Name =   \n# Names = z\nPublicKey = " + strings.Replace(testPub, "h", "j", 1) + "\n" +
		"[Peer]\nPublicKey = " + strings.Replace(testPub, "h", "k", 1) + "\n# Name = " + strings.Repeat("\u00e9", 40) + "\x01\n"
	c, err := Parse("names.conf", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"Alice's phone", "bob = laptop # old", "", strings.Repeat("\u00e9", maxPeerName/2)}
	for i, p := range c.Peers {
		if p.Name != want[i] {
			t.Errorf("peer %d: Name = %q, want %q", i, p.Name, want[i])
		}
	}
	c2, err := Parse("again", c.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range c2.Peers {
		if p.Name != want[i] {
			t.Errorf("after Marshal, peer %d: Name = %q, want %q", i, p.Name, want[i])
		}
	}
	if bytes.Contains(c.Strip(), []byte("Name")) != true {
		t.Errorf("Strip dropped the name comment; wg(8) should see it as a comment")
	}
}

func TestResolve(t *testing.T) {
	dir := t.TempDir()
	old := ConfigDir
	ConfigDir = dir
	defer func() { ConfigDir = old }()
	os.WriteFile(filepath.Join(dir, "wg7.conf"), []byte("[Interface]\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "bad name.conf"), []byte(""), 0o600)
	if p, n, err := Resolve("wg7"); err != nil || n != "wg7" || p != filepath.Join(dir, "wg7.conf") {
		t.Errorf("Resolve(wg7) = %q %q %v", p, n, err)
	}
	if _, n, err := Resolve(filepath.Join(dir, "wg7.conf")); err != nil || n != "wg7" {
		t.Errorf("Resolve(path) = %q %v", n, err)
	}
	if _, _, err := Resolve("wg8"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing file: %v", err)
	}
	if _, _, err := Resolve(filepath.Join(dir, "bad name.conf")); err == nil || !strings.Contains(err.Error(), "valid interface name") {
		t.Errorf("bad name: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile("testdata/full.conf")
	f.Add(b)
	f.Add([]byte("[Interface]\nAddress=10.0.0.1/8,::1\n[Peer]\nPublicKey=" + testPub + "\nEndpoint=[::1]:1\n"))
	f.Add([]byte("[Peer]\n"))
	f.Add([]byte("[Peer]\n# Name = Alice's phone\nPublicKey=" + testPub + "\n"))
	f.Add([]byte("x=y"))
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := Parse("fuzz", src)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		out := c.Marshal()
		c2, err := Parse("again", out)
		if err != nil {
			t.Fatalf("marshal output does not parse: %v\n%s", err, out)
		}
		if _, err := Parse("strip", c.Strip()); err != nil {
			t.Fatalf("strip output does not parse: %v", err)
		}
		normalize(c)
		normalize(c2)
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip differs:\n%s", out)
		}
	})
}

// FuzzSplitEndpoint checks the Endpoint parser: no panics; an accepted
// endpoint has a port from 1 to 65535 and a host that is an address or a
// host name, and writing it back the canonical way parses to the same.
func FuzzSplitEndpoint(f *testing.F) {
	for _, s := range []string{"127.0.0.1:51820", "[::1]:1", "[fe80::1%eth0]:51820", "vpn.example.com:443",
		"2001:db8::1:51820", "host:0", "host:65536", "[::1]", ":51820", "a..b:1", "[::1]:x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		host, port, err := SplitEndpoint(s)
		if err != nil {
			return
		}
		if port == 0 || host == "" {
			t.Fatalf("SplitEndpoint(%q) = %q, %d", s, host, port)
		}
		again := fmt.Sprintf("%s:%d", host, port)
		if strings.IndexByte(host, ':') >= 0 {
			again = fmt.Sprintf("[%s]:%d", host, port)
		}
		h2, p2, err := SplitEndpoint(again)
		if err != nil || h2 != host || p2 != port {
			t.Fatalf("SplitEndpoint(%q) = %q, %d; %q gives %q, %d, %v", s, host, port, again, h2, p2, err)
		}
	})
}

// TestDirectiveIsACommentToWGQuick checks with wg-quick itself (when
// installed) that a file with "# wirelane: DNSOptional = true" still
// works there: `wg-quick strip` accepts it and gives what Strip gives.
func TestDirectiveIsACommentToWGQuick(t *testing.T) {
	wq, err := exec.LookPath("wg-quick")
	if err != nil {
		t.Skip("wg-quick (wireguard-tools) not installed")
	}
	src := "[Interface]\nPrivateKey = " + testPriv + "\nDNS = 10.0.0.53\n# wirelane: DNSOptional = true\n"
	path := filepath.Join(t.TempDir(), "wl0.conf")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(wq, "strip", path).Output()
	if err != nil {
		t.Fatalf("wg-quick strip: %v", err)
	}
	c, err := Parse(path, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) != strings.TrimSpace(string(c.Strip())) {
		t.Errorf("wg-quick strip:\n%s\nStrip:\n%s", out, c.Strip())
	}
}
