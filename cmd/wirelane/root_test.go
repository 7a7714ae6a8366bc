package main

// Tests that need root. Every `up`/`down` runs inside a fresh network
// namespace (ip netns exec), so the host's interfaces, routes and rules are
// never touched; the UAPI socket directory is shared, so interface names are
// unique per test.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/uapi"
	tnetns "github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

var (
	daemonOnce sync.Once
	daemonVars []string // extra environment selecting the daemon
	daemonDesc string
	daemonErr  error
)

// daemonEnv picks the userspace daemon `up` starts: the built-in one when
// this build has the WireGuard engine, else the reference wireguard-go built
// from the module cache (WIRELANE_DAEMON), so that everything around the
// daemon is still tested. The choice is logged.
func daemonEnv(t *testing.T) []string {
	t.Helper()
	tnetns.Need(t)
	daemonOnce.Do(func() {
		ns := "wlprobe" + fmt.Sprint(os.Getpid())
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			daemonErr = fmt.Errorf("ip netns add: %v: %s", err, out)
			return
		}
		defer exec.Command("ip", "netns", "del", ns).Run()
		name := tnetns.Unique("wlp")
		cmd := exec.Command("ip", "netns", "exec", ns, self(t), "daemon", name)
		cmd.Env = append(os.Environ(), cliEnv)
		out, err := cmd.CombinedOutput()
		if err == nil {
			exec.Command("ip", "-n", ns, "link", "del", name).Run()
			(&wgtunnel.Daemon{}).Stopped(name, 2*time.Second) // stops the probe daemon
			daemonDesc = "built-in daemon (wirelane daemon)"
			return
		}
		bin := filepath.Join(os.TempDir(), fmt.Sprintf("wirelane-test-wireguard-go-%d", os.Getpid()))
		b := exec.Command("go", "build", "-o", bin, "golang.zx2c4.com/wireguard")
		if bout, berr := b.CombinedOutput(); berr != nil {
			daemonErr = fmt.Errorf("built-in daemon unusable (%s) and building wireguard-go failed: %v: %s", strings.TrimSpace(string(out)), berr, bout)
			return
		}
		daemonVars = []string{"WIRELANE_DAEMON=" + bin}
		daemonDesc = "reference wireguard-go via WIRELANE_DAEMON, because the built-in daemon failed: " + strings.TrimSpace(string(out))
	})
	if daemonErr != nil {
		t.Skipf("no userspace daemon available: %v", daemonErr)
	}
	return append([]string{cliEnv}, daemonVars...)
}

// logDaemon names the daemon a test uses (once per test).
func logDaemon(t *testing.T) []string {
	t.Helper()
	env := daemonEnv(t)
	t.Logf("daemon: %s", daemonDesc)
	return env
}

// wlIn runs wirelane inside ns.
func wlIn(t *testing.T, ns *tnetns.NS, args ...string) (string, error) {
	t.Helper()
	return tnetns.Try(ns, daemonEnv(t), append([]string{self(t)}, args...)...)
}

// writeConf writes IFNAME.conf into a temp dir and returns its path.
func writeConf(t *testing.T, ifname, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), ifname+".conf")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func genKey(t *testing.T) (priv, pub string) {
	k, err := wgquick.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.String(), k.PublicKey().String()
}

var (
	linkLocalRE = regexp.MustCompile(`fe80::|ff00::|multicast`)
	spacesRE    = regexp.MustCompile(`\s+`)
)

// netState describes the namespace's network configuration in sorted,
// comparable lines: links (name, MTU, up), global addresses, routes of
// every table but local, and the IPv4 and IPv6 rules.
func netState(t *testing.T, ns *tnetns.NS) string {
	t.Helper()
	var lines []string
	add := func(prefix, out string) {
		for _, l := range strings.Split(out, "\n") {
			l = strings.TrimSpace(spacesRE.ReplaceAllString(l, " "))
			if l == "" || linkLocalRE.MatchString(l) || strings.Contains(l, "table local") || strings.Contains(l, "valid_lft") {
				continue
			}
			lines = append(lines, prefix+l)
		}
	}
	links := tnetns.Run(t, ns, "ip", "-o", "link", "show")
	for _, l := range strings.Split(links, "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		// "2: wl0: <POINTOPOINT,...,UP,LOWER_UP> mtu 1420 ..."
		mtu := ""
		for i := range f {
			if f[i] == "mtu" && i+1 < len(f) {
				mtu = f[i+1]
			}
		}
		up := strings.Contains(f[2], ",UP") || strings.Contains(f[2], "<UP")
		lines = append(lines, fmt.Sprintf("link %s mtu %s up %v", strings.TrimSuffix(f[1], ":"), mtu, up))
	}
	for _, fam := range []string{"-4", "-6"} {
		addrs := tnetns.Run(t, ns, "ip", "-o", fam, "addr", "show")
		for _, l := range strings.Split(addrs, "\n") {
			f := strings.Fields(l)
			if len(f) >= 4 && !strings.Contains(l, "scope link") {
				lines = append(lines, "addr "+f[1]+" "+f[3])
			}
		}
		add("route"+fam+" ", tnetns.Run(t, ns, "ip", fam, "route", "show", "table", "all"))
		add("rule"+fam+" ", tnetns.Run(t, ns, "ip", fam, "rule", "show"))
	}
	sort.Strings(lines)
	lines = append(lines, nftState(t, ns)...)
	return strings.Join(lines, "\n")
}

// nftState lists the namespace's nftables ruleset (wg-quick's firewall for
// a default route) as "nft ..." lines, one table after the other in name
// and family order. IPv6 link-local addresses are left out: wg-quick
// protects those it happens to see, which depends on timing. Without the
// nft command it returns nothing.
func nftState(t *testing.T, ns *tnetns.NS) []string {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		return nil
	}
	var tables [][]string
	for _, l := range strings.Split(tnetns.Run(t, ns, "nft", "list", "ruleset"), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.Contains(l, "fe80:") {
			continue
		}
		if strings.HasPrefix(l, "table ") || len(tables) == 0 {
			tables = append(tables, nil)
		}
		tables[len(tables)-1] = append(tables[len(tables)-1], "nft "+l)
	}
	sort.Slice(tables, func(i, j int) bool { return tables[i][0] < tables[j][0] })
	var out []string
	for _, tb := range tables {
		out = append(out, tb...)
	}
	return out
}

// peerState is what `wirelane show --json` says about one interface,
// without the changing counters.
func peerState(t *testing.T, ns *tnetns.NS, ifname string) string {
	t.Helper()
	out, err := wlIn(t, ns, "show", "--json", ifname)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var doc wgquick.ShowJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var b strings.Builder
	for _, in := range doc.Interfaces {
		fmt.Fprintf(&b, "interface %s pub %s port %d fwmark %d\n", in.Name, in.PublicKey, in.ListenPort, in.FwMark)
		var peers []string
		for _, p := range in.Peers {
			peers = append(peers, fmt.Sprintf("peer %s psk %v endpoint %s allowed %v keepalive %d\n", p.PublicKey, p.HasPresharedKey, p.Endpoint, p.AllowedIPs, p.PersistentKeepalive))
		}
		sort.Strings(peers) // a daemon may list peers in any order
		b.WriteString(strings.Join(peers, ""))
	}
	return b.String()
}

func socketGone(ifname string) error {
	if _, err := os.Stat(uapi.SocketPath(ifname)); err == nil {
		return fmt.Errorf("%s.sock still exists", ifname)
	}
	return nil
}

// noDaemonIn checks that no process runs inside the namespace any more.
func noDaemonIn(ns *tnetns.NS) error {
	out, _ := exec.Command("ip", "netns", "pids", ns.Name).Output()
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("processes still in %s: %s", ns.Name, s)
	}
	return nil
}

func fullTunnelConf(t *testing.T, extra string) (body, peerPub string) {
	priv, _ := genKey(t)
	_, peerPub = genKey(t)
	_, peer2 := genKey(t)
	psk, _ := wgquick.GeneratePresharedKey()
	return fmt.Sprintf(`[Interface]
PrivateKey = %s
ListenPort = 51999
Address = 10.77.0.1/24, fd77::1/64
Address = 10.78.0.1
%s
[Peer]
PublicKey = %s
PresharedKey = %s
AllowedIPs = 10.77.0.0/24, 10.90.0.0/16, 0.0.0.0/0, ::/0
Endpoint = 127.0.0.1:51820
PersistentKeepalive = 25

[Peer]
PublicKey = %s
AllowedIPs = 10.91.0.0/16, fd91::/48
Endpoint = [::1]:51821
`, priv, extra, peerPub, psk.String(), peer2), peerPub
}

func TestUpDown(t *testing.T) {
	logDaemon(t)
	ns := tnetns.New(t, "wlu")
	ifname := tnetns.Unique("wlu")
	marker := filepath.Join(t.TempDir(), "hooks")
	body, peerPub := fullTunnelConf(t, fmt.Sprintf("PreUp = echo pre-%%i >> %s\nPostUp = echo up-%%i >> %s\nPreDown = echo predown-%%i >> %s\nPostDown = echo down-%%i >> %s", marker, marker, marker, marker))
	conf := writeConf(t, ifname, body)
	before := netState(t, ns)

	out, err := wlIn(t, ns, "up", conf)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	state := netState(t, ns)
	for _, want := range []string{
		"link " + ifname + " mtu 65456 up true", // loopback endpoint: 65536 - 80
		"addr " + ifname + " 10.77.0.1/24",
		"addr " + ifname + " 10.78.0.1/32",
		"addr " + ifname + " fd77::1/64",
		"route-4 10.90.0.0/16 dev " + ifname + " scope link",
		"route-4 10.91.0.0/16 dev " + ifname + " scope link",
		"route-4 default dev " + ifname + " table 51820 scope link",
		"route-6 default dev " + ifname + " table 51820 metric 1024 pref medium",
		"route-6 fd91::/48 dev " + ifname + " metric 1024 pref medium",
		"rule-4 32764: from all lookup main suppress_prefixlength 0",
		"rule-4 32765: not from all fwmark 0xca6c lookup 51820",
		"rule-6 32764: from all lookup main suppress_prefixlength 0",
		"rule-6 32765: not from all fwmark 0xca6c lookup 51820",
	} {
		if !strings.Contains(state+"\n", want+"\n") {
			t.Errorf("after up, missing %q in:\n%s", want, state)
		}
	}
	// 10.77.0.0/24 is covered by the address's own route: no second route.
	if strings.Count(state, "route-4 10.77.0.0/24") != 1 {
		t.Errorf("10.77.0.0/24 routed more than once:\n%s", state)
	}
	peers := peerState(t, ns, ifname)
	for _, want := range []string{
		fmt.Sprintf("port 51999 fwmark 51820"),
		fmt.Sprintf("peer %s psk true endpoint 127.0.0.1:51820 allowed [10.77.0.0/24 10.90.0.0/16 0.0.0.0/0 ::/0] keepalive 25", peerPub),
		"endpoint [::1]:51821 allowed [10.91.0.0/16 fd91::/48] keepalive 0",
	} {
		if !strings.Contains(peers, want) {
			t.Errorf("peers lack %q:\n%s", want, peers)
		}
	}
	if out, err := wlIn(t, ns, "up", conf); err == nil || !strings.Contains(out, "already exists") {
		t.Errorf("second up: %v\n%s", err, out)
	}
	// A tray client's view: the tunnel is listed as up, with its peers.
	listed, err := wlIn(t, ns, "list", "--json")
	var doc struct {
		Tunnels []listEntry `json:"tunnels"`
	}
	if err != nil || json.Unmarshal([]byte(listed), &doc) != nil {
		t.Errorf("list --json: %v\n%s", err, listed)
	}
	found := false
	for _, e := range doc.Tunnels {
		if e.Name == ifname {
			found = e.State == "up" && e.Kind == "wireguard" && e.Peers == 2
			if !found {
				t.Errorf("list: %+v", e)
			}
		}
	}
	if !found {
		t.Errorf("list --json lacks %s:\n%s", ifname, listed)
	}
	human, err := wlIn(t, ns, "show", ifname)
	if err != nil || !strings.Contains(human, "interface: "+ifname) || !strings.Contains(human, "persistent keepalive: every 25 seconds") {
		t.Errorf("show: %v\n%s", err, human)
	}
	if _, lerr := exec.LookPath("wg"); lerr == nil {
		// The human form is wg's, line for line. A handshake retry may
		// change the byte counters between the two calls: try again then.
		want := tnetns.Run(t, ns, "wg", "show", ifname)
		for try := 0; human != want && try < 3; try++ {
			human, _ = wlIn(t, ns, "show", ifname)
			want = tnetns.Run(t, ns, "wg", "show", ifname)
		}
		if human != want {
			t.Errorf("wirelane show:\n%s\nwg show:\n%s", human, want)
		}
	}

	out, err = wlIn(t, ns, "down", conf)
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if after := netState(t, ns); after != before {
		t.Errorf("after down:\n%s\nwant:\n%s", after, before)
	}
	tnetns.Eventually(t, 5*time.Second, "daemon exit", func() error {
		if err := socketGone(ifname); err != nil {
			return err
		}
		return noDaemonIn(ns)
	})
	hooks, _ := os.ReadFile(marker)
	if want := fmt.Sprintf("pre-%[1]s\nup-%[1]s\npredown-%[1]s\ndown-%[1]s\n", ifname); string(hooks) != want {
		t.Errorf("hooks ran as\n%s\nwant\n%s", hooks, want)
	}
	if out, err := wlIn(t, ns, "down", conf); err == nil || !strings.Contains(out, "is not a WireGuard interface") {
		t.Errorf("down twice: %v\n%s", err, out)
	}
}

func TestFailedUpLeavesNothing(t *testing.T) {
	logDaemon(t)
	priv, _ := genKey(t)
	_, pub := genKey(t)
	head := "[Interface]\nPrivateKey = " + priv + "\nAddress = 10.66.0.1/24\n"
	peer := "[Peer]\nPublicKey = " + pub + "\nAllowedIPs = 0.0.0.0/0, 10.99.0.0/16\nEndpoint = 127.0.0.1:51820\n"
	tests := []struct {
		name, body, wantErr string
		setup               []string // run in the namespace first (part of "before")
	}{
		{"PostUp fails after routes and rules exist", head + "PostUp = exit 3\n" + peer, `hook "exit 3" failed`, nil},
		{"PreUp fails before anything", head + "PreUp = false\n" + peer, `hook "false" failed`, nil},
		{"endpoint does not resolve", head + "[Peer]\nPublicKey = " + pub + "\nAllowedIPs = 10.99.0.0/16\nEndpoint = no-such-host.invalid:51820\n", `.conf:7: Endpoint: cannot resolve "no-such-host.invalid"`, nil},
		{"unknown table name", head + "Table = nosuchtable\n" + peer, `.conf:4: Table: routing table "nosuchtable" is not a number`, nil},
		{"same address twice", head + "Address = 10.66.0.1/24\n" + peer, "add address 10.66.0.1/24", nil},
		{"route already taken", head + peer, "add route 10.99.0.0/16", []string{"ip route add 10.99.0.0/16 dev lo"}},
		{"listen port taken", head + "ListenPort = 51234\n" + peer, "configure IF: ListenPort 51234 is already in use (address already in use)", []string{"HOLDUDP 51234"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tnetns.New(t, "wlf")
			for _, s := range tt.setup {
				if port, ok := strings.CutPrefix(s, "HOLDUDP "); ok {
					holdUDPPort(t, ns, port)
					continue
				}
				tnetns.Run(t, ns, strings.Fields(s)...)
			}
			ifname := tnetns.Unique("wlf")
			tt.wantErr = strings.ReplaceAll(tt.wantErr, "IF", ifname)
			conf := writeConf(t, ifname, tt.body)
			before := netState(t, ns)
			out, err := wlIn(t, ns, "up", conf)
			if err == nil {
				t.Fatalf("up succeeded:\n%s", out)
			}
			if !strings.Contains(out, tt.wantErr) {
				t.Errorf("output lacks %q:\n%s", tt.wantErr, out)
			}
			if after := netState(t, ns); after != before {
				t.Errorf("state after failed up:\n%s\nwant:\n%s", after, before)
			}
			tnetns.Eventually(t, 5*time.Second, "daemon exit", func() error {
				if err := socketGone(ifname); err != nil {
					return err
				}
				return noDaemonIn(ns)
			})
		})
	}
}

func TestSaveConfig(t *testing.T) {
	logDaemon(t)
	ns := tnetns.New(t, "wls")
	ifname := tnetns.Unique("wls")
	body, peerPub := fullTunnelConf(t, "SaveConfig = true\nMTU = 1300\nPostUp = true")
	conf := writeConf(t, ifname, body)
	if out, err := wlIn(t, ns, "up", conf); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	downDone := false
	defer func() {
		if !downDone {
			wlIn(t, ns, "down", conf)
		}
	}()
	// Change the running configuration, then save it.
	_, newPeer := genKey(t)
	tnetns.Run(t, ns, "ip", "address", "add", "10.79.0.1/24", "dev", ifname)
	wc, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	np, _ := wgtypes.ParseKey(newPeer)
	_, n92, _ := net.ParseCIDR("10.92.0.0/16")
	if err := wc.ConfigureDevice(ifname, wgtypes.Config{Peers: []wgtypes.PeerConfig{{
		PublicKey: np, AllowedIPs: []net.IPNet{*n92}, Endpoint: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 4000},
	}}}); err != nil {
		t.Fatal(err)
	}
	if out, err := wlIn(t, ns, "save", conf); err != nil {
		t.Fatalf("save: %v\n%s", err, out)
	}
	b, _ := os.ReadFile(conf)
	c, err := wgquick.Parse(conf, b)
	if err != nil {
		t.Fatalf("saved file does not parse: %v\n%s", err, b)
	}
	if fi, _ := os.Stat(conf); fi.Mode().Perm() != 0o600 {
		t.Errorf("saved file mode %v", fi.Mode())
	}
	if bak, err := os.ReadFile(conf + ".bak"); err != nil || string(bak) != body {
		t.Errorf("%s.bak = %q, %v; want the file as it was before save", conf, bak, err)
	}
	if c.Interface.MTU != 1300 || !c.Interface.SaveConfig || len(c.Interface.PostUp) != 1 || *c.Interface.FwMark != 51820 || *c.Interface.ListenPort != 51999 {
		t.Errorf("interface part: %+v", c.Interface)
	}
	if len(c.Interface.Addresses) != 4 || len(c.Peers) != 3 {
		t.Errorf("saved %d addresses, %d peers:\n%s", len(c.Interface.Addresses), len(c.Peers), b)
	}
	found := false
	for _, p := range c.Peers {
		if p.PublicKey.String() == newPeer && p.Endpoint == "127.0.0.1:4000" {
			found = true
		}
		if p.PublicKey.String() == peerPub && (p.PresharedKey == nil || len(p.AllowedIPs) != 4) {
			t.Errorf("first peer lost its settings: %+v", p)
		}
	}
	if !found {
		t.Errorf("new peer not saved:\n%s", b)
	}

	// SaveConfig = true: down writes the running state back first.
	if err := wc.ConfigureDevice(ifname, wgtypes.Config{Peers: []wgtypes.PeerConfig{{PublicKey: np, Remove: true}}}); err != nil {
		t.Fatal(err)
	}
	out, err := wlIn(t, ns, "down", conf)
	downDone = true
	if err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	b, _ = os.ReadFile(conf)
	if c, err = wgquick.Parse(conf, b); err != nil || len(c.Peers) != 2 || strings.Contains(string(b), newPeer) {
		t.Errorf("down did not save the running state (%v):\n%s", err, b)
	}
}

// TestSaveRefusesAStateWithoutTheKey is the lost-key case: a daemon that
// has lost its private key (here: removed over UAPI) must not have its
// empty state written over the file, neither by save (even --force) nor
// by down with SaveConfig = true.
func TestSaveRefusesAStateWithoutTheKey(t *testing.T) {
	logDaemon(t)
	ns := tnetns.New(t, "wlk")
	ifname := tnetns.Unique("wlk")
	body, _ := fullTunnelConf(t, "SaveConfig = true")
	conf := writeConf(t, ifname, body)
	if out, err := wlIn(t, ns, "up", conf); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	wc, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	var none wgtypes.Key
	if err := wc.ConfigureDevice(ifname, wgtypes.Config{PrivateKey: &none}); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"save", "down", "save --force"} {
		out, err := wlIn(t, ns, append(strings.Fields(cmd), conf)...)
		if err == nil || !strings.Contains(out, "has no private key") {
			t.Errorf("%s of a keyless state: %v\n%s", cmd, err, out)
		}
		if b, _ := os.ReadFile(conf); string(b) != body {
			t.Errorf("%s changed the file:\n%s", cmd, b)
		}
	}
	if _, err := os.Stat(conf + ".bak"); err == nil {
		t.Errorf("a refused save left %s.bak", conf)
	}
	// The tunnel is still up (down refused): deleting its interface ends
	// the daemon, which removes its socket; the record of up goes too.
	tnetns.Run(t, ns, "ip", "link", "del", ifname)
	tnetns.Eventually(t, 5*time.Second, "daemon exit", func() error { return socketGone(ifname) })
	os.Remove(filepath.Join(wgtunnel.StateDir, ifname+".json"))
}

// TestSaveRefusesARestartedDaemon is the other way to lose the file: the
// daemon `up` configured dies (SIGKILL) and a fresh one with the same key
// but no peers and no addresses answers on the socket (started by
// something else and given the key again). Neither save nor down
// (SaveConfig = true) may write its state over the file, and the refused
// down runs no hook and leaves that daemon be. Once it is gone too, down
// cleans up after the dead daemon, runs PostDown (not PreDown) and still
// leaves the file byte for byte.
func TestSaveRefusesARestartedDaemon(t *testing.T) {
	env := logDaemon(t)
	ns := tnetns.New(t, "wlr")
	ifname := tnetns.Unique("wlr")
	marker := filepath.Join(t.TempDir(), "hooks")
	body, _ := fullTunnelConf(t, fmt.Sprintf("SaveConfig = true\nPreDown = echo predown-%%i >> %s\nPostDown = echo postdown-%%i >> %s", marker, marker))
	conf := writeConf(t, ifname, body)
	before := netState(t, ns)
	if out, err := wlIn(t, ns, "up", conf); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	defer exec.Command("ip", "-n", ns.Name, "link", "del", ifname).Run() // whichever daemon runs
	c, err := wgquick.Parse(conf, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	key := wgtypes.Key(*c.Interface.PrivateKey)

	killTheDaemon(t, ns, ifname)
	// The fresh daemon, the program up runs.
	start := []string{self(t), "daemon", ifname}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "WIRELANE_DAEMON="); ok {
			start = []string{v, ifname}
		}
	}
	if out, err := tnetns.Try(ns, env, start...); err != nil {
		t.Fatalf("starting a fresh daemon: %v\n%s", err, out)
	}
	wc, err := wgctrl.New()
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	if err := wc.ConfigureDevice(ifname, wgtypes.Config{PrivateKey: &key}); err != nil {
		t.Fatal(err)
	}

	for _, cmd := range []string{"save", "down"} {
		out, err := wlIn(t, ns, cmd, conf)
		for _, want := range []string{"not saving " + ifname + " to " + conf + ": the daemon answering is not the one `wirelane up` configured", "is gone and another answers", "(the file keeps its contents)", "save --force"} {
			if err == nil || !strings.Contains(out, want) {
				t.Errorf("%s with a restarted daemon: %v; want %q in:\n%s", cmd, err, want, out)
			}
		}
		if b, _ := os.ReadFile(conf); string(b) != body {
			t.Fatalf("%s changed the file:\n%s", cmd, b)
		}
	}
	if _, err := os.Stat(conf + ".bak"); err == nil {
		t.Errorf("a refused save left %s.bak", conf)
	}
	if _, err := wc.Device(ifname); err != nil {
		t.Errorf("the refused down stopped the daemon: %v", err)
	}
	if b, _ := os.ReadFile(marker); len(b) != 0 {
		t.Errorf("the refused down ran hooks: %q", b)
	}

	// That daemon goes too; down cleans up after the dead one.
	tnetns.Run(t, ns, "ip", "link", "del", ifname)
	tnetns.Eventually(t, 5*time.Second, "daemon exit", func() error { return socketGone(ifname) })
	out2, err := wlIn(t, ns, "down", conf)
	if err != nil || !strings.Contains(out2, "the daemon for "+ifname+" was not running") || !strings.Contains(out2, conf+" keeps its contents") {
		t.Fatalf("down after the daemon died: %v\n%s", err, out2)
	}
	if b, _ := os.ReadFile(marker); string(b) != "postdown-"+ifname+"\n" {
		t.Errorf("hooks run by down after the daemon died: %q, want PostDown's only", b)
	}
	if b, _ := os.ReadFile(conf); string(b) != body {
		t.Errorf("down after the daemon died changed the file:\n%s", b)
	}
	if after := netState(t, ns); after != before {
		t.Errorf("after down:\n%s\nwant:\n%s", after, before)
	}
}

// TestSameStateAsWGQuick brings the same files up with the real wg-quick
// and with wirelane and compares the resulting interface state.
func TestSameStateAsWGQuick(t *testing.T) {
	env := logDaemon(t)
	tnetns.Need(t, "wg-quick", "wg")
	_, nftErr := exec.LookPath("nft")
	_, iptErr := exec.LookPath("iptables-restore")
	if nftErr != nil && iptErr != nil {
		t.Skip("wg-quick needs nft or iptables-restore for a default route; neither is installed")
	}
	impl := ""
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "WIRELANE_DAEMON="); ok {
			impl = v
		}
	}
	if impl == "" { // the built-in daemon, behind a wrapper wg-quick can run
		impl = filepath.Join(t.TempDir(), "wirelane-daemon")
		os.WriteFile(impl, []byte("#!/bin/sh\nexec "+self(t)+" daemon \"$@\"\n"), 0o755)
	}
	quickEnv := append(env, "WG_QUICK_USERSPACE_IMPLEMENTATION="+impl)
	full, _ := fullTunnelConf(t, "MTU = 1400\nTable = auto")
	auto, _ := fullTunnelConf(t, "FwMark = 0x1234") // automatic MTU; the fwmark doubles as the table
	priv, _ := genKey(t)
	_, pub := genKey(t)
	split := "[Interface]\nPrivateKey = " + priv + "\nListenPort = 51444\nAddress = 10.44.0.2/16\nTable = 4321\n[Peer]\nPublicKey = " + pub +
		"\nAllowedIPs = 10.44.0.0/16, 10.45.1.0/24, fd44::/64\nEndpoint = [::1]:4444\n"
	for _, tt := range []struct{ name, body string }{
		{"full tunnel", full}, {"full tunnel with FwMark and automatic MTU", auto}, {"numbered table", split},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := tnetns.New(t, "wlq")
			ifname := tnetns.Unique("wlq")
			conf := writeConf(t, ifname, tt.body)
			before := netState(t, ns)
			tnetns.RunEnv(t, ns, quickEnv, "wg-quick", "up", conf)
			wantNet, wantPeers := netState(t, ns), peerState(t, ns, ifname)
			tnetns.RunEnv(t, ns, quickEnv, "wg-quick", "down", conf)
			tnetns.Eventually(t, 5*time.Second, "wg-quick's daemon exit", func() error { return socketGone(ifname) })
			if s := netState(t, ns); s != before {
				t.Fatalf("wg-quick down left:\n%s", s)
			}

			if out, err := wlIn(t, ns, "up", conf); err != nil {
				t.Fatalf("up: %v\n%s", err, out)
			}
			gotNet, gotPeers := netState(t, ns), peerState(t, ns, ifname)
			if out, err := wlIn(t, ns, "down", conf); err != nil {
				t.Fatalf("down: %v\n%s", err, out)
			}
			if gotNet != wantNet {
				t.Errorf("network state differs.\nwirelane:\n%s\nwg-quick:\n%s", gotNet, wantNet)
			}
			if gotPeers != wantPeers {
				t.Errorf("device state differs.\nwirelane:\n%s\nwg-quick:\n%s", gotPeers, wantPeers)
			}
			if s := netState(t, ns); s != before {
				t.Errorf("wirelane down left:\n%s", s)
			}
		})
	}
}

func TestDemoRunsToCompletion(t *testing.T) {
	env := logDaemon(t)
	cmd := exec.Command(self(t), "demo", "--duration", "1s")
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	for _, want := range []string{"handshake: completed", "4/4 replies", "throughput: ", "bit/s", "latest handshake:", "cleanup:"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	if strings.Contains(string(links), fmt.Sprintf("wldemo%d", cmd.Process.Pid%1000000)) {
		t.Errorf("demo left interfaces:\n%s", links)
	}
	tnetns.Eventually(t, 5*time.Second, "demo daemons exit", func() error {
		m, _ := filepath.Glob(uapi.SocketPath(fmt.Sprintf("wldemo%d*", cmd.Process.Pid%1000000)))
		if len(m) > 0 {
			return fmt.Errorf("sockets left: %v", m)
		}
		return nil
	})
}

func TestTableAndMTUChoices(t *testing.T) {
	logDaemon(t)
	priv, _ := genKey(t)
	_, pub := genKey(t)
	tests := []struct {
		name, iface, peerExtra string
		want, notWant          []string
	}{
		{"numbered table gets every route, no rules", "Table = 1234\n", "Endpoint = 127.0.0.1:51820\n",
			[]string{"route-4 default dev IF table 1234 scope link", "route-4 10.50.0.0/16 dev IF table 1234 scope link", "link IF mtu 65456 up true"},
			[]string{"rule-4 32765", "table 51820"}},
		{"Table = off adds no routes", "Table = off\n", "",
			[]string{"link IF mtu 1420 up true"}, // no endpoint, no default route: 1500 - 80
			[]string{"route-4 default", "route-4 10.50.0.0/16", "rule-4 32765"}},
		{"named table", "Table = main\nMTU = 1280\n", "",
			[]string{"route-4 default dev IF scope link", "link IF mtu 1280 up true"},
			[]string{"rule-4 32765"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tnetns.New(t, "wlt")
			ifname := tnetns.Unique("wlt")
			conf := writeConf(t, ifname, "[Interface]\nPrivateKey = "+priv+"\n"+tt.iface+"[Peer]\nPublicKey = "+pub+"\nAllowedIPs = 0.0.0.0/0, 10.50.0.0/16\n"+tt.peerExtra)
			if out, err := wlIn(t, ns, "up", conf); err != nil {
				t.Fatalf("up: %v\n%s", err, out)
			}
			state := netState(t, ns) + "\n"
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "IF", ifname); !strings.Contains(state, w+"\n") {
					t.Errorf("missing %q in\n%s", w, state)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(state, strings.ReplaceAll(w, "IF", ifname)) {
					t.Errorf("unexpected %q in\n%s", w, state)
				}
			}
			if out, err := wlIn(t, ns, "down", conf); err != nil {
				t.Fatalf("down: %v\n%s", err, out)
			}
		})
	}
}

// TestUpIntoAClosedPipeRollsBack is `wirelane up X 2>&1 | head -1`: the
// reader goes away while up still has lines to print. The write that
// meets the closed pipe must undo up, not kill it half way.
func TestUpIntoAClosedPipeRollsBack(t *testing.T) {
	env := logDaemon(t)
	ns := tnetns.New(t, "wlpp")
	ifname := tnetns.Unique("wlpp")
	// The second hook's "[#]" line is printed after the reader is gone.
	body, _ := fullTunnelConf(t, "PostUp = sleep 1\nPostUp = true")
	conf := writeConf(t, ifname, body)
	before := netState(t, ns)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := tnetns.Command(ns, self(t), "up", conf)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	first, err := bufio.NewReader(r).ReadString('\n')
	r.Close() // as head -1 does
	if err != nil {
		t.Fatalf("first line: %q, %v", first, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("up did not end after its output pipe closed")
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("up into a closed pipe: %v, want exit status %d (first line %q)", err, exitInterrupted, first)
	}
	if after := netState(t, ns); after != before {
		t.Errorf("state after up into a closed pipe:\n%s\nwant:\n%s", after, before)
	}
	tnetns.Eventually(t, 5*time.Second, "daemon exit", func() error { return socketGone(ifname) })
}

// TestInterruptedUpRollsBack interrupts `up` inside its PostUp hook with
// every signal that can reach it there (Ctrl-C, kill, a closed terminal, a
// closed output pipe): each must undo everything and exit 130.
func TestInterruptedUpRollsBack(t *testing.T) {
	env := logDaemon(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE} {
		t.Run(unix.SignalName(sig), func(t *testing.T) {
			ns := tnetns.New(t, "wli")
			ifname := tnetns.Unique("wli")
			body, _ := fullTunnelConf(t, "PostUp = sleep 30")
			conf := writeConf(t, ifname, body)
			before := netState(t, ns)
			p := tnetns.StartEnv(t, ns, env, self(t), "up", conf)
			// Wait until up is inside its PostUp hook (the routes exist by then).
			tnetns.Eventually(t, 10*time.Second, "up reaching PostUp", func() error {
				if s := netState(t, ns); !strings.Contains(s, "table 51820") {
					return fmt.Errorf("no policy route yet")
				}
				return nil
			})
			time.Sleep(100 * time.Millisecond)
			p.Cmd.Process.Signal(sig) // ip netns exec runs the command in place: this is wirelane
			out, err := p.Wait(t, 10*time.Second)
			if err == nil {
				t.Fatalf("interrupted up exited 0:\n%s", out)
			}
			if !strings.Contains(out, "undoing") || !strings.Contains(out, "wirelane up: interrupted; everything it had set up was removed") {
				t.Errorf("no rollback reported:\n%s", out)
			}
			if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
				t.Errorf("interrupted up: %v, want exit status %d", err, exitInterrupted)
			}
			if after := netState(t, ns); after != before {
				t.Errorf("state after interrupted up:\n%s\nwant:\n%s", after, before)
			}
			tnetns.Eventually(t, 5*time.Second, "daemon exit", func() error { return socketGone(ifname) })
		})
	}
}

// noResolverEnv is an environment with neither resolvconf (PATH holds an
// empty directory) nor a systemd-resolved (the D-Bus system bus points
// at nothing), whatever the host has.
func noResolverEnv(t *testing.T) []string {
	dir := t.TempDir()
	return []string{"PATH=" + dir, "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + filepath.Join(dir, "no-bus")}
}

// TestDNSWithoutResolverFailsClosed brings a full tunnel with DNS up on a
// host with neither resolvconf nor systemd-resolved: up fails at the DNS
// line, as wg-quick does, and leaves no link, address, route, rule or
// nftables table behind. With "# wirelane: DNSOptional = true" the same
// file comes up with a warning.
func TestDNSWithoutResolverFailsClosed(t *testing.T) {
	env := append(logDaemon(t), noResolverEnv(t)...)
	ns := tnetns.New(t, "wld")
	ifname := tnetns.Unique("wld")
	body, _ := fullTunnelConf(t, "DNS = 10.77.0.53, corp.example")
	conf := writeConf(t, ifname, body)
	before := netState(t, ns)
	out, err := tnetns.Try(ns, env, self(t), "up", conf)
	if err == nil {
		t.Fatalf("up without a resolver succeeded:\n%s", out)
	}
	want := conf + ":6: DNS: neither systemd-resolved is running nor resolvconf is installed, so the DNS servers cannot be applied; install resolvconf"
	if !strings.Contains(out, want) || !strings.Contains(out, `"# wirelane: DNSOptional = true"`) {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
	if after := netState(t, ns); after != before {
		t.Errorf("state after failed up:\n%s\nwant:\n%s", after, before)
	}
	tnetns.Eventually(t, 5*time.Second, "daemon exit", func() error { return socketGone(ifname) })

	body, _ = fullTunnelConf(t, "DNS = 10.77.0.53\n# wirelane: DNSOptional = true")
	conf = writeConf(t, ifname, body)
	out, err = tnetns.Try(ns, env, self(t), "up", conf)
	if err != nil {
		t.Fatalf("up with DNSOptional: %v\n%s", err, out)
	}
	if !strings.Contains(out, "going on without them (DNSOptional)") {
		t.Errorf("no warning:\n%s", out)
	}
	if out, err := tnetns.Try(ns, env, self(t), "down", conf); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
}

// TestDNSThroughSystemdResolved runs a real systemd-resolved on a private
// system bus in the tunnel's namespace (netns.StartResolved): up of a
// full tunnel gives the link its servers, its search domain and the
// routing domain "~." with the DNS default route, as resolvectl reads
// them back; down removes them. A split tunnel gets no "~.".
func TestDNSThroughSystemdResolved(t *testing.T) {
	env := logDaemon(t)
	ns := tnetns.New(t, "wlsr")
	rd := tnetns.StartResolved(t, ns)
	env = append(env, rd.Env, "PATH="+t.TempDir()) // no resolvconf: resolved must do it alone
	ifname := tnetns.Unique("wlsr")
	body, _ := fullTunnelConf(t, "DNS = 10.77.0.53, fd77::53, corp.example")
	conf := writeConf(t, ifname, body)
	out, err := tnetns.Try(ns, env, self(t), "up", conf)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if !strings.Contains(out, "resolvectl dns "+ifname+" 10.77.0.53 fd77::53") || !strings.Contains(out, "resolvectl domain "+ifname+" corp.example ~.") {
		t.Errorf("up did not report the resolved calls:\n%s", out)
	}
	if got := rd.Resolvectl(t, "dns", ifname); !strings.Contains(got, "10.77.0.53 fd77::53") {
		t.Errorf("resolvectl dns %s: %s", ifname, got)
	}
	if got := rd.Resolvectl(t, "domain", ifname); !strings.Contains(got, "corp.example ~.") {
		t.Errorf("resolvectl domain %s: %s", ifname, got)
	}
	if got := rd.Resolvectl(t, "default-route", ifname); !strings.Contains(got, "yes") {
		t.Errorf("resolvectl default-route %s: %s", ifname, got)
	}
	if out, err := tnetns.Try(ns, env, self(t), "down", conf); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if got := rd.Resolvectl(t, "dns"); strings.Contains(got, ifname) || strings.Contains(got, "10.77.0.53") {
		t.Errorf("resolved still has the tunnel's servers after down:\n%s", got)
	}
	if got := rd.Resolvectl(t, "domain"); strings.Contains(got, "corp.example") {
		t.Errorf("resolved still has the tunnel's domains after down:\n%s", got)
	}

	// A split tunnel: servers and search domain, no "~.".
	priv, _ := genKey(t)
	_, pub := genKey(t)
	conf = writeConf(t, ifname, "[Interface]\nPrivateKey = "+priv+"\nAddress = 10.5.0.1/24\nDNS = 10.5.0.53, corp.example\n"+
		"[Peer]\nPublicKey = "+pub+"\nAllowedIPs = 10.5.0.0/24\nEndpoint = 127.0.0.1:51820\n")
	if out, err := tnetns.Try(ns, env, self(t), "up", conf); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if got := rd.Resolvectl(t, "domain", ifname); !strings.Contains(got, "corp.example") || strings.Contains(got, "~.") {
		t.Errorf("split tunnel: resolvectl domain %s: %s", ifname, got)
	}
	if out, err := tnetns.Try(ns, env, self(t), "down", conf); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
}

func TestDemoKeepAndItsRemovalCommand(t *testing.T) {
	env := logDaemon(t)
	cmd := exec.Command(self(t), "demo", "--duration", "0", "--keep")
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	tag := fmt.Sprint(cmd.Process.Pid % 1000000)
	nsA, nsB := "wl-demo-"+tag+"-a", "wl-demo-"+tag+"-b"
	t.Cleanup(func() { // in case the test fails half way
		exec.Command("ip", "-n", nsA, "link", "del", "wldemo"+tag+"a").Run()
		exec.Command("ip", "-n", nsB, "link", "del", "wldemo"+tag+"b").Run()
		exec.Command("ip", "netns", "del", nsA).Run()
		exec.Command("ip", "netns", "del", nsB).Run()
	})
	if err != nil {
		t.Fatalf("demo --keep: %v\n%s", err, out)
	}
	links := tnetns.Run(t, &tnetns.NS{Name: nsA}, "ip", "-o", "link", "show", "wldemo"+tag+"a")
	if !strings.Contains(links, ",UP") {
		t.Errorf("kept interface not up: %s", links)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	removal := strings.TrimSpace(lines[len(lines)-1])
	if !strings.HasPrefix(removal, "ip -n "+nsA) {
		t.Fatalf("last line is not the removal command: %q", removal)
	}
	if out, err := exec.Command("sh", "-c", removal).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", removal, err, out)
	}
	tnetns.Eventually(t, 5*time.Second, "daemons exit", func() error {
		for _, n := range []string{"wldemo" + tag + "a", "wldemo" + tag + "b"} {
			if err := socketGone(n); err != nil {
				return err
			}
		}
		return nil
	})
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), nsA) {
		t.Errorf("namespace left:\n%s", out)
	}
}

func TestShowSkipsStaleSockets(t *testing.T) {
	env := logDaemon(t)
	ns := tnetns.New(t, "wlsh")
	ifname := tnetns.Unique("wlsh")
	priv, _ := genKey(t)
	conf := writeConf(t, ifname, "[Interface]\nPrivateKey = "+priv+"\nListenPort = 51777\n")
	if out, err := wlIn(t, ns, "up", conf); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	defer wlIn(t, ns, "down", conf)
	// A socket nobody accepts on, as a crashed daemon leaves it.
	stale := tnetns.Unique("wlst")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: uapi.SocketPath(stale), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	defer os.Remove(uapi.SocketPath(stale))

	out, err := tnetns.Try(nil, env, self(t), "show", "--json")
	if err != nil {
		t.Fatalf("show --json: %v\n%s", err, out)
	}
	var doc wgquick.ShowJSON
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	found := false
	for _, in := range doc.Interfaces {
		if in.Name == stale {
			t.Errorf("stale socket listed as an interface")
		}
		if in.Name == ifname && in.ListenPort == 51777 {
			found = true
		}
	}
	if !found {
		t.Errorf("%s missing from:\n%s", ifname, out)
	}
	names, err := tnetns.Try(nil, env, self(t), "show", "interfaces")
	if err != nil || !strings.Contains(names, ifname) || strings.Contains(names, stale) {
		t.Errorf("show interfaces: %v: %q", err, names)
	}
}

// TestCrashedDaemon kills a tunnel's daemon (SIGKILL: no clean-up of its
// own), which leaves a stale socket and wg-quick's policy rules behind.
// `show` must say the daemon is gone (and drop the stale socket, as wg
// does); `down` must remove what is left and put the namespace back as it
// was; a second `down` finds nothing and fails as wg-quick does.
func TestCrashedDaemon(t *testing.T) {
	logDaemon(t)
	for _, showFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("show first %v", showFirst), func(t *testing.T) {
			ns := tnetns.New(t, "wlc")
			ifname := tnetns.Unique("wlc")
			body, _ := fullTunnelConf(t, "")
			conf := writeConf(t, ifname, body)
			before := netState(t, ns)
			if out, err := wlIn(t, ns, "up", conf); err != nil {
				t.Fatalf("up: %v\n%s", err, out)
			}
			killTheDaemon(t, ns, ifname)
			if err := socketGone(ifname); err == nil {
				t.Fatal("SIGKILL left no stale socket; the test proves nothing")
			}
			if showFirst {
				out, err := wlIn(t, ns, "show", ifname)
				if err == nil || !strings.Contains(out, "unable to access interface "+ifname+": its daemon is not running (removed the stale socket") {
					t.Errorf("show of a dead daemon: %v\n%s", err, out)
				}
				if err := socketGone(ifname); err != nil {
					t.Errorf("show left the stale socket: %v", err)
				}
			}
			out2, err := wlIn(t, ns, "down", conf)
			if err != nil || !strings.Contains(out2, "the daemon for "+ifname+" was not running") {
				t.Fatalf("down after a crash: %v\n%s", err, out2)
			}
			if after := netState(t, ns); after != before {
				t.Errorf("after down:\n%s\nwant:\n%s", after, before)
			}
			if err := socketGone(ifname); err != nil {
				t.Error(err)
			}
			if out, err := wlIn(t, ns, "down", conf); err == nil || !strings.Contains(out, "is not a WireGuard interface") {
				t.Errorf("second down: %v\n%s", err, out)
			}
		})
	}
}

// TestBadConfigLeavesNothing runs `up` on files with a bad line: each must
// be reported as FILE:LINE: message before anything changes (no daemon,
// no socket, no interface, same addresses, routes and rules).
func TestBadConfigLeavesNothing(t *testing.T) {
	logDaemon(t)
	ns := tnetns.New(t, "wlb")
	priv, _ := genKey(t)
	_, pub := genKey(t)
	head := "[Interface]\nPrivateKey = " + priv + "\nAddress = 10.66.0.1/24\n"
	peer := "[Peer]\nPublicKey = " + pub + "\nAllowedIPs = 0.0.0.0/0\n"
	before := netState(t, ns)
	for _, tt := range []struct{ name, body, want string }{
		{"IPv6 endpoint without brackets", head + peer + "Endpoint = 2001:db8::1:51820\n",
			`:7: Endpoint: "2001:db8::1:51820": an IPv6 address must be in brackets, as in [2001:db8::1]:51820`},
		{"same peer twice", head + peer + peer, ":7: the same PublicKey is already used by the peer on line 4"},
		{"misspelt key", head + "Adress = 10.0.0.1\n" + peer, `:4: unknown key "Adress" in [Interface]`},
		{"bad public key", head + "[Peer]\nPublicKey = abc\n", `:5: PublicKey "abc" is not a valid key`},
		{"bad MTU", head + "MTU = 9\n" + peer, `:4: MTU: "9" is not a number between 68 and 65535`},
		{"hook before any section", "PostUp = touch /tmp/never\n" + head, `:1: key "PostUp" outside of a section`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ifname := tnetns.Unique("wlb")
			conf := writeConf(t, ifname, tt.body)
			out, err := wlIn(t, ns, "up", conf)
			if err == nil {
				t.Fatalf("up succeeded:\n%s", out)
			}
			if want := "wirelane: " + conf + tt.want; !strings.HasPrefix(out, want) {
				t.Errorf("output\n%s\nwant it to start with\n%s", out, want)
			}
			if err := socketGone(ifname); err != nil {
				t.Error(err)
			}
			if err := noDaemonIn(ns); err != nil {
				t.Error(err)
			}
			if after := netState(t, ns); after != before {
				t.Errorf("state after a bad file:\n%s\nwant:\n%s", after, before)
			}
		})
	}
}

// TestDNSThroughResolvconfAndHostNameEndpoint puts a stand-in resolvconf
// on PATH (the real one is not per network namespace, so it would change
// the host's resolver) that records how it is called, and uses a host name
// as the endpoint: `up` must register the servers and search domains under
// the interface's name, resolve the name, and `down` must remove the record.
func TestDNSThroughResolvconfAndHostNameEndpoint(t *testing.T) {
	env := logDaemon(t)
	bin := t.TempDir()
	record := filepath.Join(bin, "calls")
	fake := "#!/bin/sh\necho \"$*\" >> " + record + "\ncat >> " + record + "\n"
	if err := os.WriteFile(filepath.Join(bin, "resolvconf"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	env = append(env, "PATH="+bin+":"+os.Getenv("PATH"), "DBUS_SYSTEM_BUS_ADDRESS=unix:path="+filepath.Join(bin, "no-bus"))
	ns := tnetns.New(t, "wlr")
	ifname := tnetns.Unique("wlr")
	priv, _ := genKey(t)
	_, pub := genKey(t)
	conf := writeConf(t, ifname, "[Interface]\nPrivateKey = "+priv+"\nAddress = 10.4.0.1/24\nDNS = 10.4.0.53, fd04::53, corp.example, lab.example\n"+
		"[Peer]\nPublicKey = "+pub+"\nAllowedIPs = 10.4.0.0/24\nEndpoint = localhost:51820\n")
	if out, err := tnetns.Try(ns, env, self(t), "up", conf); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	peers := peerState(t, ns, ifname)
	if !strings.Contains(peers, "endpoint 127.0.0.1:51820 ") && !strings.Contains(peers, "endpoint [::1]:51820 ") {
		t.Errorf("localhost:51820 not resolved to a loopback endpoint:\n%s", peers)
	}
	if out, err := tnetns.Try(ns, env, self(t), "down", conf); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	got, _ := os.ReadFile(record)
	want := "-a " + ifname + " -m 0 -x\nnameserver 10.4.0.53\nnameserver fd04::53\nsearch corp.example lab.example\n-d " + ifname + " -f\n"
	if _, err := os.Stat("/etc/resolvconf/interface-order"); err == nil {
		t.Logf("/etc/resolvconf/interface-order exists: the record name may carry a prefix")
		want = strings.ReplaceAll(want, " "+ifname+" ", " ")
		got = []byte(regexp.MustCompile(` \S*`+ifname+` `).ReplaceAllString(string(got), " "))
	}
	if string(got) != want {
		t.Errorf("resolvconf calls:\n%s\nwant:\n%s", got, want)
	}
}

// TestUpRefusesNameInUseElsewhere brings the same file up in a second
// namespace while the first tunnel runs: UAPI sockets are shared by all
// namespaces, so the second `up` must fail before changing anything, and
// must leave the first tunnel (and its daemon's socket) alone; so must a
// `down` run in the second namespace.
func TestUpRefusesNameInUseElsewhere(t *testing.T) {
	logDaemon(t)
	ns1, ns2 := tnetns.New(t, "wle"), tnetns.New(t, "wle")
	ifname := tnetns.Unique("wle")
	priv, _ := genKey(t)
	conf := writeConf(t, ifname, "[Interface]\nPrivateKey = "+priv+"\nListenPort = 51666\nAddress = 10.5.0.1/24\n")
	if out, err := wlIn(t, ns1, "up", conf); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	defer wlIn(t, ns1, "down", conf)
	before := netState(t, ns2)
	out, err := wlIn(t, ns2, "up", conf)
	if err == nil || !strings.Contains(out, "is in use by a running daemon") {
		t.Errorf("second up: %v\n%s", err, out)
	}
	if after := netState(t, ns2); after != before {
		t.Errorf("second namespace changed:\n%s\nwant:\n%s", after, before)
	}
	time.Sleep(200 * time.Millisecond) // a daemon told to stop would be gone by now
	out, err = wlIn(t, ns2, "down", conf)
	if err == nil || !strings.Contains(out, "is not an interface in this network namespace") {
		t.Errorf("down from the other namespace: %v\n%s", err, out)
	}
	time.Sleep(200 * time.Millisecond) // a daemon told to stop would be gone by now
	if err := socketGone(ifname); err == nil {
		t.Fatal("the running tunnel's socket was removed")
	}
	if got := peerState(t, ns1, ifname); !strings.Contains(got, "port 51666") {
		t.Errorf("first tunnel after the failed up:\n%s", got)
	}
	if out, err := wlIn(t, ns1, "down", conf); err != nil {
		t.Errorf("down of the first tunnel: %v\n%s", err, out)
	}
}

// TestDemoInterruptedCleansUp presses Ctrl-C during the throughput test:
// the demo must stop at once, remove its interfaces, daemons and
// namespaces, say so, and exit with status 130.
func TestDemoInterruptedCleansUp(t *testing.T) {
	env := logDaemon(t)
	cmd := exec.Command(self(t), "demo", "--duration", "60s")
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = time.Second
	var errb strings.Builder
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprint(cmd.Process.Pid % 1000000)
	reached := make(chan string, 1)
	var out strings.Builder
	go func() {
		buf := make([]byte, 4096)
		sent := false
		for {
			n, err := stdout.Read(buf)
			out.Write(buf[:n])
			if !sent && strings.Contains(out.String(), "throughput: TCP") {
				reached <- out.String()
				sent = true
			}
			if err != nil {
				close(reached)
				return
			}
		}
	}()
	select {
	case _, ok := <-reached:
		if !ok {
			cmd.Wait()
			t.Fatalf("demo ended before its throughput test:\n%s", errb.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("demo did not reach its throughput test within 30s")
	}
	start := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err = cmd.Wait()
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("demo took %v to stop after Ctrl-C", d)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Errorf("interrupted demo: %v, want exit status %d\n%s", err, exitInterrupted, errb.String())
	}
	if !strings.Contains(errb.String(), "wirelane demo: interrupted; everything it had set up was removed") {
		t.Errorf("stderr:\n%s", errb.String())
	}
	links, _ := exec.Command("ip", "-o", "link", "show").Output()
	if strings.Contains(string(links), "wldemo"+tag) {
		t.Errorf("interfaces left:\n%s", links)
	}
	tnetns.Eventually(t, 5*time.Second, "demo daemons exit", func() error {
		if m, _ := filepath.Glob(uapi.SocketPath("wldemo" + tag + "*")); len(m) > 0 {
			return fmt.Errorf("sockets left: %v", m)
		}
		return nil
	})
}

// holdUDPPort binds UDP port (IPv4 and IPv6) inside ns from this process,
// so that no process shows up in the namespace, until the test ends.
func holdUDPPort(t *testing.T, ns *tnetns.NS, port string) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := vnetns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := vnetns.Set(h); err != nil {
		t.Fatal(err)
	}
	c, lerr := net.ListenPacket("udp", ":"+port) // dual-stack
	if err := vnetns.Set(orig); err != nil {
		panic("cannot return to the test's network namespace: " + err.Error())
	}
	if lerr != nil {
		t.Fatal(lerr)
	}
	t.Cleanup(func() { c.Close() })
}

// killTheDaemon SIGKILLs the one daemon in ns and waits until it is gone
// and ifname's UAPI socket refuses connections: the process leaves the
// namespace's list before its last thread has closed the listening
// socket, and a socket nobody holds refuses.
func killTheDaemon(t *testing.T, ns *tnetns.NS, ifname string) {
	t.Helper()
	out, _ := exec.Command("ip", "netns", "pids", ns.Name).Output()
	pids := strings.Fields(string(out))
	if len(pids) != 1 {
		t.Fatalf("want one daemon in %s, found %q", ns.Name, pids)
	}
	exec.Command("kill", "-KILL", pids[0]).Run()
	tnetns.Eventually(t, 5*time.Second, "daemon death", func() error {
		if err := noDaemonIn(ns); err != nil {
			return err
		}
		c, err := net.Dial("unix", uapi.SocketPath(ifname))
		if err == nil {
			c.Close()
			return errors.New("the socket still accepts connections")
		}
		return nil
	})
}
