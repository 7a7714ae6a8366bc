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
// handed out - delivered to the receiver - written off stays within the
// window. When the window is full, Read waits on a channel that the
// receiver's Write signals once enough packets have arrived to make room
// for a batch (no spinning, one wake-up per wait). If nothing at all is
// delivered for the loss timeout, the packets in flight are written off as
// lost and generation goes on; the next write-off without a delivery in
// between waits twice as long. Open loop (no closeLoop): Read fills every
// batch as fast as the engine reads.
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
	// multi, when set, replaces pkt by several prepared packets handed
	// out round robin (the many-peers section: one per destination);
	// read-only. next is the one the next buffer gets; only Read (one
	// goroutine, serialised by the engine) touches it.
	multi [][]byte
	next  int

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

	// bySource, when set, is called with every packet Write receives (the
	// many-peers section counts bytes per source peer); read-only.
	bySource func(p []byte)

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

	// wakeAt is the delivered count at which a Read waiting for room can
	// go on, or noWake; set by the waiting Read, read by the receiver's
	// Write, which signals wake once its count reaches it.
	wakeAt atomic.Uint64
	wake   chan struct{} // capacity 1: the receiver's Write signals a waiting Read

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

const (
	// maxWriteOffWait caps the doubled wait between write-offs.
	maxWriteOffWait = time.Second
	// noWake is wakeAt when no Read waits.
	noWake = ^uint64(0)
)

// Closed-loop defaults, both measured on a 2-core machine (numbers in
// docs/benchmarks.md). The window is 16 batches: 256 packets starved both
// engines' pipelines (lower throughput), 1024 and 2048 performed alike,
// 4096 and more raised wireguard-go's CPU per GB and, at 8192 with 64-byte
// packets, let it drop 15% of them. The loss timeout must outlast the
// pipeline's own pauses: on a loaded machine wireguard-go went tens of
// milliseconds without delivering anything, so at 3 ms and 20 ms write-offs
// were mostly of packets that then arrived, and at 3 ms the extra windows
// they let in overflowed the socket again (16-40% loss).
const (
	// DefaultWindow is Config.Window unless set: most packets in flight.
	DefaultWindow = 2048
	// DefaultLossTimeout is Config.LossTimeout unless set: how long
	// without a delivery before the packets in flight are written off.
	DefaultLossTimeout = 50 * time.Millisecond
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
	g.loop.wakeAt.Store(noWake)
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
	if g.multi != nil {
		for i := 0; i < n; i++ {
			sizes[i] = copy(bufs[i][offset:], g.multi[g.next])
			if g.next++; g.next == len(g.multi) {
				g.next = 0
			}
		}
	} else {
		for i := 0; i < n; i++ {
			sizes[i] = copy(bufs[i][offset:], g.pkt)
		}
	}
	g.txPackets.Add(uint64(n))
	return n, nil
}

// inFlight returns the number of packets handed out and neither delivered
// nor written off, and the delivered count it used. Written-off packets are
// taken to be lost; if more packets arrive than that allows, some were only
// late, and the written-off count shrinks so that the count in flight never
// goes below zero (it is exact again once every late packet has arrived).
// Called with l.mu held.
func (l *flowWindow) inFlight(g *genTUN) (in, rx uint64) {
	// Read the delivered count first: it only grows, so the difference
	// can only overstate what is in flight, never understate it.
	rx = l.recv.rxPackets.Load()
	tx := g.txPackets.Load()
	if rx+l.writtenOff > tx {
		back := min(rx+l.writtenOff-tx, l.writtenOff)
		l.late.Add(back)
		l.writtenOff -= back
	}
	if rx > tx {
		// More delivered than handed out: duplicates. Nothing is in
		// flight (the difference would wrap and admit would spin).
		return 0, rx
	}
	return tx - rx - l.writtenOff, rx
}

// admit waits until the window has room for want packets (or for all the
// window, if smaller) and returns how many Read may hand out; false when
// the device closed. Called with l.mu held.
func (l *flowWindow) admit(g *genTUN, want int) (int, bool) {
	need := min(uint64(want), l.window)
	for {
		in, rx := l.inFlight(g)
		if in+need <= l.window {
			return int(need), true
		}
		// Room for need packets comes with this many more deliveries.
		// Ask the receiver's Write to signal then, and look again: a
		// delivery between the first look and the request would
		// otherwise go unsignalled.
		at := rx + (in + need - l.window)
		l.wakeAt.Store(at)
		if l.recv.rxPackets.Load() >= at {
			l.wakeAt.Store(noWake)
			continue
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
				// Nothing arrived for a whole wait: what is in
				// flight is lost (a late arrival is given back by
				// inFlight).
				in, _ = l.inFlight(g)
				l.writtenOff += in
				l.writeOffs.Add(1)
				l.rxAtWriteOff = rx
				l.wait = min(2*l.wait, maxWriteOffWait)
			}
		case <-g.closed:
			l.timer.Stop()
			l.wakeAt.Store(noWake)
			return 0, false
		}
		l.wakeAt.Store(noWake)
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
		if g.bySource != nil {
			g.bySource(p)
		}
		if g.want != nil && len(p) != len(g.want) {
			bad++
		}
	}
	if g.want != nil && len(bufs) > 0 && !g.checked.Load() {
		if g.checked.CompareAndSwap(false, true) && !bytes.Equal(bufs[0][offset:], g.want) {
			bad++
		}
	}
	if bad != 0 {
		g.rxBad.Add(bad)
	}
	g.delivered(uint64(len(bufs)), bytesIn)
	return len(bufs), nil
}

// delivered counts packets that reached this device (from Write, or from
// a sink outside any engine, see peers.go) and wakes the closed-loop
// sender if it waits for room.
func (g *genTUN) delivered(packets, bytes uint64) {
	rx := g.rxPackets.Add(packets)
	g.rxBytes.Add(bytes)
	if s := g.sender; s != nil && rx >= s.loop.wakeAt.Load() {
		select {
		case s.loop.wake <- struct{}{}:
		default:
		}
	}
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
