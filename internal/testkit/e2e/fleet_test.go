package e2e

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestFleetEtcd: five gateways on a real three-member etcd cluster (client
// TLS) find each other and every LAN reaches every other; a sixth joins
// with only its own file; one SIGKILLed is removed after its lease; one
// member killed changes nothing; with every member stopped traffic keeps
// flowing, and a change made after the store returns converges, without
// the other sites' sessions restarting.
func TestFleetEtcd(t *testing.T) {
	b := newFleetBed(t, 3)
	for n := 1; n <= 6; n++ {
		b.addGateway(n)
	}
	five := []int{1, 2, 3, 4, 5}
	start := time.Now()
	for _, n := range five {
		b.start(b.gws[n])
	}
	netns.Eventually(t, 30*time.Second, "five sites in a full mesh", func() error { return b.allReach(five) })
	t.Logf("five gateways: every LAN reaches every other %v after start", time.Since(start).Round(time.Millisecond))

	// A sixth gateway, started with only its own file.
	start = time.Now()
	b.start(b.gws[6])
	all := []int{1, 2, 3, 4, 5, 6}
	netns.Eventually(t, 15*time.Second, "the sixth site reachable from all", func() error { return b.allReach(all) })
	t.Logf("the sixth gateway is reachable from all %v after start", time.Since(start).Round(time.Millisecond))
	if out := b.show(b.gws[1]); !strings.Contains(out, "6 known, 6 in sync, 0 conflicts") {
		t.Errorf("gateway show:\n%s", out)
	}

	// SIGKILL of gateway 5's agent: the others drop it after its lease.
	b.kill(b.gws[5])
	killed := time.Now()
	netns.Eventually(t, time.Duration(b.ttl)*time.Second+10*time.Second, "site 5 removed everywhere", func() error {
		for _, n := range []int{1, 2, 3, 4, 6} {
			if b.hasPeer(b.gws[n], 5) {
				return fmt.Errorf("gateway %d still has site 5", n)
			}
		}
		return nil
	})
	t.Logf("site 5 removed from every gateway %v after SIGKILL (lease TTL %ds)", time.Since(killed).Round(time.Millisecond), b.ttl)
	live := []int{1, 2, 3, 4, 6}
	if err := b.allReach(live); err != nil {
		t.Fatal(err)
	}

	// A bad record and a conflicting one: refused, reported, ignored.
	if out, err := b.etcdctl("put", b.prefix+"/sites/junk", "{not json"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := b.etcdctl("put", b.prefix+"/sites/thief", `{"v":1,"name":"thief","public_key":"`+newKey(t).PublicKey().String()+`","networks":["10.100.2.0/25"]}`); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	netns.Eventually(t, 10*time.Second, "the bad and the conflicting record reported", func() error {
		st := b.status(b.gws[1])
		if st.Conflicts != 2 {
			return fmt.Errorf("%d conflicts: %+v", st.Conflicts, st.Sites)
		}
		return nil
	})
	out := b.show(b.gws[1])
	if !strings.Contains(out, "bad record") || !strings.Contains(out, "overlaps 10.100.2.0/24 of site site2") {
		t.Errorf("gateway show does not report the refused records:\n%s", out)
	}
	if err := b.allReach(live); err != nil {
		t.Fatalf("after the conflicting record: %v", err)
	}
	b.etcdctl("del", b.prefix+"/sites/junk")
	b.etcdctl("del", b.prefix+"/sites/thief")

	// Handshakes so far: they must survive everything below.
	hs := map[int]string{}
	for _, n := range []int{2, 3, 4, 6} {
		hs[n] = peerField(t, b.gws[1].ifname, "latest-handshakes", b.gws[n].key)
	}

	// One member killed: nothing changes (three leases' TTLs later).
	b.killMember(b.member[0])
	time.Sleep(3 * time.Duration(b.ttl) * time.Second)
	for _, n := range live {
		st := b.status(b.gws[n])
		if !st.StoreReachable || !st.Published || st.Known != 5 || st.InSync != 5 {
			t.Errorf("gateway %d with one member down: reachable %v published %v known %d in sync %d (%s)", n, st.StoreReachable, st.Published, st.Known, st.InSync, st.StoreError)
		}
	}
	if err := b.allReach(live); err != nil {
		t.Fatalf("with one member down: %v", err)
	}

	// Every member stopped: the gateways keep their peers (fail static).
	b.killMember(b.member[1])
	b.killMember(b.member[2])
	netns.Eventually(t, 15*time.Second, "the gateways see the store gone", func() error {
		for _, n := range live {
			if b.status(b.gws[n]).StoreReachable {
				return fmt.Errorf("gateway %d still says reachable", n)
			}
		}
		return nil
	})
	time.Sleep(2 * time.Duration(b.ttl) * time.Second)
	if err := b.allReach(live); err != nil {
		t.Fatalf("with the store down: %v", err)
	}
	if out := b.show(b.gws[1]); !strings.Contains(out, "UNREACHABLE") {
		t.Errorf("gateway show does not say the store is unreachable:\n%s", out)
	}

	// The store returns; a change made then (site 5's agent restarted, it
	// takes over its running gateway) converges.
	for _, m := range b.member {
		b.startMember(m)
	}
	b.eventuallyHealthy(30 * time.Second)
	restarted := time.Now()
	b.start(b.gws[5])
	netns.Eventually(t, 20*time.Second, "site 5 back after the store returned", func() error { return b.allReach(all) })
	t.Logf("after the store returned, site 5 rejoined in %v", time.Since(restarted).Round(time.Millisecond))
	for n, before := range hs {
		if got := peerField(t, b.gws[1].ifname, "latest-handshakes", b.gws[n].key); got != before {
			t.Errorf("site %d's session at gateway 1 restarted (handshake %s -> %s): the resync flapped its peer", n, before, got)
		}
	}
	// A clean stop leaves the fleet at once (the lease is revoked).
	b.gws[6].proc.Cmd.Process.Signal(syscall.SIGTERM)
	if out, err := b.gws[6].proc.Wait(t, 15*time.Second); err != nil {
		t.Errorf("gateway 6 after SIGTERM: %v\n%s", err, out)
	}
	netns.Eventually(t, 5*time.Second, "site 6 gone after a clean stop", func() error {
		if b.hasPeer(b.gws[1], 6) {
			return fmt.Errorf("gateway 1 still has site 6")
		}
		return nil
	})
	// A gateway taken down under its agent: the agent leaves the fleet.
	if out, err := cli(b.gws[4].ns, "gateway", "down", b.gws[4].file); err != nil {
		t.Fatalf("gateway down under the agent: %v\n%s", err, out)
	}
	if out, err := b.gws[4].proc.Wait(t, 15*time.Second); err == nil || !strings.Contains(out, "no longer up; leaving the fleet") {
		t.Errorf("the agent of a gateway taken down: %v\n%s", err, out)
	}
	netns.Eventually(t, 5*time.Second, "site 4 gone after its gateway went down", func() error {
		if b.hasPeer(b.gws[1], 4) {
			return fmt.Errorf("gateway 1 still has site 4")
		}
		return nil
	})
}

// TestFleetLocations: sites 1 and 2 in location "a", 3 and 4 in "b" (1
// and 3, the oldest, lead them): a member's only peer is its leader, the
// leaders peer with each other, and every LAN still reaches every other,
// through two forwarding leaders for 2 <-> 4.
func TestFleetLocations(t *testing.T) {
	b := newFleetBed(t, 1)
	b.location = map[int]string{1: "a", 2: "a", 3: "b", 4: "b"}
	for n := 1; n <= 4; n++ {
		b.addGateway(n)
	}
	for _, n := range []int{1, 3} { // the leaders: published first
		b.start(b.gws[n])
		netns.Eventually(t, 20*time.Second, fmt.Sprintf("site %d published", n), func() error {
			if !b.status(b.gws[n]).Published {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	b.start(b.gws[2])
	b.start(b.gws[4])
	all := []int{1, 2, 3, 4}
	netns.Eventually(t, 30*time.Second, "every LAN reaches every other through the leaders", func() error { return b.allReach(all) })
	for member, leader := range map[int]int{2: 1, 4: 3} {
		if n := peerCount(b.gws[member].ifname); n != 1 || !b.hasPeer(b.gws[member], leader) {
			t.Errorf("site %d has %d peers, want only its leader %d", member, n, leader)
		}
	}
	if !b.hasPeer(b.gws[1], 3) || !b.hasPeer(b.gws[1], 2) || b.hasPeer(b.gws[1], 4) {
		t.Errorf("leader 1's peers: want 2 and 3, not 4:\n%s", netns.Run(t, nil, "wg", "show", b.gws[1].ifname, "allowed-ips"))
	}
	if out := b.show(b.gws[2]); !strings.Contains(out, "reached through site1") {
		t.Errorf("gateway show of a member does not say who carries the other location:\n%s", out)
	}
}
