package conn

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// RCU is a read-copy-update domain: senders mark short read sections, and a
// writer that has published a new route calls Synchronize to wait until no
// sender can still be using the old one.
//
// Each sender goroutine owns a Reader, a word on its own cache line. Entering
// and leaving a read section are plain atomic stores to that word (no
// read-modify-write, nothing shared is written); Synchronize advances the
// domain's epoch and waits for every reader that entered before it.
//
// Why it is enough: atomics in Go are sequentially consistent. A reader
// stores its state before it borrows anything; the writer publishes before it
// reads the reader states. So either the writer sees the reader inside a
// section that began in an older epoch (and waits for it), or the reader's
// borrow comes after the publication (and sees the new value).
type RCU struct {
	epoch atomic.Uint64 // even; advanced by 2 per Synchronize

	mu      sync.Mutex                // serialises NewReader and Release
	readers atomic.Pointer[[]*Reader] // copy-on-write list; replaced only under mu
}

// Reader is one goroutine's read-section marker. It must be used by one
// goroutine at a time, and sections do not nest.
type Reader struct {
	_     [64]byte
	state atomic.Uint64 // 0 outside a section, epoch|1 inside; written by the owner only
	_     [56]byte
	d     *RCU // immutable
}

// NewReader registers a new reader with the domain. It allocates; call it
// once per sender goroutine, not per send.
func (d *RCU) NewReader() *Reader {
	r := &Reader{d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	var next []*Reader
	if old := d.readers.Load(); old != nil {
		next = append(next, *old...)
	}
	next = append(next, r)
	d.readers.Store(&next)
	return r
}

// Release unregisters r; it must be outside a read section.
func (r *Reader) Release() {
	d := r.d
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.readers.Load()
	if old == nil {
		return
	}
	next := make([]*Reader, 0, len(*old))
	for _, x := range *old {
		if x != r {
			next = append(next, x)
		}
	}
	d.readers.Store(&next)
}

// Enter starts a read section: every route borrowed until Exit stays the
// route the writer must wait for.
func (r *Reader) Enter() { r.state.Store(r.d.epoch.Load() | 1) }

// Exit ends the read section.
func (r *Reader) Exit() { r.state.Store(0) }

// Synchronize waits until every read section that began before the call has
// ended. Publish first, then Synchronize: afterwards no reader holds the old
// value. It must not be called inside a read section of the same domain
// (it would wait for itself). Read sections are short (one batch), so the
// wait first yields the processor a few times and only then sleeps, with a
// backoff capped at one millisecond.
func (d *RCU) Synchronize() {
	next := d.epoch.Add(2)
	list := d.readers.Load()
	if list == nil {
		return
	}
	for _, r := range *list {
		sleep := time.Microsecond
		for spins := 0; ; spins++ {
			s := r.state.Load()
			if s == 0 || s >= next {
				break
			}
			if spins < 16 {
				runtime.Gosched()
				continue
			}
			time.Sleep(sleep)
			if sleep < time.Millisecond {
				sleep *= 2
			}
		}
	}
}
