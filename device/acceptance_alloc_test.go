package device

// Acceptance test of the data path's allocation claim, end to end through
// two devices: in steady state neither the send pipeline (TUN read, route,
// nonce, seal, borrowed route, Bind.Send) nor the receive pipeline (receive,
// open, replay, crypto-routing, TUN write) allocates per packet or per
// batch. The in-memory network and TUN device recycle their buffers.

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestAcceptanceDataPathAllocatesNothing(t *testing.T) {
	if acceptanceRace {
		t.Skip("the race detector allocates")
	}
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "establish")
	p.send(p.tb, p.ta, ipB4, ipA4, "establish back")
	var got atomic.Int64
	p.tb.SetWriteHook(func(pkts [][]byte, off int) { got.Add(int64(len(pkts))) })
	defer p.tb.SetWriteHook(nil)
	pkt4 := ipPacket(ipA4, ipB4, make([]byte, 1200))
	pkt6 := ipPacket(ipA6, ipB6, make([]byte, 1200))
	// Packets go in chunks, each waited for, so that no queue
	// overflows and every packet takes the full path.
	run := func(n int) {
		const chunk = 256
		for sent := 0; sent < n; sent += chunk {
			start := got.Load()
			for i := 0; i < chunk; i++ {
				if i%2 == 0 {
					p.ta.Inject(pkt4)
				} else {
					p.ta.Inject(pkt6)
				}
			}
			deadline := time.Now().Add(5 * time.Second)
			for got.Load()-start < chunk && time.Now().Before(deadline) {
				runtime.Gosched()
			}
		}
	}
	run(40000) // warm the pools
	const n = 40000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := got.Load()
	run(n)
	runtime.ReadMemStats(&after)
	delivered := got.Load() - start
	if delivered < n*9/10 {
		t.Fatalf("only %d of %d packets delivered", delivered, n)
	}
	mallocs := after.Mallocs - before.Mallocs
	t.Logf("%d allocations, %d bytes for %d packets", mallocs, after.TotalAlloc-before.TotalAlloc, delivered)
	// Timers, the test's own goroutines and the runtime may allocate
	// a little; one allocation per batch would already be
	// hundreds.
	if mallocs > 100 {
		t.Fatalf("%d allocations for %d packets: the data path allocates", mallocs, delivered)
	}
}
