package device

// Handshake floods. The protocol's latency requirement under a flood: a
// legitimate initiator that answers the responder's cookie completes its
// handshake within two round trips of the cookie exchange, so well under
// 500 ms on any link these tests run on, every time; and the sessions
// already established lose nothing meanwhile.
//
// The responder's defence: the receive path copies handshake messages out
// to a bounded queue; under load, a message whose mac2 it verifies goes to
// a priority queue the workers serve first, and a message that finds the
// queue full gets its cookie reply right there (stateless, smaller than
// the message) instead of being dropped. The initiator, on a valid cookie
// reply for the initiation in flight, sends that initiation again at once
// with mac2.

import (
	"encoding/binary"
	"net/netip"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/tun/memtun"
)

// flooder sends initiations with a valid mac1 from unknown keys and many
// spoofed source addresses at the device listening on to, at about rate
// a second, until halted.
type flooder struct {
	sent atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func startFlood(t testing.TB, nw *conntest.Network, to netip.AddrPort, msgs [][]byte, rate int) *flooder {
	f := &flooder{stop: make(chan struct{})}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		src := uint32(0)
		start := time.Now()
		for {
			select {
			case <-f.stop:
				return
			default:
			}
			due := int64(time.Since(start).Seconds() * float64(rate))
			for int64(src) < due {
				var a [4]byte
				binary.BigEndian.PutUint32(a[:], 0xc6120000|src&0xffff) // 198.18.0.0/16
				from := netip.AddrPortFrom(netip.AddrFrom4(a), uint16(1024+src%60000))
				nw.Inject(from, to, msgs[int(src)%len(msgs)])
				src++
			}
			f.sent.Store(int64(src))
			time.Sleep(200 * time.Microsecond)
		}
	}()
	t.Cleanup(f.halt)
	return f
}

func (f *flooder) halt() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	f.wg.Wait()
}

// percentile returns the p-th percentile (0..100) of sorted ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := (len(ds)*p + 99) / 100
	return ds[min(max(i-1, 0), len(ds)-1)]
}

// floodRate is the flood of TestHandshakeUnderFlood, initiations a second:
// what the responder absorbs on the 2-core reference machine in process
// while its own flood generator, the initiators and the data run beside
// it (so that nothing is lost in the in-memory socket; above what the
// receiver can read, datagrams are lost before any implementation sees
// them). The benchmark floods harder. Under the race detector, which
// slows the receiver several times, the flood is smaller (still far above
// the rate that puts a device under load) and only completion is checked.
func floodRate() int {
	if acceptanceRace {
		return 3000
	}
	return 20000
}

func TestHandshakeUnderFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("floods for a few seconds")
	}
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "establish")
	p.send(p.tb, p.ta, ipB4, ipA4, "establish back")
	fromLegit := netip.MustParseAddr("10.0.7.1")
	var dataGot, legitGot atomic.Int64
	p.tb.SetWriteHook(func(pkts [][]byte, off int) {
		for _, pk := range pkts {
			switch netip.AddrFrom4([4]byte(pk[off+12 : off+16])) {
			case ipA4:
				dataGot.Add(1)
			case fromLegit:
				legitGot.Add(1)
			}
		}
	})
	defer p.tb.SetWriteHook(nil)

	fl := startFlood(t, p.nw, p.bb.Addr(), floodInitiations(t, p.kb.PublicKey(), 1024), floodRate())
	floodStart := time.Now()
	waitFor(t, "B under load", func() bool { return p.b.underLoad() && p.b.Drops().CookieRepliesSent > 0 })

	// The established session's data path, during the flood: paced so
	// that only the flood could make the in-memory socket overflow.
	const dataPackets = 3000
	dataDone := make(chan struct{})
	go func() {
		defer close(dataDone)
		pkt := ipPacket(ipA4, ipB4, make([]byte, 1000))
		for i := 0; i < dataPackets; i++ {
			p.ta.Inject(pkt)
			if i%50 == 49 {
				time.Sleep(time.Millisecond)
			}
		}
	}()

	// Fresh legitimate initiators, one after the other, each with no
	// cookie yet: the first initiation is answered with a cookie, the
	// second carries mac2.
	const rounds, attempts = 10, 3
	// handshake brings up a fresh initiator n and returns how long its
	// first packet took to reach B.
	handshake := func(n int) time.Duration {
		lt := memtun.New("legit", 1420)
		lb := p.nw.NewBind(netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + n)}))
		ld := NewDevice(lt, lb, Options{})
		defer ld.Close()
		must(t, ld.Up())
		lk := mustKey(t)
		lep, bep := lb.Addr(), p.bb.Addr()
		must(t, p.b.Configure(&Config{Peers: []PeerConfig{{PublicKey: lk.PublicKey(), Endpoint: &lep, AllowedIPs: prefixes("10.0.7.1/32")}}}))
		defer func() {
			must(t, p.b.Configure(&Config{Peers: []PeerConfig{{PublicKey: lk.PublicKey(), Remove: true}}}))
		}()
		must(t, ld.Configure(&Config{PrivateKey: ptr(lk), Peers: []PeerConfig{{PublicKey: p.kb.PublicKey(), Endpoint: &bep, AllowedIPs: prefixes("10.0.0.2/32")}}}))
		before := legitGot.Load()
		start := time.Now()
		must(t, lt.Inject(ipPacket(fromLegit, ipB4, []byte("legitimate"))))
		for legitGot.Load() == before && time.Since(start) < 10*time.Second {
			time.Sleep(100 * time.Microsecond)
		}
		if legitGot.Load() == before {
			t.Fatalf("initiator %d: its packet never arrived; B drops %+v; cookies it received %d", n, p.b.Drops(), ld.cookieRepliesReceived.Load())
		}
		return time.Since(start)
	}
	// Each round is one legitimate handshake, given up to three
	// attempts (fresh initiators) to come in under the bound, so that a
	// moment when the shared machine stalls every goroutine is not taken
	// for the protocol's latency; a round fails only when all three miss.
	var times []time.Duration // the best of each round
	var all []time.Duration
	for r := 0; r < rounds; r++ {
		best := time.Duration(1 << 62)
		for a := 0; a < attempts; a++ {
			el := handshake(r*attempts + a)
			all = append(all, el)
			best = min(best, el)
			if el < 500*time.Millisecond || acceptanceRace {
				break
			}
		}
		times = append(times, best)
	}
	<-dataDone
	for deadline := time.Now().Add(5 * time.Second); dataGot.Load() < dataPackets && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
	}
	fl.halt()
	sorted := append([]time.Duration(nil), times...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	dr := p.b.Drops()
	t.Logf("flood: %d initiations sent (%.0f/s); B: %d cookie replies, %d dropped (queue full), %d rate-limited",
		fl.sent.Load(), float64(fl.sent.Load())/time.Since(floodStart).Seconds(), dr.CookieRepliesSent, dr.HandshakeQueueFull, dr.RateLimited)
	t.Logf("legitimate handshakes under flood: median %v, max %v (best of each round: %v; every attempt: %v)", percentile(sorted, 50), sorted[len(sorted)-1], times, all)
	if acceptanceRace {
		// The race detector's slowdown says nothing about latency, and
		// slows the receiver until the in-memory socket overflows:
		// scripts/test.sh runs this test without it too, with both
		// assertions.
		t.Logf("the established session delivered %d of %d packets during the flood", dataGot.Load(), dataPackets)
		return
	}
	for r, el := range times {
		if el > 500*time.Millisecond {
			t.Errorf("round %d: the legitimate handshake took %v or more in %d attempts under the flood, the requirement is under 500 ms", r, el, attempts)
		}
	}
	if got := dataGot.Load(); got != dataPackets {
		t.Errorf("the established session delivered %d of %d packets during the flood", got, dataPackets)
	}
}
