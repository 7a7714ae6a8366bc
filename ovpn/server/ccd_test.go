package server

import (
	"encoding/binary"
	"errors"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
)

// ccdServer is the start of a server file with a client-config-dir.
const ccdServer = "server 10.8.0.0 255.255.255.0\nca ca.crt\ncert s.crt\nkey s.key\nclient-config-dir ccd\n"

// writeCCD writes a server file (conf) and the files of its ccd
// directory; it returns the server file's path.
func writeCCD(t *testing.T, conf string, files map[string]string) string {
	t.Helper()
	dir := writeFiles(t, map[string]string{"ca.crt": testpki.FixtureCA, "s.crt": testpki.FixtureCert, "s.key": testpki.FixtureKey, "server.conf": conf})
	if err := os.Mkdir(filepath.Join(dir, "ccd"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, "ccd", name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "server.conf")
}

// The directory is read with the server file: one entry per file (dot
// files and directories skipped), its warnings at the client-config-dir
// line.
func TestParseConfigClientConfigDir(t *testing.T) {
	path := writeCCD(t, ccdServer+"ccd-exclusive\n", map[string]string{
		"alice":     "ifconfig-push 10.8.0.50 255.255.255.0\niroute 192.168.50.0 255.255.255.0\necho hi\n",
		"DEFAULT":   "push \"dhcp-option DNS 10.8.0.1\"\n",
		".alice~":   "garbage that would not parse \"\n",
		"bob.disab": "disable\n",
	})
	if err := os.Mkdir(filepath.Join(filepath.Dir(path), "ccd", "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := ParseConfigFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.ClientConfigDir != filepath.Join(filepath.Dir(path), "ccd") || !c.CCDExclusive || len(c.ClientConfigs) != 3 {
		t.Fatalf("dir %q exclusive %v entries %v", c.ClientConfigDir, c.CCDExclusive, c.ClientConfigs)
	}
	a := c.ClientConfigs["alice"]
	if a.Address != netip.MustParseAddr("10.8.0.50") || len(a.IRoutes) != 1 || !c.ClientConfigs["bob.disab"].Disable {
		t.Errorf("alice %+v", a)
	}
	found := false
	for _, w := range c.Warnings {
		found = found || (w.Line == 5 && w.Directive == "client-config-dir" && strings.HasSuffix(w.Message, "ccd/alice:3: echo: ignored"))
	}
	if !found {
		t.Errorf("warnings %v lack alice's echo", c.Warnings)
	}
}

// Bad entries are errors at the entry's FILE:LINE; bad directory lines at
// the server file's.
func TestParseConfigClientConfigDirErrors(t *testing.T) {
	for _, tc := range []struct {
		conf  string
		files map[string]string
		want  string
	}{
		{ccdServer, map[string]string{"bob": "\nifconfig-push 10.9.0.5 255.255.255.0\n"}, "ccd/bob:2: ifconfig-push: 10.9.0.5 is not a client address of the server's network 10.8.0.0/24"},
		{ccdServer, map[string]string{"bob": "ifconfig-push 10.8.0.1 255.255.255.0\n"}, "10.8.0.1 is not a client address"},
		{ccdServer, map[string]string{"bob": "ifconfig-push 10.8.0.5 255.255.0.0\n"}, "ccd/bob:1: ifconfig-push: netmask /16 differs from the server's /24"},
		{ccdServer, map[string]string{"DEFAULT": "ifconfig-push 10.8.0.5 255.255.255.0\n"}, "ccd/DEFAULT:1: ifconfig-push: DEFAULT applies to every client"},
		{ccdServer, map[string]string{"a": "ifconfig-push 10.8.0.5 255.255.255.0\n", "b": "ifconfig-push 10.8.0.5 255.255.255.0\n"}, `ccd/b:1: ifconfig-push: 10.8.0.5 is also the fixed address of "a"`},
		{ccdServer, map[string]string{"bob": "ifconfig-ipv6-push fd42::5/64\n"}, "ccd/bob:1: ifconfig-ipv6-push: the server has no IPv6 pool"},
		{ccdServer + "server-ipv6 fd42::/64\n", map[string]string{"bob": "ifconfig-ipv6-push fd42::1000/64\n"}, "is in the range the IPv6 pool hands out (fd42::1000 to fd42::10fc)"},
		{ccdServer + "server-ipv6 fd42::/64\n", map[string]string{"bob": "ifconfig-ipv6-push fd43::5/64\n"}, "not a client address of the server's IPv6 network"},
		{ccdServer + "server-ipv6 fd42::/64\n", map[string]string{"bob": "ifconfig-ipv6-push fd42::5/80\n"}, "prefix length /80 differs"},
		{ccdServer, map[string]string{"bob": "ca ca.crt\n"}, "ccd/bob:1: ca: it belongs in the server's configuration file"},
		{ccdServer, map[string]string{"bob": "keepalive 10 60\n"}, "ccd/bob:1: keepalive: it belongs in the server's"},
		{ccdServer, map[string]string{"bob": "iroute 10.1.0.1 255.255.0.0\n"}, "ccd/bob:1: iroute: 10.1.0.1/16 has host bits set"},
		{strings.Replace(ccdServer, "client-config-dir ccd", "client-config-dir nowhere", 1), nil, "server.conf:5: client-config-dir: open"},
		{"server 10.8.0.0 255.255.255.0\nca ca.crt\ncert s.crt\nkey s.key\nccd-exclusive\n", nil, "server.conf:5: ccd-exclusive: needs client-config-dir"},
		{"server 10.8.0.0 255.255.255.0\niroute 10.1.0.0 255.255.0.0\n", nil, "server.conf:2: iroute: only allowed in a client-config-dir file"},
		{"server 10.8.0.0 255.255.255.0\ndisable\n", nil, "server.conf:2: disable: only allowed in a client-config-dir file"},
	} {
		_, err := ParseConfigFile(writeCCD(t, tc.conf, tc.files))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want %q", tc.files, err, tc.want)
		}
	}
	if _, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\nclient-config-dir ccd\n"), "server.conf", ""); err == nil || !strings.Contains(err.Error(), "server.conf:2: client-config-dir: file references are not allowed") {
		t.Errorf("no directory: %v", err)
	}
}

// ccdConfig is the fixture's server with client-config entries.
func ccdConfig(f *fixture, ents map[string]string) *Config {
	cfg := f.serverConfig(UDP)
	cfg.ClientConfigDir = "ccd"
	cfg.ClientConfigs = map[string]*config.ClientConfig{}
	for name, text := range ents {
		e, err := config.ParseClientConfig([]byte(text), name, "ccd/"+name, nil)
		if err != nil {
			panic(err)
		}
		cfg.ClientConfigs[name] = e
	}
	return cfg
}

// answerFrom makes c answer ICMP echo requests to any address (a network
// behind it), until its session ends.
var answerFrom = answerPings

// pingBehind sends an echo request from the server's host side to dst
// (behind a client) and waits for the reply on the host side.
func pingBehind(t *testing.T, s *Server, dst netip.Addr, seq uint16, replies <-chan []byte) error {
	t.Helper()
	src := s.TunnelAddress().Addr()
	if err := s.WritePacket(testnet.ICMPEcho(8, src, dst, 0x77, seq, []byte("behind"))); err != nil {
		return err
	}
	deadline := time.After(3 * time.Second)
	for {
		select {
		case p := <-replies:
			from, _, _ := ipv4Addrs(p)
			if len(p) >= 28 && p[20] == 0 && binary.BigEndian.Uint16(p[26:]) == seq && from == dst {
				return nil
			}
		case <-deadline:
			return errors.New("no reply")
		}
	}
}

// hostSide collects the packets clients send to the host side.
func hostSide(s *Server) <-chan []byte {
	ch := make(chan []byte, 64)
	go func() {
		buf := make([]byte, 65535)
		for {
			n, err := s.ReadPacket(buf)
			if err != nil {
				return
			}
			select {
			case ch <- append([]byte(nil), buf[:n]...):
			default:
			}
		}
	}()
	return ch
}

// Client-config entries with in-process clients: a fixed address and an
// iroute (the network behind the client is reached, its replies pass the
// source check), push-reset and the client's own push line, the pool
// never handing out a fixed address, disable and ccd-exclusive refused
// with AUTH_FAILED.
func TestClientConfigDir(t *testing.T) {
	f := newFixture(t)
	cfg := ccdConfig(f, map[string]string{
		"gw":      "ifconfig-push 10.8.0.2 255.255.255.0\niroute 192.168.50.0 255.255.255.0\npush-reset\npush \"route 10.70.0.0 255.255.0.0\"\n",
		"off":     "disable\n",
		"DEFAULT": "push \"route 10.71.0.0 255.255.0.0\"\n",
	})
	cfg.Push = append(cfg.Push, "route 192.168.50.0 255.255.255.0")
	s := startServer(t, cfg, Options{})
	replies := hostSide(s)
	// A client without a file first: the pool skips 10.8.0.2 (gw's).
	other := dialClient(t, f.clientConfig(t, s, "other", ""), client.Options{})
	if got := other.Pushed().Local.Addr(); got != netip.MustParseAddr("10.8.0.3") {
		t.Errorf("the pool gave %v (10.8.0.2 is gw's fixed address)", got)
	}
	routes := func(c *client.Session) string {
		var out []string
		for _, r := range c.Pushed().Routes {
			out = append(out, r.String())
		}
		return strings.Join(out, " ")
	}
	if r := routes(other); !strings.Contains(r, "10.99.0.0/24") || !strings.Contains(r, "10.71.0.0/16") || !strings.Contains(r, "192.168.50.0/24") {
		t.Errorf("other (DEFAULT) was pushed routes %s", r)
	}
	gw := dialClient(t, f.clientConfig(t, s, "gw", ""), client.Options{})
	if got := gw.Pushed().Local; got != netip.MustParsePrefix("10.8.0.2/24") {
		t.Errorf("gw got %v, want its fixed 10.8.0.2/24", got)
	}
	if r := routes(gw); r != "10.70.0.0/16" {
		t.Errorf("gw (push-reset, its own push; its iroute not pushed back) was pushed routes %q", r)
	}
	answerFrom(gw)
	if err := pingBehind(t, s, netip.MustParseAddr("192.168.50.9"), 1, replies); err != nil {
		t.Errorf("192.168.50.9 behind gw: %v", err)
	}
	if err := s.WritePacket(testnet.ICMPEcho(8, s.TunnelAddress().Addr(), netip.MustParseAddr("192.168.51.9"), 1, 1, nil)); !errors.Is(err, ErrNoRoute) {
		t.Errorf("a network no client owns: %v", err)
	}
	// other may not send from gw's network.
	spoofed := s.Stats().Spoofed.Load()
	if err := other.WritePacket(testnet.ICMPEcho(8, netip.MustParseAddr("192.168.50.9"), s.TunnelAddress().Addr(), 1, 1, nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Second, "the spoofed packet counted", func() bool { return s.Stats().Spoofed.Load() > spoofed })

	_, err := client.Dial(t.Context(), f.clientConfig(t, s, "off", ""), client.Options{HandshakeTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), `client "off" is disabled`) {
		t.Errorf("disabled client: %v", err)
	}

	// ccd-exclusive: a client without a file of its own is refused.
	cfg2 := ccdConfig(f, map[string]string{"gw": "iroute 192.168.50.0 255.255.255.0\n", "DEFAULT": "\n"})
	cfg2.CCDExclusive = true
	s2 := startServer(t, cfg2, Options{})
	_, err = client.Dial(t.Context(), f.clientConfig(t, s2, "stranger", ""), client.Options{HandshakeTimeout: 10 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "ccd-exclusive") {
		t.Errorf("ccd-exclusive, no file: %v", err)
	}
	dialClient(t, f.clientConfig(t, s2, "gw", ""), client.Options{})
}

// A reload of client-config entries with two connected clients: one's
// iroute moves at once (no new session), the other untouched; a new
// fixed address disconnects with RESTART, disable with AUTH_FAILED; push
// changes wait for the next connection.
func TestReloadClientConfigs(t *testing.T) {
	f := newFixture(t)
	ents := map[string]string{
		"gw":   "ifconfig-push 10.8.0.20 255.255.255.0\niroute 192.168.50.0 255.255.255.0\n",
		"desk": "iroute 192.168.60.0 255.255.255.0\n",
	}
	cfg := ccdConfig(f, ents)
	s := startServer(t, cfg, Options{})
	replies := hostSide(s)
	gw := dialClient(t, f.clientConfig(t, s, "gw", ""), client.Options{})
	desk := dialClient(t, f.clientConfig(t, s, "desk", ""), client.Options{})
	answerFrom(gw)
	answerFrom(desk)
	if err := pingBehind(t, s, netip.MustParseAddr("192.168.60.1"), 1, replies); err != nil {
		t.Fatal(err)
	}
	gwBefore, _ := clientByName(s, "gw")
	deskBefore, _ := clientByName(s, "desk")

	// desk's iroute moves, and it gets a new push line; gw's file is
	// unchanged.
	next := ccdConfig(f, map[string]string{"gw": ents["gw"], "desk": "iroute 192.168.61.0 255.255.255.0\npush \"route 10.70.0.0 255.255.0.0\"\n"})
	plan, err := s.PlanReload(next)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan.Lines(), "\n")
	for _, want := range []string{"client-config-dir: desk changed", `client "desk": iroutes 192.168.60.0/24 -> 192.168.61.0/24 (at once)`,
		`client "desk": pushed options change (from its next connection)`} {
		if !strings.Contains(text, want) {
			t.Errorf("plan lacks %q:\n%s", want, text)
		}
	}
	if len(plan.Refused) != 0 || strings.Contains(text, `"gw"`) {
		t.Errorf("plan touches gw or refuses someone:\n%s", text)
	}
	if err := pingBehind(t, s, netip.MustParseAddr("192.168.61.1"), 2, replies); err == nil {
		t.Fatal("the plan changed the routes")
	}
	if _, err := s.ApplyReload(plan); err != nil {
		t.Fatal(err)
	}
	if err := pingBehind(t, s, netip.MustParseAddr("192.168.61.1"), 3, replies); err != nil {
		t.Errorf("desk's new iroute: %v", err)
	}
	if err := s.WritePacket(testnet.ICMPEcho(8, s.TunnelAddress().Addr(), netip.MustParseAddr("192.168.60.1"), 1, 4, nil)); !errors.Is(err, ErrNoRoute) {
		t.Errorf("desk's old iroute still routed: %v", err)
	}
	if err := pingBehind(t, s, netip.MustParseAddr("192.168.50.1"), 5, replies); err != nil {
		t.Errorf("gw's iroute: %v", err)
	}
	for name, before := range map[string]ClientInfo{"gw": gwBefore, "desk": deskBefore} {
		after, ok := clientByName(s, name)
		if !ok || after.PeerID != before.PeerID || after.KeyID != before.KeyID || after.Since != before.Since || after.Address != before.Address {
			t.Errorf("%s's session changed: %+v -> %+v", name, before, after)
		}
	}

	// gw gets another fixed address (RESTART), desk is disabled
	// (AUTH_FAILED); the pool may not hand 10.8.0.20 to anyone meanwhile.
	next2 := ccdConfig(f, map[string]string{"gw": "ifconfig-push 10.8.0.21 255.255.255.0\n", "desk": "disable\n"})
	plan, err = s.PlanReload(next2)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Refused) != 2 {
		t.Fatalf("refused %+v", plan.Refused)
	}
	for _, r := range plan.Refused {
		switch r.Client.CommonName {
		case "gw":
			if r.AuthFailed || !strings.Contains(r.Reason, "its address changes from 10.8.0.20 to 10.8.0.21 (ifconfig-push in ccd/gw") {
				t.Errorf("gw: %+v", r)
			}
		case "desk":
			if !r.AuthFailed || !strings.Contains(r.Reason, `client "desk" is disabled (ccd/desk)`) {
				t.Errorf("desk: %+v", r)
			}
		}
	}
	if _, err := s.ApplyReload(plan); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Session{gw, desk} {
		select {
		case <-c.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a refused client is still connected")
		}
	}
	if err := desk.Err(); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Errorf("desk ended with %v", err)
	}
	gw2 := dialClient(t, f.clientConfig(t, s, "gw", ""), client.Options{})
	if got := gw2.Pushed().Local.Addr(); got != netip.MustParseAddr("10.8.0.21") {
		t.Errorf("gw came back with %v", got)
	}

	// A dynamic address that becomes someone's fixed one: RESTART.
	x := dialClient(t, f.clientConfig(t, s, "x", ""), client.Options{})
	xa := x.Pushed().Local.Addr()
	next3 := ccdConfig(f, map[string]string{"gw": "ifconfig-push 10.8.0.21 255.255.255.0\n", "y": "ifconfig-push " + xa.String() + " 255.255.255.0\n"})
	plan, err = s.PlanReload(next3)
	if err != nil || len(plan.Refused) != 1 || plan.Refused[0].AuthFailed || !strings.Contains(plan.Refused[0].Reason, `is now the fixed address of "y"`) {
		t.Fatalf("%v %+v", err, plan)
	}
}

// IPv6 entries: ifconfig-ipv6-push gives the client its fixed IPv6
// address (its IPv4 one still from the pool), iroute-ipv6 routes a
// network behind it to it.
func TestClientConfigDirIPv6(t *testing.T) {
	f := newFixture(t)
	cfg := ccdConfig(f, map[string]string{"v6": "ifconfig-ipv6-push fd42::50/64 fd42::1\niroute-ipv6 fd99:1::/64\n"})
	cfg.Network6 = netip.MustParsePrefix("fd42::/64")
	s := startServer(t, cfg, Options{})
	c := dialClient(t, f.clientConfig(t, s, "v6", ""), client.Options{})
	if got := c.Pushed().Local6; got != netip.MustParsePrefix("fd42::50/64") {
		t.Errorf("IPv6 address %v, want the fixed fd42::50/64", got)
	}
	if got := c.Pushed().Local.Addr(); got != netip.MustParseAddr("10.8.0.2") {
		t.Errorf("IPv4 address %v, want the pool's 10.8.0.2", got)
	}
	other := dialClient(t, f.clientConfig(t, s, "other", ""), client.Options{})
	if got := other.Pushed().Local6.Addr(); got != netip.MustParseAddr("fd42::1001") {
		t.Errorf("other's IPv6 address %v, want the pool's fd42::1001", got)
	}
	got := make(chan netip.Addr, 4)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := c.ReadPacket(buf)
			if err != nil {
				return
			}
			if _, dst, ok := ipAddrs(buf[:n]); ok {
				got <- dst
			}
		}
	}()
	behind := netip.MustParseAddr("fd99:1::5")
	if err := s.WritePacket(ipv6Packet(s.TunnelAddress6().Addr(), behind, nil)); err != nil {
		t.Fatalf("to %v: %v", behind, err)
	}
	select {
	case d := <-got:
		if d != behind {
			t.Errorf("the client got a packet to %v", d)
		}
	case <-time.After(3 * time.Second):
		t.Error("the packet to the network behind the client did not arrive")
	}
	if err := s.WritePacket(ipv6Packet(s.TunnelAddress6().Addr(), netip.MustParseAddr("fd99:2::5"), nil)); !errors.Is(err, ErrNoRoute) {
		t.Errorf("a network no client owns: %v", err)
	}
}

// ccdMutations are TestReloadCoversEveryField's cases for the
// client-config settings.
func ccdMutations() map[string]func(c *Config) {
	return map[string]func(c *Config){
		"ClientConfigDir": func(c *Config) { c.ClientConfigDir = "/etc/openvpn/ccd" },
		"CCDExclusive":    func(c *Config) { c.CCDExclusive = true },
		"ClientConfigs": func(c *Config) {
			c.ClientConfigs = map[string]*config.ClientConfig{"a": {Name: "a", IRoutes: []netip.Prefix{netip.MustParsePrefix("10.50.0.0/24")}}}
		},
	}
}
