package device

// The device's own counters, for operators (the service's /metrics reads
// them through the UAPI's get=1 answer). None is touched per packet on a
// path that succeeds: handshake counters move once per handshake message,
// drop counters once per batch that dropped something (the counts are
// summed in the batch's loop first), route publications once per change of
// a peer's endpoint, error counters once per failed call.

import (
	"runtime"
	"sync/atomic"

	"github.com/wirelane/wirelane/internal/sys/gomem"
)

// DropReason is why the device dropped a packet.
type DropReason uint8

// The reasons a packet is dropped.
const (
	// DropMalformed: a transport message too short for its header, or a
	// handshake message of the wrong size.
	DropMalformed DropReason = iota
	// DropUnknownIndex: a transport message for a session index the device
	// does not know (an old session, or a stray datagram).
	DropUnknownIndex
	// DropDecrypt: a transport message that failed authentication.
	DropDecrypt
	// DropReplay: a counter already seen or too old for the replay window.
	DropReplay
	// DropExpired: a transport message on a session past its lifetime or
	// its message limit.
	DropExpired
	// DropNotAllowed: a decrypted packet whose source is not among the
	// peer's allowed IPs, or which is not a valid IP packet.
	DropNotAllowed
	// DropNoPeer: a packet read from the TUN device for an address no
	// peer's allowed IPs cover (answered with an ICMP error, icmp.go),
	// or that is not IPv4 or IPv6.
	DropNoPeer
	// DropTooBig: a packet read from the TUN device larger than the MTU
	// allows.
	DropTooBig
	// DropHandshakeQueue: a handshake message dropped because the
	// handshake queue was full (a flood).
	DropHandshakeQueue
	// DropStagedOverflow: a packet staged while waiting for a session,
	// pushed out by newer ones.
	DropStagedOverflow
	// DropNoBuffer: a transport message larger than the MTU-sized
	// buffers dropped because every large buffer was in use (the device
	// never allocates beyond its budget of them).
	DropNoBuffer
	// DropNoEndpoint: a packet read from the TUN device for a peer that
	// has no endpoint (none configured, none learnt from the peer);
	// answered with an ICMP error (icmp.go) as the kernel does.
	DropNoEndpoint
	// DropHandshakeStale: under load, a handshake message that waited in
	// the socket's receive buffer longer than StaleHandshakeAge, dropped
	// unread (stale.go).
	DropHandshakeStale
	numDropReasons
)

var dropNames = [numDropReasons]string{"malformed", "unknown_index", "decrypt", "replay", "expired", "not_allowed", "no_peer", "too_big", "handshake_queue_full", "staged_overflow", "no_buffer", "no_endpoint", "handshake_stale"}

// String returns the reason as the metrics label has it.
func (r DropReason) String() string {
	if r < numDropReasons {
		return dropNames[r]
	}
	return "unknown"
}

// RejectReason is why a handshake message was not answered or not used.
type RejectReason uint8

// The reasons a handshake message is rejected.
const (
	// RejectMAC1: a mac1 that does not match the device's public key (the
	// sender does not know it).
	RejectMAC1 RejectReason = iota
	// RejectCookie: under load, a message without a valid mac2; it was
	// answered with a cookie reply instead (counted in CookieRepliesSent too).
	RejectCookie
	// RejectRateLimit: under load, more messages from one address than the
	// limit allows.
	RejectRateLimit
	// RejectInvalid: a message that did not decrypt or verify (an unknown
	// peer, a wrong key, a replayed or old timestamp).
	RejectInvalid
	// RejectStale: a response to a handshake the device no longer waits
	// for, or a message for a peer that is not running.
	RejectStale
	numRejectReasons
)

var rejectNames = [numRejectReasons]string{"mac1", "cookie", "rate_limit", "invalid", "stale"}

// String returns the reason as the metrics label has it.
func (r RejectReason) String() string {
	if r < numRejectReasons {
		return rejectNames[r]
	}
	return "unknown"
}

// counters are the device's atomics behind Counters.
type counters struct {
	initiationsSent     atomic.Uint64
	completedInitiator  atomic.Uint64 // responses consumed: a session as initiator
	completedResponder  atomic.Uint64 // initiations answered: a session as responder
	rejected            [numRejectReasons]atomic.Uint64
	dropped             [numDropReasons]atomic.Uint64
	routePublications   atomic.Uint64
	socketSendErrors    atomic.Uint64
	socketReceiveErrors atomic.Uint64
	tunWriteErrors      atomic.Uint64
}

// Counters is a copy of the device's own counters (see Device.Counters).
type Counters struct {
	// InitiationsSent counts handshake initiations sent (first attempts and
	// retries).
	InitiationsSent uint64
	// CompletedInitiator counts handshakes this device started that
	// completed (a valid response); CompletedResponder those it answered
	// (a valid initiation, a response sent).
	CompletedInitiator, CompletedResponder uint64
	// Rejected counts handshake messages rejected, by RejectReason.
	Rejected [numRejectReasons]uint64
	// CookieRepliesSent counts cookie replies sent under load;
	// CookieRepliesReceived those accepted from peers.
	CookieRepliesSent, CookieRepliesReceived uint64
	// Dropped counts packets dropped, by DropReason.
	Dropped [numDropReasons]uint64
	// RoutePublications counts new routes published to the lock-free send
	// path (an endpoint learnt or roamed, a sticky source cleared).
	RoutePublications uint64
	// SocketSendErrors and SocketReceiveErrors count failed UDP sends
	// (batches) and receives.
	SocketSendErrors, SocketReceiveErrors uint64
	// TUNWriteErrors counts failed writes to the TUN device (batches).
	TUNWriteErrors uint64
	// GOMAXPROCS, CryptoWorkers and InlineCrypto are not counters but how
	// the device runs (internal/sys/procs): the threads running Go code in
	// the process now, the crypto workers the device started and the
	// largest batch it seals or opens without them.
	GOMAXPROCS, CryptoWorkers, InlineCrypto uint64
	// GoHeapLive and GoStacks are not the device's either but the
	// process's memory (runtime/metrics): the Go heap found live by the
	// last garbage collection (none is forced), and the goroutine stacks'
	// bytes now. GCCycles counts the collections done, so that a reader
	// can tell whether one ran since it last looked. GoGoroutines is
	// the goroutines alive now. All from internal/sys/gomem.
	GoHeapLive, GoStacks, GCCycles, GoGoroutines uint64
}

// Counters returns the device's counters. It loads atomics and reads the
// process's memory gauges (runtime/metrics, no stop of the world).
func (d *Device) Counters() Counters {
	c := &d.ctr
	out := Counters{
		InitiationsSent:       c.initiationsSent.Load(),
		CompletedInitiator:    c.completedInitiator.Load(),
		CompletedResponder:    c.completedResponder.Load(),
		CookieRepliesSent:     d.cookieRepliesSent.Load(),
		CookieRepliesReceived: d.cookieRepliesReceived.Load(),
		RoutePublications:     c.routePublications.Load(),
		SocketSendErrors:      c.socketSendErrors.Load(),
		SocketReceiveErrors:   c.socketReceiveErrors.Load(),
		TUNWriteErrors:        c.tunWriteErrors.Load(),
		GOMAXPROCS:            uint64(runtime.GOMAXPROCS(0)),
		CryptoWorkers:         uint64(d.cryptoWorkers),
		InlineCrypto:          uint64(max(d.inlineCrypto.Load(), 0)),
	}
	for i := range c.rejected {
		out.Rejected[i] = c.rejected[i].Load()
	}
	for i := range c.dropped {
		out.Dropped[i] = c.dropped[i].Load()
	}
	m := gomem.Read()
	out.GoHeapLive, out.GoStacks, out.GCCycles, out.GoGoroutines = m.HeapLive, m.Stacks, m.GCCycles, m.Goroutines
	return out
}

// Each calls f with every counter under its UAPI key (without the
// "wirelane_" prefix the UAPI writer adds): handshake_initiations_sent,
// handshakes_completed_initiator, handshakes_completed_responder,
// handshakes_rejected_REASON, cookie_replies_sent, cookie_replies_received,
// dropped_REASON, route_publications, socket_send_errors,
// socket_receive_errors, tun_write_errors, and the gauges
// engine_gomaxprocs, engine_crypto_workers, engine_inline_crypto_batch,
// engine_go_heap_live_bytes, engine_go_stack_bytes and engine_go_goroutines,
// and the counter engine_go_gc_cycles.
func (c *Counters) Each(f func(key string, v uint64)) {
	f("handshake_initiations_sent", c.InitiationsSent)
	f("handshakes_completed_initiator", c.CompletedInitiator)
	f("handshakes_completed_responder", c.CompletedResponder)
	for i, v := range c.Rejected {
		f("handshakes_rejected_"+rejectNames[i], v)
	}
	f("cookie_replies_sent", c.CookieRepliesSent)
	f("cookie_replies_received", c.CookieRepliesReceived)
	for i, v := range c.Dropped {
		f("dropped_"+dropNames[i], v)
	}
	f("route_publications", c.RoutePublications)
	f("socket_send_errors", c.SocketSendErrors)
	f("socket_receive_errors", c.SocketReceiveErrors)
	f("tun_write_errors", c.TUNWriteErrors)
	f("engine_gomaxprocs", c.GOMAXPROCS)
	f("engine_crypto_workers", c.CryptoWorkers)
	f("engine_inline_crypto_batch", c.InlineCrypto)
	f("engine_go_heap_live_bytes", c.GoHeapLive)
	f("engine_go_stack_bytes", c.GoStacks)
	f("engine_go_gc_cycles", c.GCCycles)
	f("engine_go_goroutines", c.GoGoroutines)
}

// DropReasons lists the drop reasons' label names, in DropReason order.
func DropReasons() []string { return append([]string(nil), dropNames[:]...) }

// RejectReasons lists the reject reasons' label names, in RejectReason
// order.
func RejectReasons() []string { return append([]string(nil), rejectNames[:]...) }

// drop counts n packets dropped for reason r (n may be 0).
func (d *Device) drop(r DropReason, n int) {
	if n > 0 {
		d.ctr.dropped[r].Add(uint64(n))
	}
}

// reject counts one handshake message rejected for reason r.
func (d *Device) reject(r RejectReason) { d.ctr.rejected[r].Add(1) }

// rejectN counts n handshake messages rejected for reason r (the receive
// path sums a batch's first).
func (d *Device) rejectN(r RejectReason, n uint64) { add(&d.ctr.rejected[r], n) }

// add adds n to c when n is not zero (no atomic operation otherwise).
func add(c *atomic.Uint64, n uint64) {
	if n != 0 {
		c.Add(n)
	}
}

// CounterWriter is a StatusWriter that also takes the device's counters;
// WriteStatus hands them over right after Device when w implements it.
type CounterWriter interface {
	Counters(Counters) error
}
