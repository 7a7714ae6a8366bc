package device

// Acceptance tests of timer bounds and queue limits the other timer tests
// leave open: the retransmission jitter stays inside
// [RekeyTimeout, RekeyTimeout+RekeyTimeoutJitterMax) and is really random;
// the initiator's rekey-on-receive does not fire before its age; packets
// for a peer without a session are queued up to MaxStagedPackets, newest
// kept; steady traffic from an unchanged address publishes no route; a
// persistent keepalive configured while down fires on Up.

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/tun/memtun"
)

// pendingDelays returns, for every armed timer of clk, how far in the
// future it is due.
func pendingDelays(clk *fakeClock) []time.Duration {
	clk.mu.Lock()
	defer clk.mu.Unlock()
	var out []time.Duration
	for _, t := range clk.timers {
		if t.active {
			out = append(out, t.when.Sub(clk.now))
		}
	}
	return out
}

// retransmitDelay returns the due time of the one armed timer in the
// retransmission range (RekeyTimeout plus jitter), failing when there is
// not exactly one.
func retransmitDelay(t *testing.T, clk *fakeClock) time.Duration {
	t.Helper()
	var found []time.Duration
	for _, d := range pendingDelays(clk) {
		if d >= RekeyTimeout-time.Second && d < RekeyTimeout+time.Second {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("armed timers near RekeyTimeout: %v (all: %v)", found, pendingDelays(clk))
	}
	return found[0]
}

func TestAcceptanceRetransmitJitterBounds(t *testing.T) {
	p := newPair(t, pairOpts{fakeClock: true})
	tr := watch(p)
	tr.setDrop(func(conntest.Datagram) bool { return true }) // B never answers
	a := p.ba.Addr()
	p.ta.Inject(ipPacket(ipA4, ipB4, []byte("lost")))
	waitFor(t, "first initiation", func() bool { return tr.count(a, "init") == 1 })
	settle()
	seen := map[time.Duration]bool{}
	for i := 1; i <= MaxTimerHandshakes; i++ {
		d := retransmitDelay(t, p.clk)
		if d < RekeyTimeout || d >= RekeyTimeout+RekeyTimeoutJitterMax {
			t.Fatalf("retransmission %d armed %v ahead, outside [%v, %v)", i, d, RekeyTimeout, RekeyTimeout+RekeyTimeoutJitterMax)
		}
		seen[d] = true
		// Not a moment early...
		p.clk.Advance(d - time.Millisecond)
		settle()
		if got := tr.count(a, "init"); got != i {
			t.Fatalf("retransmission %d came %v early: %d initiations", i, time.Millisecond, got)
		}
		// ...and right on time.
		p.clk.Advance(time.Millisecond)
		waitFor(t, fmt.Sprintf("retransmission %d", i), func() bool { return tr.count(a, "init") == i+1 })
		settle()
	}
	if len(seen) < MaxTimerHandshakes/2 {
		t.Fatalf("only %d distinct delays among %d retransmissions: no real jitter", len(seen), MaxTimerHandshakes)
	}
}

func TestAcceptanceRekeyOnReceiveNotBeforeAge(t *testing.T) {
	p, tr := established(t)
	a := p.ba.Addr()
	p.clk.Advance(RekeyOnReceiveAge - 2*time.Second)
	settle()
	n := tr.count(a, "init")
	p.send(p.tb, p.ta, ipB4, ipA4, "data before the rekey-on-receive age")
	settle()
	if got := tr.count(a, "init"); got != n {
		t.Fatalf("A started a handshake on receive %v before RekeyOnReceiveAge", 2*time.Second)
	}
	p.clk.Advance(3 * time.Second)
	settle()
	n = tr.count(a, "init")
	p.send(p.tb, p.ta, ipB4, ipA4, "data past the age")
	waitFor(t, "rekey on receive", func() bool { return tr.count(a, "init") == n+1 })
	// Only once per session, however much more arrives.
	for i := 0; i < 5; i++ {
		p.send(p.tb, p.ta, ipB4, ipA4, fmt.Sprintf("more data %d", i))
	}
	settle()
	if got := tr.count(a, "init"); got != n+1 {
		t.Fatalf("%d initiations on receive, want one", got-n)
	}
}

func TestAcceptanceStagedQueueBoundedNewestKept(t *testing.T) {
	p := newPair(t, pairOpts{fakeClock: true})
	tr := watch(p)
	tr.setDrop(func(dg conntest.Datagram) bool { return kindOf(dg.Data) == "init" })
	a := p.ba.Addr()
	const total = MaxStagedPackets + 200
	var pkts [][]byte
	for i := 0; i < total; i++ {
		pkts = append(pkts, ipPacket(ipA4, ipB4, []byte(fmt.Sprintf("staged %d", i))))
	}
	for _, pk := range pkts {
		must(t, p.ta.Inject(pk))
	}
	peerB := peerOf(p.a, p.kb)
	staged := func() int {
		peerB.stageMu.Lock()
		defer peerB.stageMu.Unlock()
		return len(peerB.staged)
	}
	waitFor(t, "packets staged", func() bool { return staged() == MaxStagedPackets })
	settle()
	if n := staged(); n != MaxStagedPackets {
		t.Fatalf("%d packets staged, want the bound %d", n, MaxStagedPackets)
	}
	// The initiation goes from its own goroutine (Diffie-Hellman first):
	// wait for it rather than for a fixed time.
	waitFor(t, "a handshake started for the staged packets", func() bool { return tr.count(a, "init") > 0 })
	// Let the retransmission through: the session flushes the queue.
	tr.setDrop(nil)
	p.clk.Advance(RekeyTimeout + RekeyTimeoutJitterMax)
	want := map[string]bool{}
	for _, pk := range pkts[total-MaxStagedPackets:] {
		want[string(pk)] = true
	}
	old := map[string]bool{}
	for _, pk := range pkts[:total-MaxStagedPackets] {
		old[string(pk)] = true
	}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case got := <-p.tb.Outbound():
			if old[string(got)] {
				t.Fatalf("an old packet beyond the bound was kept: %q", got[28:])
			}
			delete(want, string(got))
		case <-deadline:
			t.Fatalf("%d of the newest %d staged packets never arrived", len(want), MaxStagedPackets)
		}
	}
	p.expectNone(p.tb, 50*time.Millisecond)
}

func TestAcceptanceSteadyTrafficPublishesNoRoute(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "a")
	p.send(p.tb, p.ta, ipB4, ipA4, "b")
	peerB, peerA := peerOf(p.a, p.kb), peerOf(p.b, p.ka)
	genB, genA := peerB.routes.Borrow().Gen, peerA.routes.Borrow().Gen
	for i := 0; i < 300; i++ {
		p.ta.Inject(ipPacket(ipA4, ipB4, []byte{byte(i)}))
		p.tb.Inject(ipPacket(ipB4, ipA4, []byte{byte(i)}))
	}
	p.send(p.ta, p.tb, ipA4, ipB4, "last a")
	p.send(p.tb, p.ta, ipB4, ipA4, "last b")
	if g := peerB.routes.Borrow().Gen; g != genB {
		t.Fatalf("A's route to B went from generation %d to %d with nothing changed", genB, g)
	}
	if g := peerA.routes.Borrow().Gen; g != genA {
		t.Fatalf("B's route to A went from generation %d to %d with nothing changed", genA, g)
	}
}

// TestAcceptancePersistentKeepaliveOnUp: a peer configured with a
// persistent keepalive while the device is down is contacted as soon as
// the device comes up (a handshake, since there is no session yet).
func TestAcceptancePersistentKeepaliveOnUp(t *testing.T) {
	nw := conntest.NewNetwork()
	b := nw.NewBind(netip.MustParseAddr("192.0.2.1"))
	d := NewDevice(memtun.New("ka", 1420), b, Options{})
	t.Cleanup(d.Close)
	dst := netip.MustParseAddrPort("192.0.2.2:51820")
	must(t, d.Configure(&Config{PrivateKey: ptr(mustKey(t)), Peers: []PeerConfig{{
		PublicKey: mustKey(t).PublicKey(), Endpoint: &dst, PersistentKeepalive: ptr(uint16(25)),
	}}}))
	time.Sleep(20 * time.Millisecond)
	if n := nw.SentTo(dst); n != 0 {
		t.Fatalf("%d datagrams sent while down", n)
	}
	must(t, d.Up())
	waitFor(t, "a datagram to the peer after Up", func() bool { return nw.SentTo(dst) >= 1 })
}
