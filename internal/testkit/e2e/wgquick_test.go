package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestWGQuickUpDown brings two tunnels up with the real wg-quick, using the
// daemon as WG_QUICK_USERSPACE_IMPLEMENTATION, between namespaces joined by
// a veth pair:
//
//	ns1 (A, 10.9.0.1, AllowedIPs 0.0.0.0/0 ::/0) -veth- ns2 (B, 10.9.0.2)
//
// A routes everything into the tunnel, so wg-quick marks A's UDP packets
// with fwmark 51820 and exempts them by policy routing: the ping only works
// if the daemon applies SO_MARK. wg-quick down must then end both daemons.
func TestWGQuickUpDown(t *testing.T) {
	im := pairImpl(t, "wg-quick", "bash")
	ns1, ns2 := netns.New(t, "wl1n"), netns.New(t, "wl2n")
	netns.Veth(t, ns1, "veth1", ns2, "veth2")
	netns.Run(t, ns1, "ip", "addr", "add", "10.9.0.1/24", "dev", "veth1")
	netns.Run(t, ns2, "ip", "addr", "add", "10.9.0.2/24", "dev", "veth2")

	a := newSide(t, im, ns1, ns1, 10001, "192.168.241.1", "fd00::1")
	b := newSide(t, im, ns2, ns2, 10002, "192.168.241.2", "fd00::2")
	dir := t.TempDir()
	write := func(s, o *side, allowed, endpoint string) string {
		file := filepath.Join(dir, s.ifname+".conf")
		conf := fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = %d\nAddress = %s/24, %s/64\n\n"+
			"[Peer]\nPublicKey = %s\nAllowedIPs = %s\nEndpoint = %s\n", s.key, s.port, s.v4, s.v6, o.pub(), allowed, endpoint)
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		return file
	}
	confA := write(a, b, "0.0.0.0/0, ::/0", "10.9.0.2:10002")
	confB := write(b, a, a.v4+"/32, "+a.v6+"/128", "10.9.0.1:10001")
	env := []string{"WG_QUICK_USERSPACE_IMPLEMENTATION=" + im.path()}

	for _, x := range []struct {
		s    *side
		conf string
	}{{b, confB}, {a, confA}} {
		s := x.s
		// Stops the daemon even if wg-quick down never runs.
		t.Cleanup(func() { stopDaemon(t, s.home, s.ifname) })
		out := netns.RunEnv(t, s.ns, env, "wg-quick", "up", x.conf)
		t.Logf("wg-quick up %s:\n%s", s.ifname, out)
	}
	if got := strings.TrimSpace(a.wg(t, "show", a.ifname, "fwmark")); got != "0xca6c" {
		t.Fatalf("wg-quick set fwmark %q on A, want 0xca6c (51820)", got)
	}
	a.ping(t, b.v4)
	a.ping(t, b.v6)
	b.ping(t, a.v4)
	if mtu := a.run(t, "cat", "/sys/class/net/"+a.ifname+"/mtu"); strings.TrimSpace(mtu) != "1420" {
		t.Errorf("A's MTU %s, want 1420 (veth 1500 - 80)", mtu)
	}

	for _, x := range []struct {
		s    *side
		conf string
	}{{a, confA}, {b, confB}} {
		pid := daemonPid(x.s.home, x.s.ifname)
		if pid == 0 {
			t.Fatalf("no daemon for %s before wg-quick down", x.s.ifname)
		}
		netns.RunEnv(t, x.s.ns, env, "wg-quick", "down", x.conf)
		if !waitGone(pid, 5*time.Second) {
			t.Fatalf("daemon for %s still running 5s after wg-quick down", x.s.ifname)
		}
		if _, err := os.Stat(uapi.SocketPath(x.s.ifname)); err == nil {
			t.Errorf("socket of %s left behind after wg-quick down", x.s.ifname)
		}
	}
	// wg-quick down removed A's policy routing: the veth works directly.
	netns.Run(t, ns1, "ping", "-c", "1", "-W", "2", "10.9.0.2")
}
