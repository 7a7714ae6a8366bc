package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestFleetService: a fleet gateway hosted by the service (wirelaned
// without an interface, its real Host), beside one run by `wirelane
// gateway up`, on a one-member etcd with client TLS (the bed of
// TestFleetEtcd). The service runs the agent: the two LANs reach each
// other; GET /v1/tunnels and /metrics show the fleet's state (sites
// known and in sync, no conflict, store reachable, the agent running).
// Then live reloads of each gateway's own file, each with a new network
// and a new client certificate for etcd (a rotation: the agent moves onto
// a client of the new files in place, its record kept on its lease): the
// service's gateway through POST reload, the foreground one through
// `wirelane gateway reload` (SIGHUP to its agent); each change reaches
// the other gateway, and neither loses its fleet peer. The service
// restarts: the site stays at the other gateway (its lease is not
// revoked), and the new service runs the agent again. Down through the
// API stops the agent and revokes its lease: the other drops the site at
// once (well before the lease's TTL).
func TestFleetService(t *testing.T) {
	b := newFleetBed(t, 1)
	b.ttl = 30 // a drop within seconds is the revoke's, not the TTL's
	g1, g2 := b.addGateway(1), b.addGateway(2)
	// The service's gateway directory holds site 2's file.
	gwDir := filepath.Join(b.dir, "svc-gateways")
	os.MkdirAll(gwDir, 0o700)
	os.MkdirAll(filepath.Join(b.dir, "svc-wireguard"), 0o700)
	svcFile := filepath.Join(gwDir, g2.ifname+".toml")
	conf, err := os.ReadFile(g2.file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(svcFile, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	g2.file = svcFile
	sock := filepath.Join(b.dir, "svc.sock")
	env := []string{"WIRELANE_FIREWALL=off", "WIRELANE_FLEET_DIR=" + filepath.Join(b.dir, "status"), "WIRELANE_FLEET_CACHE_DIR=" + filepath.Join(b.dir, "cache")}
	startService := func() *netns.Proc {
		return netns.StartEnv(t, g2.ns, env, filepath.Join(binDir, "wirelaned"), "--socket", sock,
			"--wireguard-dir", filepath.Join(b.dir, "svc-wireguard"), "--wirelane-dir", gwDir)
	}
	svc := startService()
	t.Cleanup(func() {
		if t.Failed() {
			out := svc.Output()
			t.Logf("the service:\n%s", out[max(0, len(out)-6000):])
		}
	})
	c := client.New(sock)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	netns.Eventually(t, 10*time.Second, "the service answers", func() error { _, err := c.List(ctx); return err })

	b.start(g1)
	if _, err := c.Up(ctx, g2.ifname); err != nil {
		t.Fatalf("up through the service: %v", err)
	}
	netns.Eventually(t, 30*time.Second, "the LANs reach each other", func() error { return b.allReach([]int{1, 2}) })

	fleetOf := func() *service.FleetStatus {
		tu, err := c.Get(ctx, g2.ifname)
		if err != nil {
			return nil
		}
		return tu.Fleet
	}
	netns.Eventually(t, 10*time.Second, "the fleet's state in the API", func() error {
		f := fleetOf()
		switch {
		case f == nil:
			return fmt.Errorf("no fleet state")
		case !f.AgentRunning || !f.StoreReachable || !f.Published || f.Known != 2 || f.InSync != 2 || f.Conflicts != 0:
			return fmt.Errorf("%+v", *f)
		}
		return nil
	})
	m, err := c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		fmt.Sprintf(`wirelane_fleet_sites{tunnel=%q} 2`, g2.ifname),
		fmt.Sprintf(`wirelane_fleet_sites_in_sync{tunnel=%q} 2`, g2.ifname),
		fmt.Sprintf(`wirelane_fleet_conflicts{tunnel=%q} 0`, g2.ifname),
		fmt.Sprintf(`wirelane_fleet_store_reachable{tunnel=%q} 1`, g2.ifname),
		fmt.Sprintf(`wirelane_fleet_agent_running{tunnel=%q} 1`, g2.ifname),
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if out := b.show(g2); !strings.Contains(out, "site1") || !strings.Contains(out, "active") {
		t.Errorf("gateway show of the service's gateway:\n%s", out)
	}

	// Live reload of the service's gateway: a second network, and an
	// address on its interface.
	allowed := func(g *fleetGW) string { return netns.Run(t, nil, "wg", "show", g.ifname, "allowed-ips") }
	edit := func(file, old, now string) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), old) {
			t.Fatalf("%s has no %q", file, old)
		}
		if err := os.WriteFile(file, []byte(strings.Replace(string(b), old, now, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	edit(svcFile, `networks = ["10.100.2.0/24"]`, `networks = ["10.100.2.0/24", "10.102.2.0/24"]`)
	edit(svcFile, "listen_port = 51820\n", "listen_port = 51820\naddresses = [\"10.102.2.1/32\"]\n")
	cert, key := b.client("site2-rotated")
	edit(svcFile, filepath.Join(b.dir, "site2.pem"), cert)
	edit(svcFile, filepath.Join(b.dir, "site2-key.pem"), key)
	leaseRE := regexp.MustCompile(`"lease":(\d+)`)
	leaseOf := func(site string) string {
		out, err := b.etcdctl("get", b.prefix+"/sites/"+site, "-w", "json")
		if m := leaseRE.FindStringSubmatch(out); err == nil && m != nil {
			return m[1]
		}
		return "none: " + out
	}
	lease := leaseOf("site2")
	res, err := c.Reload(ctx, g2.ifname, false)
	if err != nil {
		t.Fatalf("reload through the service: %v", err)
	}
	t.Logf("reload: %v %v", res.Changes, res.Notes)
	if !strings.Contains(strings.Join(res.Notes, "\n"), "in place") {
		t.Errorf("reload notes %q: want the agent moved onto the new store in place", res.Notes)
	}
	netns.Eventually(t, 15*time.Second, "site 2's new network at site 1", func() error {
		if a := allowed(g1); !strings.Contains(a, "10.102.2.0/24") {
			return fmt.Errorf("%s", a)
		}
		return nil
	})
	if a := netns.Run(t, g2.ns, "ip", "addr", "show", "dev", g2.ifname); !strings.Contains(a, "10.102.2.1/32") {
		t.Errorf("the reloaded address is not on %s:\n%s", g2.ifname, a)
	}
	if a := allowed(g2); !strings.Contains(a, "10.100.1.0/24") {
		t.Errorf("the service's gateway lost its fleet peer in the reload:\n%s", a)
	}
	if now := leaseOf("site2"); now != lease {
		t.Errorf("site 2's record moved from lease %s to %s in the reload (the agent restarted?)", lease, now)
	}
	if f := fleetOf(); f == nil || !f.StoreReachable || !f.Published || f.InSync != 2 {
		t.Errorf("after the certificate rotation: %+v", f)
	}

	// Live reload of the foreground gateway: SIGHUP through the CLI, a
	// network and a rotated certificate again.
	edit(g1.file, `networks = ["10.100.1.0/24"]`, `networks = ["10.100.1.0/24", "10.102.1.0/24"]`)
	cert, key = b.client("site1-rotated")
	edit(g1.file, filepath.Join(b.dir, "site1.pem"), cert)
	edit(g1.file, filepath.Join(b.dir, "site1-key.pem"), key)
	lease = leaseOf("site1")
	if out, err := netns.Try(g1.ns, []string{"WIRELANE_FLEET_DIR=" + filepath.Join(b.dir, "status")}, filepath.Join(binDir, "wirelane"), "gateway", "reload", g1.file); err != nil {
		t.Fatalf("gateway reload: %v\n%s", err, out)
	}
	netns.Eventually(t, 15*time.Second, "site 1's new network at site 2", func() error {
		if a := allowed(g2); !strings.Contains(a, "10.102.1.0/24") {
			return fmt.Errorf("%s", a)
		}
		return nil
	})
	if a := allowed(g1); !strings.Contains(a, "10.100.2.0/24") {
		t.Errorf("the foreground gateway lost its fleet peer in the reload:\n%s", a)
	}
	if now := leaseOf("site1"); now != lease {
		t.Errorf("site 1's record moved from lease %s to %s in the reload (the agent restarted?)", lease, now)
	}
	if err := b.allReach([]int{1, 2}); err != nil {
		t.Error(err)
	}

	// The service restarts: its gateway stays up, its record is kept
	// (not revoked), and the new service starts the agent again.
	svc.Cmd.Process.Signal(syscall.SIGTERM)
	if _, err := svc.Wait(t, 20*time.Second); err != nil {
		t.Logf("the service: %v", err)
	}
	if !b.hasPeer(g1, 2) {
		t.Error("site 1 dropped site 2 when the service stopped (its lease was revoked)")
	}
	svc = startService()
	netns.Eventually(t, 15*time.Second, "the agent runs again", func() error {
		f := fleetOf()
		if f == nil || !f.AgentRunning || f.InSync != 2 || !f.Published {
			return fmt.Errorf("%+v", f)
		}
		return nil
	})

	// Down through the API: the agent leaves, the other drops the site
	// at once (the lease's TTL is 30 s).
	if _, err := c.Down(ctx, g2.ifname); err != nil {
		t.Fatal(err)
	}
	netns.Eventually(t, 10*time.Second, "site 2 dropped by site 1", func() error {
		if b.hasPeer(g1, 2) {
			return fmt.Errorf("still a peer")
		}
		return nil
	})
}
