package gateway

// A two-site gateway brought up and down for real, as root, entirely inside
// throwaway network namespaces (the host's interfaces, routes and rules are
// never touched):
//
//	lanA (10.10.1.2) -veth- gwA (10.10.1.1) ==tunnel over veth 192.0.2.0/24== gwB (10.20.1.1) -veth- lanB (10.20.1.2)
//
// gwA and gwB each run `wirelane gateway up` from a TOML file naming the
// other as a site; a ping from host to host crosses both gateways and the
// tunnel. `gateway down` must then leave both gateways' links, addresses,
// routes and rules exactly as before, with no daemon or socket left.

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// wirelaneBin returns a wirelane binary: $WIRELANE_TEST_BIN, else one built
// from cmd/wirelane. It skips when that binary has no gateway command.
func wirelaneBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("WIRELANE_TEST_BIN")
	if bin == "" {
		bin = filepath.Join(t.TempDir(), "wirelane")
		out, err := exec.Command("go", "build", "-o", bin, "github.com/wirelane/wirelane/cmd/wirelane").CombinedOutput()
		if err != nil {
			t.Fatalf("go build cmd/wirelane: %v\n%s", err, out)
		}
	}
	out, _ := exec.Command(bin, "gateway", "--help").CombinedOutput()
	if !strings.Contains(string(out), "Usage: wirelane gateway") {
		first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
		t.Skipf("%s has no gateway command yet (cmd/wirelane/main.go must list it in commands): %s", bin, first)
	}
	return bin
}

// daemonEnv returns the environment that selects a working userspace
// daemon: the built-in one when it starts, else wireguard-go built from
// the module cache (so the gateway code is still tested).
func daemonEnv(t *testing.T, bin string) []string {
	t.Helper()
	ns := netns.New(t, "gwp")
	name := netns.Unique("gwp")
	out, err := netns.Try(ns, nil, bin, "daemon", name)
	if err == nil {
		netns.Run(t, ns, "ip", "link", "del", name)
		waitGone(t, name)
		t.Log("daemon: built-in (wirelane daemon)")
		return nil
	}
	wg := filepath.Join(t.TempDir(), "wireguard-go")
	if bout, berr := exec.Command("go", "build", "-o", wg, "golang.zx2c4.com/wireguard").CombinedOutput(); berr != nil {
		t.Fatalf("built-in daemon failed (%v: %s) and building wireguard-go failed: %v\n%s", err, out, berr, bout)
	}
	t.Logf("daemon: wireguard-go via WIRELANE_DAEMON, because the built-in daemon failed: %s", strings.TrimSpace(out))
	return []string{"WIRELANE_DAEMON=" + wg}
}

// waitGone waits for the daemon of ifname to remove its socket.
func waitGone(t *testing.T, ifname string) {
	t.Helper()
	netns.Eventually(t, 5*time.Second, "socket of "+ifname+" removed", func() error {
		if _, err := os.Stat(uapi.SocketPath(ifname)); err == nil {
			return fmt.Errorf("%s still exists", uapi.SocketPath(ifname))
		}
		return nil
	})
}

// netState is a namespace's links, addresses, routes (all tables but
// local) and rules, as sorted lines that can be compared.
func netState(t *testing.T, ns *netns.NS) string {
	t.Helper()
	var lines []string
	for _, cmd := range [][]string{
		{"ip", "-o", "link", "show"},
		{"ip", "-o", "addr", "show"},
		{"ip", "route", "show", "table", "all"},
		{"ip", "-6", "route", "show", "table", "all"},
		{"ip", "rule", "show"},
		{"ip", "-6", "rule", "show"},
	} {
		for _, l := range strings.Split(netns.Run(t, ns, cmd...), "\n") {
			l = strings.Join(strings.Fields(l), " ")
			if l == "" || strings.Contains(l, "table local") || strings.Contains(l, "valid_lft") || strings.Contains(l, "fe80::") || strings.Contains(l, "ff00::") {
				continue
			}
			// Link counters and states of veth peers change with traffic.
			if i := strings.Index(l, " qdisc"); i > 0 && cmd[2] == "link" {
				l = l[:i]
			}
			lines = append(lines, strings.Join(cmd[1:], " ")+": "+l)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// gwSide is one gateway's namespace, names and keys.
type gwSide struct {
	ns     *netns.NS
	ifname string
	priv   wgquick.Key
	tunnel string // tunnel address
	lan    string // LAN prefix behind it
	under  string // underlay address
}

func TestGatewayUpDownBetweenNamespaces(t *testing.T) {
	netns.Need(t, "ping")
	bin := wirelaneBin(t)
	env := daemonEnv(t, bin)

	gwA, gwB := netns.New(t, "gwa"), netns.New(t, "gwb")
	lanA, lanB := netns.New(t, "lna"), netns.New(t, "lnb")
	netns.Veth(t, gwA, "under", gwB, "under")
	netns.Run(t, gwA, "ip", "addr", "add", "192.0.2.1/24", "dev", "under")
	netns.Run(t, gwB, "ip", "addr", "add", "192.0.2.2/24", "dev", "under")
	for _, x := range []struct {
		gw, lan *netns.NS
		net     string
	}{{gwA, lanA, "10.10.1"}, {gwB, lanB, "10.20.1"}} {
		netns.Veth(t, x.gw, "lan", x.lan, "up0")
		netns.Run(t, x.gw, "ip", "addr", "add", x.net+".1/24", "dev", "lan")
		netns.Run(t, x.lan, "ip", "addr", "add", x.net+".2/24", "dev", "up0")
		netns.Run(t, x.lan, "ip", "route", "add", "default", "via", x.net+".1")
		netns.Run(t, x.gw, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
	}

	sides := [2]*gwSide{
		{ns: gwA, ifname: netns.Unique("gwa"), tunnel: "10.90.0.1", lan: "10.10.0.0/16", under: "192.0.2.1"},
		{ns: gwB, ifname: netns.Unique("gwb"), tunnel: "10.90.0.2", lan: "10.20.0.0/16", under: "192.0.2.2"},
	}
	dir := t.TempDir()
	files := [2]string{}
	for _, s := range sides {
		k, err := wgquick.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		s.priv = k
		if err := os.WriteFile(filepath.Join(dir, s.ifname+".key"), []byte(k.String()+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range sides {
		o := sides[1-i]
		body := fmt.Sprintf(`[interface]
name = %q
private_key_file = %q
listen_port = 51820
addresses = ["%s/24"]
mtu = 1420

[[site]]
name = "other"
public_key = %q
endpoint = "%s:51820"
networks = [%q, "%s/32"]
persistent_keepalive = 5
`, s.ifname, s.ifname+".key", s.tunnel, o.priv.PublicKey().String(), o.under, o.lan, o.tunnel)
		files[i] = filepath.Join(dir, fmt.Sprintf("site%d.toml", i))
		if err := os.WriteFile(files[i], []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		// If the test stops half way, the namespaces go (and with them
		// the interfaces and daemons); the shared socket must go too.
		t.Cleanup(func() { os.Remove(uapi.SocketPath(s.ifname)) })
	}

	before := [2]string{netState(t, gwA), netState(t, gwB)}

	// A failing post_up hook comes after every other step: up must fail
	// and undo all of them.
	failing := filepath.Join(dir, "failing.toml")
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "mtu = 1420\n", "mtu = 1420\npost_up = [\"exit 3\"]\n", 1))
	if err := os.WriteFile(failing, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := exitCode(gwA, env, bin, "gateway", "up", failing); code != 1 {
		t.Fatalf("up with a failing post_up hook exited %d, want 1", code)
	}
	waitGone(t, sides[0].ifname)
	if after := netState(t, gwA); after != before[0] {
		t.Fatalf("a failed up left changes behind\nbefore:\n%s\nafter:\n%s", before[0], after)
	}

	for i, s := range sides {
		out := netns.RunEnv(t, s.ns, env, bin, "gateway", "up", files[i])
		t.Logf("gateway up %s:\n%s", s.ifname, out)
	}
	for _, s := range sides {
		o := sides[1]
		if s == o {
			o = sides[0]
		}
		route := netns.Run(t, s.ns, "ip", "route", "show", o.lan)
		if !strings.Contains(route, "dev "+s.ifname) {
			t.Errorf("%s: no route for the other site's network %s through %s: %q", s.ifname, o.lan, s.ifname, route)
		}
	}
	// Host to host: lanA -> gwA -> tunnel -> gwB -> lanB and back. Without
	// the tunnel neither gateway has a route to the other LAN.
	netns.Eventually(t, 20*time.Second, "ping 10.20.1.2 from 10.10.1.2 through both gateways", func() error {
		_, err := netns.Try(lanA, nil, "ping", "-c", "1", "-W", "1", "10.20.1.2")
		return err
	})
	netns.Run(t, lanB, "ping", "-c", "2", "-W", "2", "10.10.1.2")
	show := netns.RunEnv(t, gwA, env, bin, "show", sides[0].ifname)
	if !strings.Contains(show, "latest handshake") || !strings.Contains(show, "10.20.0.0/16") {
		t.Errorf("show after traffic:\n%s", show)
	}

	// A goes down by its file, B by its name alone (its file is not in
	// /etc/wirelane).
	for i, s := range sides {
		arg := files[i]
		if i == 1 {
			arg = s.ifname
		}
		out := netns.RunEnv(t, s.ns, env, bin, "gateway", "down", arg)
		t.Logf("gateway down %s:\n%s", s.ifname, out)
		waitGone(t, s.ifname)
	}
	for i, s := range sides {
		if after := netState(t, s.ns); after != before[i] {
			t.Errorf("%s: the namespace differs after down\nbefore:\n%s\nafter:\n%s", s.ifname, before[i], after)
		}
		netns.Eventually(t, 5*time.Second, "no daemon left in "+s.ns.Name, func() error {
			if pids := strings.TrimSpace(netns.Run(t, nil, "ip", "netns", "pids", s.ns.Name)); pids != "" {
				return fmt.Errorf("processes still running: %s", pids)
			}
			return nil
		})
	}
	if code := exitCode(gwA, env, bin, "gateway", "down", files[0]); code != 1 {
		t.Errorf("a second down exited %d, want 1 (nothing left to remove)", code)
	}
}

// exitCode runs a command in ns and returns its exit status (-1 when it
// could not run).
func exitCode(ns *netns.NS, env []string, args ...string) int {
	_, err := netns.Try(ns, env, args...)
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}
