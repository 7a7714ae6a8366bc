package device

// Acceptance tests of handshake edge cases at the device level: a replayed
// initiation (valid MACs, old timestamp) from another address gets no
// response and moves nothing; a replayed response is ignored; a peer removed
// and added again with the same key works again.

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
)

func TestAcceptanceReplayedHandshakeMessagesIgnored(t *testing.T) {
	p := newPair(t, pairOpts{})
	var mu sync.Mutex
	var initMsg, respMsg []byte
	forger := netip.MustParseAddrPort("198.51.100.9:99")
	var toForger, respCount int
	p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
		mu.Lock()
		defer mu.Unlock()
		switch kindOf(dg.Data) {
		case "init":
			if initMsg == nil {
				initMsg = append([]byte(nil), dg.Data...)
			}
		case "resp":
			respCount++
			if respMsg == nil {
				respMsg = append([]byte(nil), dg.Data...)
			}
		}
		if dg.To == forger {
			toForger++
		}
		return conntest.Pass
	})
	p.send(p.ta, p.tb, ipA4, ipB4, "handshake")
	p.send(p.tb, p.ta, ipB4, ipA4, "back")
	peerA, peerB := peerOf(p.b, p.ka), peerOf(p.a, p.kb)
	genA, genB := peerA.routes.Borrow().Gen, peerB.routes.Borrow().Gen
	kpA, kpB := peerA.keypairs.current.Load(), peerB.keypairs.current.Load()
	mu.Lock()
	init, resp, responses := initMsg, respMsg, respCount
	mu.Unlock()
	if init == nil || resp == nil {
		t.Fatal("handshake messages not captured")
	}
	time.Sleep(30 * time.Millisecond) // past the 20 ms initiation rate limit
	p.nw.Inject(forger, p.bb.Addr(), init)
	p.nw.Inject(forger, p.ba.Addr(), resp)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if respCount != responses || toForger != 0 {
		t.Fatalf("a replayed initiation was answered: %d responses (was %d), %d datagrams to the forger", respCount, responses, toForger)
	}
	if peerA.routes.Borrow().Gen != genA || peerB.routes.Borrow().Gen != genB {
		t.Fatal("a replayed handshake message moved an endpoint")
	}
	if peerA.keypairs.current.Load() != kpA || peerB.keypairs.current.Load() != kpB {
		t.Fatal("a replayed handshake message replaced a session")
	}
	if ep, _ := peerA.routes.Endpoint(); ep.Dst != p.ba.Addr() {
		t.Fatalf("B's endpoint for A is %v", ep.Dst)
	}
}

func TestAcceptancePeerRemovedAndAddedAgain(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "first life")
	epB := p.bb.Addr()
	for i := 0; i < 3; i++ {
		must(t, p.a.Configure(&Config{Peers: []PeerConfig{{PublicKey: p.kb.PublicKey(), Remove: true}}}))
		if peerOf(p.a, p.kb) != nil {
			t.Fatal("peer not removed")
		}
		pkt := ipPacket(ipA4, ipB4, []byte("to nobody"))
		p.ta.Inject(pkt)
		p.expectNone(p.tb, 50*time.Millisecond)
		must(t, p.a.Configure(&Config{Peers: []PeerConfig{{
			PublicKey: p.kb.PublicKey(), Endpoint: &epB, AllowedIPs: prefixes("10.0.0.2/32"),
		}}}))
		// B still holds the old session: A's new peer has none and must
		// handshake again; both directions then work.
		p.send(p.ta, p.tb, ipA4, ipB4, "again from a")
		p.send(p.tb, p.ta, ipB4, ipA4, "again from b")
	}
}

// TestAcceptanceRetransmitFollowsNewEndpoint: an endpoint set through UAPI
// while a handshake is being retried takes effect for the retries at once;
// nothing more goes to the old endpoint once Set has returned.
func TestAcceptanceRetransmitFollowsNewEndpoint(t *testing.T) {
	p := newPair(t, pairOpts{fakeClock: true})
	tr := watch(p)
	old := p.bb.Addr()
	tr.setDrop(func(dg conntest.Datagram) bool { return dg.To == old })
	a := p.ba.Addr()
	p.ta.Inject(ipPacket(ipA4, ipB4, []byte("retried")))
	waitFor(t, "first initiation", func() bool { return tr.count(a, "init") == 1 })
	p.clk.Advance(RekeyTimeout + RekeyTimeoutJitterMax)
	waitFor(t, "a retransmission", func() bool { return tr.count(a, "init") == 2 })
	settle()
	// The operator points A at another address for B (nobody listens
	// there; only where the retries go matters).
	relay := netip.MustParseAddrPort("192.0.2.99:5555")
	must(t, p.a.Configure(&Config{Peers: []PeerConfig{{PublicKey: p.kb.PublicKey(), Endpoint: &relay}}}))
	sentOld := p.nw.SentTo(old)
	p.clk.Advance(RekeyTimeout + RekeyTimeoutJitterMax)
	waitFor(t, "a retransmission to the new endpoint", func() bool { return p.nw.SentTo(relay) >= 1 })
	settle()
	if n := p.nw.SentTo(old); n != sentOld {
		t.Fatalf("%d datagrams went to the old endpoint after Set returned", n-sentOld)
	}
}

// TestAcceptanceLatePacketOnPreviousSession: a datagram sealed under the
// old session and delayed past a rekey is still accepted (the previous
// session decrypts it), exactly once.
func TestAcceptanceLatePacketOnPreviousSession(t *testing.T) {
	p, _ := established(t)
	a := p.ba.Addr()
	held := false
	var mu sync.Mutex
	p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
		mu.Lock()
		defer mu.Unlock()
		if dg.From == a && kindOf(dg.Data) == "data" && !held {
			held = true
			return conntest.Hold
		}
		return conntest.Pass
	})
	late := ipPacket(ipA4, ipB4, []byte("sealed under the old session"))
	must(t, p.ta.Inject(late))
	waitFor(t, "the held datagram", func() bool { mu.Lock(); defer mu.Unlock(); return held })
	peerB, peerA := peerOf(p.a, p.kb), peerOf(p.b, p.ka)
	oldA, oldB := peerB.keypairs.current.Load(), peerA.keypairs.current.Load()
	p.clk.Advance(RekeyAfterTime + time.Second)
	settle()
	p.send(p.ta, p.tb, ipA4, ipB4, "old key, asks for a new one")
	waitFor(t, "A's new session", func() bool { return peerB.keypairs.current.Load() != oldA })
	p.send(p.ta, p.tb, ipA4, ipB4, "new key")
	waitFor(t, "B's new session", func() bool { return peerA.keypairs.current.Load() != oldB })
	if p.nw.ReleaseHeld() != 1 {
		t.Fatal("nothing was held")
	}
	p.expect(p.tb, late)
	p.expectNone(p.tb, 50*time.Millisecond)
}
