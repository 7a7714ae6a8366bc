package bench

// The in-memory TUN used by the in-process throughput runs. One type serves
// both engines: Wirelane's tun.Device and wireguard-go's tun.Device have the
// same method set (tun.Event is an alias of wireguard-go's event type), so
// the generator and the sink are byte-for-byte the same code on both sides.
//
//	sender engine  <--Read--  genTUN (copies one prepared packet into every
//	                          buffer of the batch while the gate is open)
//	receiver engine --Write-> genTUN (counts packets and bytes with atomics,
//	                          checks the size of every packet and the bytes
//	                          of the first one)
//
// Nothing on either path allocates, so the allocation counts of a run belong
// to the engines.

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"

	wgtun "golang.zx2c4.com/wireguard/tun"

	"github.com/wirelane/wirelane/tun"
)

// tunBatch is the largest number of packets one Read or Write moves, the
// same for both engines.
const tunBatch = 128

// genTUN is an in-memory TUN device that generates a stream of identical
// packets (when pkt is set and the gate is open) and counts what the engine
// writes to it.
type genTUN struct {
	name string
	mtu  int
	pkt  []byte // read-only; nil for a device that never generates

	generating atomic.Bool   // the gate: Read produces packets while true
	gateOpen   chan struct{} // closed by start
	startOnce  sync.Once
	closed     chan struct{}
	closeOnce  sync.Once
	events     chan wgtun.Event

	// Counters of packets the engine wrote (delivered to this device).
	rxPackets atomic.Uint64
	rxBytes   atomic.Uint64
	rxBad     atomic.Uint64 // packets whose size or first bytes differ from want
	want      []byte        // read-only; the packet expected on Write, or nil
	checked   atomic.Bool   // the full content check ran once

	// txPackets counts packets handed to the engine by Read.
	txPackets atomic.Uint64
}

var (
	_ tun.Device   = (*genTUN)(nil)
	_ wgtun.Device = (*genTUN)(nil)
)

// newGenTUN returns a device with the given MTU that, once started,
// generates copies of pkt (nil: never generates) and expects packets equal
// to want on Write (nil: no check).
func newGenTUN(name string, mtu int, pkt, want []byte) *genTUN {
	g := &genTUN{
		name:     name,
		mtu:      mtu,
		pkt:      pkt,
		want:     want,
		gateOpen: make(chan struct{}),
		closed:   make(chan struct{}),
		events:   make(chan wgtun.Event, 4),
	}
	return g
}

// start opens the gate: Read begins producing packets.
func (g *genTUN) start() {
	g.startOnce.Do(func() {
		g.generating.Store(true)
		close(g.gateOpen)
	})
}

// stop closes the gate for good: Read blocks until Close.
func (g *genTUN) stop() { g.generating.Store(false) }

// File returns nil: there is no file.
func (g *genTUN) File() *os.File { return nil }

// Read fills every buffer of the batch with the prepared packet while the
// gate is open; otherwise it blocks until the gate opens or the device
// closes.
func (g *genTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if g.pkt == nil {
		<-g.closed
		return 0, os.ErrClosed
	}
	select {
	case <-g.gateOpen:
	case <-g.closed:
		return 0, os.ErrClosed
	}
	if !g.generating.Load() {
		<-g.closed
		return 0, os.ErrClosed
	}
	select {
	case <-g.closed:
		return 0, os.ErrClosed
	default:
	}
	n := len(bufs)
	if n > tunBatch {
		n = tunBatch
	}
	for i := 0; i < n; i++ {
		sizes[i] = copy(bufs[i][offset:], g.pkt)
	}
	g.txPackets.Add(uint64(n))
	return n, nil
}

// Write counts the packets bufs[i][offset:].
func (g *genTUN) Write(bufs [][]byte, offset int) (int, error) {
	select {
	case <-g.closed:
		return 0, os.ErrClosed
	default:
	}
	var bytesIn, bad uint64
	for _, b := range bufs {
		p := b[offset:]
		bytesIn += uint64(len(p))
		if g.want != nil && len(p) != len(g.want) {
			bad++
		}
	}
	if g.want != nil && len(bufs) > 0 && !g.checked.Load() {
		if g.checked.CompareAndSwap(false, true) && !bytes.Equal(bufs[0][offset:], g.want) {
			bad++
		}
	}
	g.rxPackets.Add(uint64(len(bufs)))
	g.rxBytes.Add(bytesIn)
	if bad != 0 {
		g.rxBad.Add(bad)
	}
	return len(bufs), nil
}

// MTU returns the device's MTU.
func (g *genTUN) MTU() (int, error) { return g.mtu, nil }

// Name returns the device's name.
func (g *genTUN) Name() (string, error) { return g.name, nil }

// Events returns the event channel; Close closes it. No event is ever
// sent: wireguard-go brings a device up on EventUp, and the harness decides
// itself when a device goes up.
func (g *genTUN) Events() <-chan wgtun.Event { return g.events }

// BatchSize returns tunBatch.
func (g *genTUN) BatchSize() int { return tunBatch }

// Close unblocks Read and closes the event channel. It is idempotent.
func (g *genTUN) Close() error {
	g.closeOnce.Do(func() {
		close(g.closed)
		close(g.events)
	})
	return nil
}
