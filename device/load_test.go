package device

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
)

// floodInitiations returns n distinct initiations to responder with a
// valid mac1 and no mac2, from a key the responder does not know.
func floodInitiations(t testing.TB, responder noise.PublicKey, n int) [][]byte {
	t.Helper()
	l := noise.NewLocal(mustKey(t))
	hs := noise.NewHandshake(l, responder, noise.PresharedKey{})
	gen := noise.NewCookieGenerator(responder)
	out := make([][]byte, n)
	now := time.Now()
	for i := range out {
		m, err := hs.CreateInitiation(uint32(i+1), now)
		if err != nil {
			t.Fatal(err)
		}
		msg := m.MarshalTo(nil)
		gen.AddMACs(msg, now)
		out[i] = msg
	}
	return out
}

func TestUnderLoadCookiesAndLegitimatePeer(t *testing.T) {
	p := newPair(t, pairOpts{fakeClock: true})
	tr := watch(p)
	attacker := p.nw.NewBind(netip.MustParseAddr("198.51.100.7"))
	if _, _, err := attacker.Open(0); err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	toB := conn.NewRoute(conn.Endpoint{Dst: p.bb.Addr()}, 0)
	flood := floodInitiations(t, p.kb.PublicKey(), 512)

	// A burst fills B's handshake queue: B notices the load by itself and
	// answers with cookie replies instead of doing Diffie-Hellman.
	for round := 0; round < 20 && tr.count(p.bb.Addr(), "cookie") == 0; round++ {
		for i := 0; i < len(flood); i += 128 {
			attacker.Send(flood[i:min(i+128, len(flood))], toB)
		}
		settle()
	}
	if tr.count(p.bb.Addr(), "cookie") == 0 {
		t.Fatal("no cookie replies under a flood of initiations without mac2")
	}
	if n := tr.count(p.bb.Addr(), "resp"); n != 0 {
		t.Fatalf("B answered %d flood initiations with responses", n)
	}

	// While the flood goes on, A's first initiation is answered with a
	// cookie; its retransmission carries mac2 and completes.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			attacker.Send(flood[:8], toB)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	p.b.forceUnderLoad.Store(true) // whatever the queue length at that instant
	var cookiesToA, respToA, respElsewhere atomic.Int64
	tr.mu.Lock()
	tr.drop = func(dg conntest.Datagram) bool {
		switch kind := kindOf(dg.Data); {
		case dg.To == p.ba.Addr() && kind == "cookie":
			cookiesToA.Add(1)
		case dg.To == p.ba.Addr() && kind == "resp":
			respToA.Add(1)
		case kind == "resp":
			respElsewhere.Add(1)
		}
		return false
	}
	tr.mu.Unlock()
	pkt := ipPacket(ipA4, ipB4, []byte("legitimate"))
	p.ta.Inject(pkt)
	// A flood may also crowd A's messages out of B's queue; each
	// retransmission period gives A another chance, as in real life.
	delivered := false
	for i := 0; i < 10 && !delivered; i++ {
		waitFor(t, "A's initiation", func() bool { return tr.count(p.ba.Addr(), "init") > i })
		time.Sleep(30 * time.Millisecond)
		select {
		case got := <-p.tb.Outbound():
			delivered = string(got) == string(pkt)
		default:
			p.clk.Advance(RekeyTimeout + RekeyTimeoutJitterMax)
		}
		if !delivered {
			select {
			case got := <-p.tb.Outbound():
				delivered = string(got) == string(pkt)
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	if !delivered {
		t.Fatal("the legitimate peer never completed its handshake under load")
	}
	if cookiesToA.Load() == 0 {
		t.Fatal("A completed without a cookie reply although B was under load")
	}
	// A answers the cookie at once, and the test's clock may also have
	// fired a retransmission: one response or two, all of them to A.
	if n := respToA.Load(); n < 1 || n > 2 || respElsewhere.Load() != 0 {
		t.Fatalf("B sent %d responses to A and %d elsewhere, want 1 or 2 to A only", n, respElsewhere.Load())
	}
}

func TestRateLimiterPerSource(t *testing.T) {
	r := newRateLimiter()
	now := time.Unix(1000, 0)
	a := netip.MustParseAddr("192.0.2.1")
	b := netip.MustParseAddr("2001:db8::1")
	b2 := netip.MustParseAddr("2001:db8::2") // same /64
	for i := 0; i < rateLimitBurst; i++ {
		if !r.allow(a, now) {
			t.Fatalf("message %d of the burst refused", i)
		}
	}
	if r.allow(a, now) {
		t.Fatal("message beyond the burst allowed")
	}
	if !r.allow(b, now) {
		t.Fatal("another source was limited")
	}
	for i := 1; i < rateLimitBurst; i++ {
		r.allow(b2, now)
	}
	if r.allow(b2, now) {
		t.Fatal("IPv6 sources in one /64 should share a bucket")
	}
	if !r.allow(a, now.Add(rateLimitCost)) {
		t.Fatal("bucket did not refill")
	}
	if r.allow(a, now.Add(rateLimitCost)) {
		t.Fatal("refill gave more than one token")
	}
	// Idle buckets are forgotten.
	r.allow(a, now.Add(time.Hour))
	r.mu.Lock()
	n := len(r.buckets)
	r.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d buckets kept, want 1", n)
	}
}
