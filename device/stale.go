package device

// Stale handshake messages. Under a handshake flood the responder can fall
// behind (another job takes its CPU; it is paused): the kernel keeps
// queuing the flood in the socket's receive buffer (socketBufferSize,
// thousands of datagrams), and once the responder runs again it would work
// through all of them, mac1, mac2 and a cookie reply each, before it gets
// to anything sent since. A legitimate initiation waits behind that queue
// (hundreds of ms on a starved host), and its answer is useless once the
// initiator has retried: a retry replaces the initiation in flight, and
// every implementation drops a cookie reply or response for the one it
// replaced.
//
// So while the device is under load the receive path asks the kernel for
// receive timestamps (SO_TIMESTAMPNS via conn.Timestamper: turned on when
// the device goes under load, off once it no longer is, so the data path
// pays nothing otherwise) and drops, unread, each handshake message that
// waited in the buffer longer than StaleHandshakeAge. Transport messages
// are never dropped for their age: the replay window and the session
// decide about those. A stale datagram costs a comparison; the responder
// gets through the backlog at that price and answers what is fresh.
//
// Why 100 ms. A message's answer is useful only if it reaches the
// initiator before its next retry. Initiators retry every RekeyTimeout
// (5 s, plus up to a third of a second of jitter: the kernel, wireguard-go
// and Wirelane); the measurement, and the flood benchmark, retry
// every 250 ms, and the latency requirement is that an initiator that
// answers the cookie completes in under 500 ms: two passes through the
// responder's queue (the initiation answered with a cookie reply, the
// resend with mac2), each answered before the 250 ms retry. Under a flood
// the responder cannot keep up with, what it answers has waited about the
// threshold, so each pass takes about that long; and the backlog the
// threshold lets through (flood rate x threshold datagrams) must fit in
// the socket's buffer (socketBufferSize, about 17,000 initiations of the
// kernel's accounting), or the kernel drops at the tail before anything is
// stale, legitimate messages included. At the 170,000 a second
// that is 100 ms. (In two benchmark runs each, at 84,000-98,000 a second
// on a shared 2-core machine: with 200 ms the kernel dropped 38,000 and
// 186,000 datagrams and 3 and 4 of 20 handshakes took over 500 ms; with
// 100 ms 1,700 and 26,000, and 0 and 2 of 20; a later repeat at a
// higher load, 9 of 20.) Much lower would
// drop messages that the scheduling delays of a loaded host (tens of ms)
// hold up. The cost falls on a 5 s initiator whose message waited more
// than 100 ms under load: it is answered at its next retry (up to 5 s
// later) instead of at once. Under a sustained overload something is
// dropped either way; the kernel drops at the tail once the buffer is
// full, this drops at the head, cheaply, and keeps the wait of what is
// answered under the threshold.
//
// The kernel's timestamps are CLOCK_REALTIME: a step of the wall clock
// forward while datagrams wait makes them look old once (dropped, their
// senders retry); a step back makes them look new (worked on, as without
// timestamps). When no socket on the host had asked for timestamps, the
// kernel begins stamping on arrival only after a work queue has run, a
// moment after the option is set; until then a datagram is stamped when
// it is read, so it looks fresh and is worked on, as without timestamps.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/conn"
)

// stampState turns the bind's receive timestamps on while the device is
// under load.
type stampState struct {
	ts conn.Timestamper // nil when the bind cannot stamp; immutable
	// on: timestamps are on; read by the receive goroutines once per
	// batch that found the device under load. Changed under mu.
	on atomic.Bool
	mu sync.Mutex // guards the changes of on, failed and timer
	// failed: the bind refused to turn them on; not asked again until
	// the bind is opened again.
	failed bool
	timer  timer     // checks once per UnderLoadAfterTime whether load ended
	due    time.Time // when the timer is due (device clock)
}

// startStamps turns receive timestamps on (the device went under load)
// and starts the check that turns them off again.
func (d *Device) startStamps() {
	s := &d.stamps
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.on.Load() || s.failed || s.ts == nil || !d.up.Load() {
		return
	}
	if err := s.ts.SetReceiveTimestamps(true); err != nil {
		s.failed = true
		d.log.Warn("receive timestamps unavailable: stale handshake messages are not dropped under load", "err", err)
		return
	}
	s.on.Store(true)
	s.schedule(d)
}

// schedule (re)starts the check. s.mu must be held.
func (s *stampState) schedule(d *Device) {
	s.due = d.clock.Now().Add(UnderLoadAfterTime)
	if s.timer == nil {
		s.timer = d.clock.AfterFunc(UnderLoadAfterTime, d.checkStamps)
	} else {
		s.timer.Reset(UnderLoadAfterTime)
	}
}

// checkStamps turns receive timestamps off once the device is no longer
// under load, and looks again later while it is. A check that runs late
// says that the process was not running (starved, or stopped): "under
// load" may have lapsed meanwhile, but that is when the backlog is
// oldest, so it looks again later instead.
func (d *Device) checkStamps() {
	s := &d.stamps
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on.Load() {
		return
	}
	if d.underLoad() || d.clock.Now().Sub(s.due) > UnderLoadAfterTime/4 {
		s.schedule(d)
		return
	}
	_ = s.ts.SetReceiveTimestamps(false) // a bind closed meanwhile has none
	s.on.Store(false)
}

// resetStamps forgets the timestamp state of a bind that was closed (its
// sockets are gone; a new Open starts with timestamps off).
func (d *Device) resetStamps() {
	s := &d.stamps
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	s.on.Store(false)
	s.failed = false
}

// isStale reports whether a handshake message received at arrived (Unix
// ns; 0 when not stamped) waited longer than StaleHandshakeAge; *wall is
// the batch's wall clock, read on first use.
func isStale(arrived int64, wall *int64) bool {
	if arrived == 0 {
		return false
	}
	if *wall == 0 {
		*wall = time.Now().UnixNano()
	}
	return *wall-arrived > int64(StaleHandshakeAge)
}
