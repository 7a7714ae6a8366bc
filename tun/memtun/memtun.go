// Package memtun is an in-memory TUN device for tests and benchmarks. The
// engine reads packets that a test injects and writes packets that a test
// collects, in batches, exactly as it would with a Linux TUN device.
//
//	test --Inject--> in (chan) --Read(bufs)--> engine
//	engine --Write(bufs)--> out (chan, copies) or write hook (no copy) --> test
package memtun

import (
	"errors"
	"os"
	"sync"

	"github.com/wirelane/wirelane/tun"
)

// DefaultMTU is the MTU of a device made by New with mtu 0.
const DefaultMTU = 1420

// DefaultBatchSize is the largest number of packets one Read or Write moves.
const DefaultBatchSize = 128

// Device is an in-memory tun.Device. It is safe for concurrent use.
type Device struct {
	name   string
	mtu    int
	batch  int
	in     chan []byte
	out    chan []byte
	events chan tun.Event
	closed chan struct{}

	closeOnce sync.Once

	hookMu sync.RWMutex                    // guards hook
	hook   func(pkts [][]byte, offset int) // nil = copy into out
}

var _ tun.Device = (*Device)(nil)

// New returns a device named name with the given MTU (0 = DefaultMTU). It
// reports tun.EventUp once at creation.
func New(name string, mtu int) *Device {
	if mtu <= 0 {
		mtu = DefaultMTU
	}
	d := &Device{
		name:   name,
		mtu:    mtu,
		batch:  DefaultBatchSize,
		in:     make(chan []byte, 1024),
		out:    make(chan []byte, 4096),
		events: make(chan tun.Event, 8),
		closed: make(chan struct{}),
	}
	d.events <- tun.EventUp
	return d
}

// Inject queues pkt to be read by the engine, blocking while the queue is
// full. The device copies pkt when the engine reads it, so pkt must not be
// modified until then (benchmarks may re-inject one unchanging slice). It
// returns os.ErrClosed once the device is closed.
func (d *Device) Inject(pkt []byte) error {
	select {
	case <-d.closed:
		return os.ErrClosed
	default:
	}
	select {
	case d.in <- pkt:
		return nil
	case <-d.closed:
		return os.ErrClosed
	}
}

// Outbound is the channel of packets the engine wrote (copies), unless a
// write hook is installed. Packets are dropped when nobody drains it.
func (d *Device) Outbound() <-chan []byte { return d.out }

// SetWriteHook makes Write call fn with the engine's buffers instead of
// copying packets to Outbound; nil restores copying. fn must not keep the
// buffers after it returns. Benchmarks use it to count packets without
// allocating.
func (d *Device) SetWriteHook(fn func(pkts [][]byte, offset int)) {
	d.hookMu.Lock()
	d.hook = fn
	d.hookMu.Unlock()
}

// SetMTU changes the MTU and reports tun.EventMTUUpdate.
func (d *Device) SetMTU(mtu int) {
	d.hookMu.Lock()
	defer d.hookMu.Unlock()
	d.mtu = mtu
	select {
	case <-d.closed:
		return
	default:
	}
	select {
	case d.events <- tun.EventMTUUpdate:
	default:
	}
}

// File returns nil: the device has no file.
func (d *Device) File() *os.File { return nil }

// Read blocks for one injected packet, then takes as many more as are
// queued, up to len(bufs). A packet larger than its buffer is truncated.
func (d *Device) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if len(bufs) == 0 {
		return 0, nil
	}
	var pkt []byte
	select {
	case pkt = <-d.in:
	case <-d.closed:
		return 0, os.ErrClosed
	}
	n := 0
	for {
		sizes[n] = copy(bufs[n][offset:], pkt)
		n++
		if n == len(bufs) {
			return n, nil
		}
		select {
		case pkt = <-d.in:
		default:
			return n, nil
		}
	}
}

// Write delivers the packets bufs[i][offset:] to the write hook or, as
// copies, to Outbound.
func (d *Device) Write(bufs [][]byte, offset int) (int, error) {
	select {
	case <-d.closed:
		return 0, os.ErrClosed
	default:
	}
	d.hookMu.RLock()
	hook := d.hook
	d.hookMu.RUnlock()
	if hook != nil {
		hook(bufs, offset)
		return len(bufs), nil
	}
	for _, b := range bufs {
		if offset > len(b) {
			return 0, errors.New("memtun: offset beyond buffer")
		}
		p := append([]byte(nil), b[offset:]...)
		select {
		case d.out <- p:
		default: // nobody is reading: drop, as a real interface would
		}
	}
	return len(bufs), nil
}

// MTU returns the device's MTU.
func (d *Device) MTU() (int, error) {
	d.hookMu.RLock()
	defer d.hookMu.RUnlock()
	return d.mtu, nil
}

// Name returns the device's name.
func (d *Device) Name() (string, error) { return d.name, nil }

// Events returns the event channel; it is closed by Close.
func (d *Device) Events() <-chan tun.Event { return d.events }

// BatchSize returns the largest number of packets one Read or Write moves.
func (d *Device) BatchSize() int { return d.batch }

// Close closes the device; Read and Write then fail with os.ErrClosed. It
// is idempotent.
func (d *Device) Close() error {
	d.closeOnce.Do(func() {
		close(d.closed)
		d.hookMu.Lock()
		close(d.events)
		d.hookMu.Unlock()
	})
	return nil
}

// Closed returns a channel closed when the device is closed.
func (d *Device) Closed() <-chan struct{} { return d.closed }
