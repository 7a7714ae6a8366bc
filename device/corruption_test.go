package device

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
)

// TestCorruptedDatagramsCountedNeverDelivered flips a byte in about 1% of
// the transport messages on the wire: every corrupted one is dropped and
// counted (Drops.Unauthenticated), and every packet written to the TUN
// device is one that was sent, byte for byte.
func TestCorruptedDatagramsCountedNeverDelivered(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "establish")
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(3, 4))
	var corrupted atomic.Int64
	p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
		if noise.MessageType(dg.Data) != noise.MessageTransportType || len(dg.Data) <= noise.MessageTransportOverhead {
			return conntest.Pass
		}
		mu.Lock()
		hit, at := rng.IntN(100) == 0, noise.MessageTransportHeaderSize+rng.IntN(len(dg.Data)-noise.MessageTransportHeaderSize)
		mu.Unlock()
		if hit {
			dg.Data[at] ^= 0x80 // after the header: the index still finds the session
			corrupted.Add(1)
		}
		return conntest.Pass
	})
	sent := map[string]bool{}
	var pkts [][]byte
	for i := 0; i < 3000; i++ {
		pkt := ipPacket(ipA4, ipB4, []byte(fmt.Sprintf("packet %d %s", i, bytes.Repeat([]byte{'x'}, i%900))))
		sent[string(pkt)] = true
		pkts = append(pkts, pkt)
	}
	before := p.b.Drops()
	for i, pkt := range pkts {
		must(t, p.ta.Inject(pkt))
		if i%64 == 63 {
			settle()
		}
	}
	last := ipPacket(ipA4, ipB4, []byte("last"))
	p.nw.SetHook(nil)
	settle()
	must(t, p.ta.Inject(last))
	delivered := 0
	for {
		got := <-p.tb.Outbound()
		if bytes.Equal(got, last) {
			break
		}
		if !sent[string(got)] {
			t.Fatalf("a packet that was never sent reached the TUN device: %x", got[:min(len(got), 40)])
		}
		delivered++
	}
	dropped := p.b.Drops().Unauthenticated - before.Unauthenticated
	t.Logf("%d corrupted on the wire, %d counted unauthenticated, %d of %d delivered", corrupted.Load(), dropped, delivered, len(pkts))
	if corrupted.Load() == 0 || dropped != uint64(corrupted.Load()) {
		t.Fatalf("%d datagrams corrupted, %d counted as unauthenticated", corrupted.Load(), dropped)
	}
	if delivered+int(corrupted.Load()) != len(pkts) {
		t.Errorf("%d delivered + %d corrupted != %d sent", delivered, corrupted.Load(), len(pkts))
	}
}
