package bench

// The in-memory TUN used by the in-process throughput runs. One type serves
// both engines: Wirelane's tun.Device and wireguard-go's tun.Device have the
// same method set (tun.Event is an alias of wireguard-go's event type), so
// the generator and the sink are byte-for-byte the same code on both sides.
//
//	sender engine  <--Read--  genTUN (copies one prepared packet into every
//	                          buffer of the batch while the gate is open and,
//	                          closed loop, while the window has room)
//	receiver engine --Write-> genTUN (counts packets and bytes with atomics,
//	                          checks the size of every packet and the bytes
//	                          of the first one, wakes a waiting sender)
//
// Closed loop (closeLoop): the sender's Read hands out packets only while
// handed out - delivered to the receiver - written off stays below the
// window. When the window is full, Read waits on a channel that the
// receiver's Write signals; if nothing is delivered for lossTimeout, the
// packets still in flight are written off as lost and generation goes on.
// Open loop (no closeLoop): Read fills every batch as fast as the engine
// reads.
//
// Nothing on either path allocates, so the allocation counts of a run belong
// to the engines.

import (
	"bytes"
	"os"
	"sync"
	"sync/atomic"
	"time"

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

	// loop is the flow control of a closed-loop sender; nil: open loop.
	// Set by closeLoop before start and read-only after.
	loop *flowWindow
	// sender is the closed-loop sender this device delivers for, whose
	// waiting Read its Write wakes; nil otherwise. Set by closeLoop before
	// start and read-only after.
	sender *genTUN
}

// flowWindow is the closed-loop state of a sending genTUN.
type flowWindow struct {
	window  uint64        // read-only: most packets in flight at once
	timeout time.Duration // read-only: no delivery for this long writes off the in-flight packets
	recv    *genTUN       // read-only: the device whose deliveries are counted

	waiting atomic.Bool   // set by a Read waiting for room, cleared when it goes on
	wake    chan struct{} // capacity 1: the receiver's Write signals a waiting Read

	mu sync.Mutex // serialises Reads of the sender; guards the fields below
	// writtenOff counts packets given up as lost after a timeout (less
	// any that turned up later); guarded by mu.
	writtenOff uint64
	// writeOffs counts timeouts that wrote packets off; read atomically
	// by the harness, written under mu.
	writeOffs atomic.Uint64
	// late counts written-off packets that arrived after all (a write-off
	// that came too soon); read atomically by the harness, written under mu.
	late atomic.Uint64
	// timer is reused so that waiting allocates nothing; guarded by mu.
	timer *time.Timer
	// wait is how long the next write-off waits without a delivery: the
	// timeout, doubled after every write-off not followed by a delivery
	// (up to maxWriteOffWait), so that one long stall of the pipeline
	// cannot pile window upon window into it. Guarded by mu.
	wait time.Duration
	// rxAtWriteOff is the delivered count at the last write-off; guarded
	// by mu.
	rxAtWriteOff uint64
}

// maxWriteOffWait caps the doubled wait between write-offs.
const maxWriteOffWait = time.Second

// Closed-loop defaults. The window keeps the pipeline full (a few batches
// in every stage of both engines) yet far below what the 7 MiB socket
// buffers of both binds hold, so the loopback socket does not overflow; see
// docs/benchmarks.md for the windows measured. The timeout is long beside
// the time one batch takes to cross the tunnel (well under a millisecond)
// and short beside a window of measurement.
const (
	DefaultWindow      = 2048
	DefaultLossTimeout = 3 * time.Millisecond
)

var (
	_ tun.Device   = (*genTUN)(nil)
	_ wgtun.Device = (*genTUN)(nil)
)

// newGenTUN returns a device with the given MTU that, once started,
// generates copies of pkt (nil: never generates) and expects packets equal
// to want on Write (nil: no check). It runs open loop until closeLoop.
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

// closeLoop makes g a closed-loop sender whose deliveries are counted at
// recv: at most window packets in flight, and the in-flight packets written
// off after timeout without a delivery. Call it before start and before
// either device is handed to an engine.
func (g *genTUN) closeLoop(recv *genTUN, window int, timeout time.Duration) {
	if window < 1 {
		window = 1
	}
	t := time.NewTimer(time.Hour)
	t.Stop()
	g.loop = &flowWindow{
		window:  uint64(window),
		timeout: timeout,
		recv:    recv,
		wake:    make(chan struct{}, 1),
		timer:   t,
	}
	recv.sender = g
}

// writeOffs returns how many times a closed-loop sender gave up on its
// in-flight packets; 0 for an open-loop one.
func (g *genTUN) writeOffs() uint64 {
	if g.loop == nil {
		return 0
	}
	return g.loop.writeOffs.Load()
}

// lateArrivals returns how many written-off packets arrived after all; 0
// for an open-loop sender.
func (g *genTUN) lateArrivals() uint64 {
	if g.loop == nil {
		return 0
	}
	return g.loop.late.Load()
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
// gate is open (closed loop: as many as the window allows, waiting for room
// when it is full); otherwise it blocks until the gate opens or the device
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
	if l := g.loop; l != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		var ok bool
		if n, ok = l.admit(g, n); !ok {
			return 0, os.ErrClosed
		}
	}
	for i := 0; i < n; i++ {
		sizes[i] = copy(bufs[i][offset:], g.pkt)
	}
	g.txPackets.Add(uint64(n))
	return n, nil
}

// inFlight is the number of packets handed out and neither delivered nor
// written off. Written-off packets are taken to be lost; if more packets
// arrive than that allows, some were only late, and the written-off count
// shrinks so that the count in flight never goes below zero (it is exact
// again once every late packet has arrived). Called with l.mu held.
func (l *flowWindow) inFlight(g *genTUN) uint64 {
	// Read the delivered count first: it only grows, so the difference
	// can only overstate what is in flight, never understate it.
	rx := l.recv.rxPackets.Load()
	tx := g.txPackets.Load()
	if rx+l.writtenOff > tx {
		back := rx + l.writtenOff - tx
		l.late.Add(min(back, l.writtenOff))
		l.writtenOff -= min(back, l.writtenOff)
	}
	return tx - rx - l.writtenOff
}

// admit waits until the window has room for want packets (or for all the
// window, if smaller) and returns how many Read may hand out; false when
// the device closed. Called with l.mu held.
func (l *flowWindow) admit(g *genTUN, want int) (int, bool) {
	need := min(uint64(want), l.window)
	for {
		in := l.inFlight(g)
		if l.window-min(in, l.window) >= need {
			return int(need), true
		}
		// Announce the wait, then look again: a delivery between the
		// first look and the announcement would otherwise go unsignalled.
		l.waiting.Store(true)
		rx := l.recv.rxPackets.Load()
		if in = l.inFlight(g); l.window-min(in, l.window) >= need {
			l.waiting.Store(false)
			return int(need), true
		}
		if rx != l.rxAtWriteOff || l.wait == 0 {
			l.wait = l.timeout // delivered since the last write-off
		}
		l.timer.Reset(l.wait)
		select {
		case <-l.wake:
			l.timer.Stop()
		case <-l.timer.C:
			if l.recv.rxPackets.Load() == rx {
				// Nothing arrived for a whole timeout: what is in
				// flight is lost (a late arrival is given back by
				// inFlight).
				l.writtenOff += l.inFlight(g)
				l.writeOffs.Add(1)
				l.rxAtWriteOff = rx
				l.wait = min(2*l.wait, maxWriteOffWait)
			}
		case <-g.closed:
			l.timer.Stop()
			l.waiting.Store(false)
			return 0, false
		}
		l.waiting.Store(false)
	}
}

// Write counts the packets bufs[i][offset:] and wakes the closed-loop
// sender if it waits for room.
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
	if s := g.sender; s != nil && s.loop.waiting.Load() {
		select {
		case s.loop.wake <- struct{}{}:
		default:
		}
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
