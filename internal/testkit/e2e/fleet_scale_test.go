package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/tunnel/fleet"
	"github.com/wirelane/wirelane/internal/tunnel/fleet/etcdstore"
	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// TestFleetScale: SITES simulated site records (default 200; the
// scripts/fleet-scale.sh run writes 1,000) are written into etcd, and one
// real gateway converges on all of them. It logs the time to converge, the
// memory per site of the agent and of the daemon, and the time to apply
// one change among them (docs/gateway.md has the figures). Nothing is
// asserted about speed; the test asserts that every record becomes a peer
// with its network, and that the change is applied.
func TestFleetScale(t *testing.T) {
	sites := 200
	if s := os.Getenv("FLEET_SCALE_SITES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 30000 {
			t.Fatalf("FLEET_SCALE_SITES=%q: want 1 to 30000", s)
		}
		sites = n
	}
	b := newFleetBed(t, 1)
	b.ttl = 10
	g := b.addGateway(1)
	b.start(g)
	netns.Eventually(t, 20*time.Second, "the gateway published", func() error {
		if !b.status(g).Published {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	agentRSS0, daemonRSS0 := rssKB(g.proc.Cmd.Process.Pid), rssKB(daemonPid(g.ns, g.ifname))

	out := b.writer(t, "fill", sites)
	t.Logf("%s", strings.TrimSpace(out))
	start := time.Unix(0, lastInt(t, out))
	netns.Eventually(t, 120*time.Second, "every simulated site a peer", func() error {
		n := peerCount(g.ifname)
		if n != sites {
			return fmt.Errorf("%d of %d peers", n, sites)
		}
		if st := b.status(g); st.InSync != sites+1 {
			return fmt.Errorf("%d of %d in sync", st.InSync, sites+1)
		}
		return nil
	})
	converged := time.Since(start)
	time.Sleep(500 * time.Millisecond)
	agentRSS1, daemonRSS1 := rssKB(g.proc.Cmd.Process.Pid), rssKB(daemonPid(g.ns, g.ifname))
	routes := strings.Count(netns.Run(t, g.ns, "ip", "route", "show", "dev", g.ifname), "\n")
	if routes < sites {
		t.Errorf("%d routes through %s, want %d", routes, g.ifname, sites)
	}

	// One change among them: a site's network moves.
	out = b.writer(t, "change", sites)
	putAt := lastInt(t, out)
	var applied time.Time
	netns.Eventually(t, 30*time.Second, "the change applied", func() error {
		if !strings.Contains(netns.Run(t, nil, "wg", "show", g.ifname, "allowed-ips"), "10.127.0.0/24") {
			return fmt.Errorf("not yet")
		}
		applied = time.Now()
		return nil
	})
	g.proc.Cmd.Process.Kill()
	<-g.proc.Exited()
	agentLog := g.proc.Output()
	for _, l := range strings.Split(agentLog, "\n") {
		if strings.Contains(l, "applied the fleet") {
			t.Log(l)
		}
	}
	g.proc = nil
	perSite := func(a, b int) string { return fmt.Sprintf("%.2f KB", float64(b-a)/float64(sites)) }
	t.Logf("%d sites: converged in %v; one change applied in %v; memory per site: agent %s (RSS %d -> %d KB), daemon %s (RSS %d -> %d KB)",
		sites, converged.Round(time.Millisecond), applied.Sub(time.Unix(0, putAt)).Round(time.Millisecond),
		perSite(agentRSS0, agentRSS1), agentRSS0, agentRSS1, perSite(daemonRSS0, daemonRSS1), daemonRSS0, daemonRSS1)
}

// writer runs TestFleetWriterProcess in nsW (the test process cannot
// reach the members from the root namespace) and returns its output.
func (b *fleetBed) writer(t *testing.T, op string, sites int) string {
	t.Helper()
	cert, key := filepath.Join(b.dir, "health.pem"), filepath.Join(b.dir, "health-key.pem")
	env := []string{"FLEET_WRITER=" + op, "FLEET_WRITER_SITES=" + strconv.Itoa(sites), "FLEET_WRITER_PREFIX=" + b.prefix,
		"FLEET_WRITER_ENDPOINTS=" + strings.Join(b.endpoints(), ","), "FLEET_WRITER_CA=" + b.ca, "FLEET_WRITER_CERT=" + cert, "FLEET_WRITER_KEY=" + key}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out, err := netns.Try(b.nsW, env, exe, "-test.run=^TestFleetWriterProcess$", "-test.count=1")
	if err != nil {
		t.Fatalf("writer: %v\n%s", err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "writer:") {
			return l
		}
	}
	t.Fatalf("writer said nothing:\n%s", out)
	return ""
}

// TestFleetWriterProcess is not a test: TestFleetScale runs the test
// binary in the etcd namespace with FLEET_WRITER set, and this writes the
// simulated records there. Site i gets 10.(128+i/256).(i%256).0/24 and an
// endpoint in 192.0.2.0/24 (nothing answers there: no handshake is made).
func TestFleetWriterProcess(t *testing.T) {
	op := os.Getenv("FLEET_WRITER")
	if op == "" {
		t.Skip("a helper process of TestFleetScale")
	}
	sites, _ := strconv.Atoi(os.Getenv("FLEET_WRITER_SITES"))
	prefix := os.Getenv("FLEET_WRITER_PREFIX")
	s, err := etcdstore.New(etcdstore.Config{Endpoints: strings.Split(os.Getenv("FLEET_WRITER_ENDPOINTS"), ","),
		CAFile: os.Getenv("FLEET_WRITER_CA"), CertFile: os.Getenv("FLEET_WRITER_CERT"), KeyFile: os.Getenv("FLEET_WRITER_KEY")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rec := func(i int, network string) (string, []byte) {
		// A key made from i, so that "change" finds the same one.
		var k wgquick.Key
		copy(k[:], fmt.Sprintf("simulated-site-%016d", i))
		r := fleet.Record{Name: fmt.Sprintf("sim%05d", i), PublicKey: k.PublicKey(), Endpoints: []string{fmt.Sprintf("192.0.2.%d:%d", 1+i%250, 20000+i)},
			Networks: []netip.Prefix{netip.MustParsePrefix(network)}}
		return prefix + fleet.SitesKey + r.Name, r.Encode()
	}
	net := func(i int) string { return fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256) }
	switch op {
	case "fill":
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, sites)
		next := make(chan int)
		for w := 0; w < 16; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					k, v := rec(i, net(i))
					if err := s.Put(ctx, k, v, 0, store.Always); err != nil {
						errs <- err
					}
				}
			}()
		}
		for i := 0; i < sites; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		fmt.Printf("writer: %d records written in %v, from %d\n", sites, time.Since(start).Round(time.Millisecond), start.UnixNano())
	case "change":
		k, v := rec(sites/2, "10.127.0.0/24")
		at := time.Now()
		if err := s.Put(ctx, k, v, 0, store.Always); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("writer: moved site %d's network at %d\n", sites/2, at.UnixNano())
	}
}

// lastInt is the number that ends the writer's line.
func lastInt(t *testing.T, line string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(line[strings.LastIndex(line, " ")+1:]), 10, 64)
	if err != nil {
		t.Fatalf("writer said %q", line)
	}
	return n
}

// peerCount is how many peers the interface has.
func peerCount(ifname string) int {
	out, err := netns.Try(nil, nil, "wg", "show", ifname, "peers")
	if err != nil {
		return -1
	}
	return len(strings.Fields(out))
}

// rssKB is a process's resident set (VmRSS) in KB, 0 when unknown.
func rssKB(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			n, _ := strconv.Atoi(strings.Fields(l)[1])
			return n
		}
	}
	return 0
}
