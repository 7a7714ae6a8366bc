package device

// Tests of the receive path's first stage under hostile input: every
// datagram is classified where it landed (type, size, receiver index)
// before it gets a buffer of its own, and the buffers for datagrams larger
// than the MTU come from a bounded budget, never from new allocations.

import (
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
)

// feedReceive runs one extra receive goroutine on d whose socket returns
// warm and then batches full batches of datagrams made by fill (which
// writes datagram i of the batch into buf and returns its length), then
// reports closed. It returns the bytes allocated during the last batches
// (after the goroutine's own landing buffers and the warm-up).
func feedReceive(d *Device, warm, batches int, fill func(i int, buf []byte) int) uint64 {
	from := conn.Endpoint{Dst: netip.MustParseAddrPort("198.51.100.77:4444")}
	calls := 0
	var m0, m1 runtime.MemStats
	fn := func(bufs [][]byte, sizes []int, eps []conn.Endpoint, _ []int64) (int, error) {
		if calls == warm {
			runtime.ReadMemStats(&m0)
		}
		if calls == warm+batches {
			runtime.ReadMemStats(&m1)
			return 0, net.ErrClosed
		}
		calls++
		for i := range bufs {
			sizes[i] = fill(i, bufs[i])
			eps[i] = from
		}
		return len(bufs), nil
	}
	d.recvWG.Add(1)
	d.runReceive(fn)
	return m1.TotalAlloc - m0.TotalAlloc
}

// junkDatagram writes the i-th of a mix of 1472-byte datagrams no peer
// sent: transport messages naming unknown indices, unknown types, and
// handshake types of the wrong size.
func junkDatagram(i int, buf []byte) int {
	const size = 1472
	clear(buf[:size])
	switch i % 4 {
	case 0, 1:
		buf[0] = byte(noise.MessageTransportType)
		binary.LittleEndian.PutUint32(buf[4:], uint32(0xdead0000+i))
	case 2:
		buf[0] = 9
	case 3:
		buf[0] = byte(noise.MessageInitiationType)
	}
	return size
}

// TestJunkFloodTakesNoBuffers is the attack of issue #21: datagrams larger
// than the MTU-sized packets, of no session, used to be moved into a 64 KiB
// packet before their type and index were looked at; once the short free
// list was empty each was a new allocation (tens of KB per datagram here).
// Now they are dropped, counted, where they landed.
func TestJunkFloodTakesNoBuffers(t *testing.T) {
	if acceptanceRace {
		t.Skip("the race detector allocates")
	}
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "establish")
	const batches = 200
	drops := p.b.Drops()
	alloc := feedReceive(p.b, 10, batches, junkDatagram)
	n := uint64((10 + batches) * conn.IdealBatchSize)
	perDatagram := float64(alloc) / float64(batches*conn.IdealBatchSize)
	t.Logf("%d junk datagrams: %.2f bytes allocated each", n, perDatagram)
	if perDatagram > 16 {
		t.Errorf("%.1f bytes allocated per junk datagram: the flood is given buffers", perDatagram)
	}
	p.b.pool.mu.Lock()
	made := p.b.pool.made
	p.b.pool.mu.Unlock()
	if made != 0 {
		t.Errorf("%d large packets made for datagrams of no session", made)
	}
	got := p.b.Drops()
	if junk, unknown := got.Junk-drops.Junk, got.UnknownIndex-drops.UnknownIndex; junk != n/2 || unknown != n/2 {
		t.Errorf("counted %d junk and %d unknown-index datagrams, want %d each", junk, unknown, n/2)
	}
	p.send(p.ta, p.tb, ipA4, ipB4, "still fine")
}

// TestLargeDatagramsForASessionStayInBudget: datagrams larger than the MTU
// that name a live session (a peer with a larger MTU, or someone who
// learnt the index on the path) take large packets from a bounded budget;
// forged ones fail authentication and are counted, and the device
// allocates nothing once the budget is made.
func TestLargeDatagramsForASessionStayInBudget(t *testing.T) {
	if acceptanceRace {
		t.Skip("the race detector allocates")
	}
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "establish")
	idx := peerOf(p.b, p.ka).keypairs.current.Load().localIndex
	forged := func(i int, buf []byte) int {
		const size = 4000 // larger than B's MTU-sized packets
		clear(buf[:size])
		noise.PutTransportHeader(buf, idx, uint64(i))
		return size
	}
	const batches = 200
	before := p.b.Drops()
	alloc := feedReceive(p.b, 10, batches, forged)
	n := uint64((10 + batches) * conn.IdealBatchSize)
	perDatagram := float64(alloc) / float64(batches*conn.IdealBatchSize)
	t.Logf("%d forged large datagrams: %.2f bytes allocated each", n, perDatagram)
	if perDatagram > 16 {
		t.Errorf("%.1f bytes allocated per forged large datagram", perDatagram)
	}
	p.b.pool.mu.Lock()
	made := p.b.pool.made
	p.b.pool.mu.Unlock()
	if made == 0 || made > maxLarge {
		t.Errorf("%d large packets made, want 1..%d", made, maxLarge)
	}
	got := p.b.Drops()
	if d := (got.Unauthenticated - before.Unauthenticated) + (got.NoBuffer - before.NoBuffer); d != n {
		t.Errorf("%d of %d forged datagrams counted as unauthenticated or without buffer", d, n)
	}
	p.send(p.ta, p.tb, ipA4, ipB4, "still fine")
}

// TestLargePacketBudget: exchangeLarge makes at most maxLarge packets, then
// returns nil (the caller drops the datagram) until one comes back.
func TestLargePacketBudget(t *testing.T) {
	pl := newPools(1420)
	var got []*packet
	for i := 0; i < maxLarge; i++ {
		small := []*packet{nil}
		pl.getPackets(small)
		lp := pl.exchangeLarge(small[0])
		if lp == nil {
			t.Fatalf("no large packet at %d of %d", i, maxLarge)
		}
		got = append(got, lp)
	}
	small := []*packet{nil}
	pl.getPackets(small)
	if lp := pl.exchangeLarge(small[0]); lp != nil {
		t.Fatal("a large packet beyond the budget")
	}
	pl.putPackets(got[:1])
	if lp := pl.exchangeLarge(small[0]); lp != got[0] {
		t.Fatal("the returned large packet was not reused")
	}
}
