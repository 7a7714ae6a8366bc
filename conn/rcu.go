package conn

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// RCU is a read-copy-update domain: senders mark short read sections, and a
// writer that has published a new route calls Synchronize to wait until no
// sender can still be using the old one.
//
// Each sender goroutine owns a Reader, a word on its own cache line. Entering
// and leaving a read section are plain atomic stores to that word (no
// read-modify-write, nothing shared is written); Synchronize advances the
// domain's epoch and waits for every reader that entered before it.
type RCU struct {
	epoch atomic.Uint64 // even; advanced by 2 per Synchronize

	mu      sync.Mutex // guards readers
	readers []*Reader  // guarded by mu
}

// Reader is one goroutine's read-section marker. It must be used by one
// goroutine at a time.
type Reader struct {
	_     [64]byte
	state atomic.Uint64 // 0 outside a section, epoch|1 inside
	_     [56]byte
	d     *RCU
}

// NewReader registers a new reader with the domain.
func (d *RCU) NewReader() *Reader {
	r := &Reader{d: d}
	d.mu.Lock()
	d.readers = append(d.readers, r)
	d.mu.Unlock()
	return r
}

// Release unregisters r; it must be outside a read section.
func (r *Reader) Release() {
	d := r.d
	d.mu.Lock()
	for i, x := range d.readers {
		if x == r {
			d.readers = append(d.readers[:i], d.readers[i+1:]...)
			break
		}
	}
	d.mu.Unlock()
}

// Enter starts a read section: every route borrowed until Exit stays the
// route the writer must wait for.
func (r *Reader) Enter() { r.state.Store(r.d.epoch.Load() | 1) }

// Exit ends the read section.
func (r *Reader) Exit() { r.state.Store(0) }

// Synchronize waits until every read section that began before the call has
// ended. Publish first, then Synchronize: afterwards no reader holds the old
// value.
func (d *RCU) Synchronize() {
	next := d.epoch.Add(2)
	d.mu.Lock()
	readers := append([]*Reader(nil), d.readers...)
	d.mu.Unlock()
	for _, r := range readers {
		for spins := 0; ; spins++ {
			s := r.state.Load()
			if s == 0 || s >= next {
				break
			}
			if spins < 64 {
				runtime.Gosched()
			} else {
				runtime.Gosched()
			}
		}
	}
}
