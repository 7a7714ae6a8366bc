package service

// An event's way: publish (from the Host, the poller or the server) takes
// hub.mu and offers the event to every subscriber's queue without waiting;
// a subscriber whose queue is full is dropped on the spot (its queue is
// closed, its stream handler sees that and ends the response). A new
// subscriber first buffers live events while the snapshot is read from the
// Host, then gets the snapshot followed by what it buffered, so it never
// misses a change that happened while it subscribed.

import (
	"errors"
	"sync"
	"time"
)

// errClosed is returned by subscribe once the hub has been closed.
var errClosed = errors.New("the service is stopping")

// hub fans events out to subscribers.
type hub struct {
	queueLen int // capacity of a subscriber's queue; immutable

	mu      sync.Mutex
	subs    map[*subscriber]struct{} // guarded by mu
	closed  bool                     // guarded by mu
	dropped uint64                   // subscribers dropped for not reading; guarded by mu
	wake    chan struct{}            // signalled (non-blocking) when the first subscriber arrives
}

// subscriber is one /v1/events stream.
type subscriber struct {
	// ch is the queue the stream handler reads. It is made when the
	// snapshot is queued and closed by the hub (under hub.mu) when the
	// subscriber is dropped or the hub closes.
	ch chan Event
	// The fields below are guarded by hub.mu.
	buffering bool    // the snapshot is being read: live events go to pending
	pending   []Event // live events that arrived while buffering
	gone      bool    // removed from the hub (dropped, unsubscribed, closed)
	slow      bool    // removed because its queue was full
}

func newHub(queueLen int) *hub {
	return &hub{queueLen: queueLen, subs: map[*subscriber]struct{}{}, wake: make(chan struct{}, 1)}
}

// publish offers e to every subscriber. It never blocks on a subscriber.
func (h *hub) publish(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if s.buffering {
			if len(s.pending) >= h.queueLen {
				h.dropLocked(s, true)
				continue
			}
			s.pending = append(s.pending, e)
			continue
		}
		select {
		case s.ch <- e:
		default:
			h.dropLocked(s, true)
		}
	}
}

// subscribe registers a subscriber whose queue starts with the events
// snapshot returns (called without hub.mu held, so the Host may publish
// meanwhile).
func (h *hub) subscribe(snapshot func() []Event) (*subscriber, error) {
	s := &subscriber{buffering: true}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, errClosed
	}
	h.subs[s] = struct{}{}
	if len(h.subs) == 1 {
		select {
		case h.wake <- struct{}{}:
		default:
		}
	}
	h.mu.Unlock()

	evs := snapshot()

	h.mu.Lock()
	defer h.mu.Unlock()
	s.ch = make(chan Event, len(evs)+h.queueLen)
	if s.gone {
		close(s.ch)
		return s, nil
	}
	for _, e := range evs {
		s.ch <- e
	}
	for _, e := range s.pending {
		s.ch <- e // fits: pending holds at most queueLen events
	}
	s.pending, s.buffering = nil, false
	return s, nil
}

// unsubscribe removes s (idempotent); slow says it is removed because it
// stopped reading (its writes timed out).
func (h *hub) unsubscribe(s *subscriber, slow bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dropLocked(s, slow)
}

// dropLocked removes s from the hub and closes its queue. h.mu is held.
func (h *hub) dropLocked(s *subscriber, slow bool) {
	if s.gone {
		return
	}
	s.gone, s.slow = true, slow
	delete(h.subs, s)
	if slow {
		h.dropped++
	}
	if s.ch != nil {
		close(s.ch)
	}
}

// close drops every subscriber and refuses new ones.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		h.dropLocked(s, false)
	}
}

// stats returns the number of subscribers and how many were dropped for
// not reading.
func (h *hub) stats() (subscribers int, dropped uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs), h.dropped
}

// wasSlow reports whether s was dropped for not reading.
func (h *hub) wasSlow(s *subscriber) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return s.slow
}
