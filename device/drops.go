package device

import "sync/atomic"

// Drops counts what a device threw away, by reason, since it was created.
// Senders that are not peers drive most of these numbers, so they are
// counted rather than logged: a flood of junk costs one counter update per
// received batch, never a log line per datagram.
type Drops struct {
	// Junk: datagrams of no known message type, or of the wrong size for
	// their type.
	Junk uint64
	// UnknownIndex: transport messages whose receiver index names no
	// session (stale, or forged).
	UnknownIndex uint64
	// NoBuffer: transport messages larger than the MTU-sized buffers
	// (from a peer with a larger MTU) dropped because every large buffer
	// was in use; the device never allocates beyond its budget of them.
	NoBuffer uint64
	// Unauthenticated: transport messages whose tag did not verify
	// (corrupted or forged).
	Unauthenticated uint64
	// Replayed: transport messages outside the replay window, seen
	// before, or past a session's message or age limit.
	Replayed uint64
	// NotAllowed: authenticated packets whose inner packet is malformed or
	// whose source is not in the peer's allowed IPs (crypto-routing).
	NotAllowed uint64
	// HandshakeQueueFull: handshake messages dropped because the
	// handshake queue (and its free list) was full.
	HandshakeQueueFull uint64
	// BadMAC1: handshake messages whose mac1 did not verify.
	BadMAC1 uint64
	// RateLimited: handshake messages over their source's budget while
	// under load.
	RateLimited uint64
	// HandshakeRejected: handshake messages with a valid mac1 that could
	// not be consumed (an unknown key, a replayed timestamp, an
	// initiation too soon after the last, no matching initiation).
	HandshakeRejected uint64
	// CookieRepliesSent: initiations and responses answered with a
	// cookie reply (under load, without a valid mac2) instead of work.
	CookieRepliesSent uint64
}

// dropCounters is the device's live copy of Drops. The receive path
// counts in locals and adds once per batch, only when non-zero.
type dropCounters struct {
	junk, unknownIndex, noBuffer                         atomic.Uint64
	unauthenticated, replayed, notAllowed                atomic.Uint64
	handshakeQueueFull, badMAC1, rateLimited, hsRejected atomic.Uint64
}

// add adds n to c when n is not zero (no atomic operation otherwise).
func add(c *atomic.Uint64, n uint64) {
	if n != 0 {
		c.Add(n)
	}
}

// Drops returns the device's drop counters.
func (d *Device) Drops() Drops {
	c := &d.drops
	return Drops{
		Junk:               c.junk.Load(),
		UnknownIndex:       c.unknownIndex.Load(),
		NoBuffer:           c.noBuffer.Load(),
		Unauthenticated:    c.unauthenticated.Load(),
		Replayed:           c.replayed.Load(),
		NotAllowed:         c.notAllowed.Load(),
		HandshakeQueueFull: c.handshakeQueueFull.Load(),
		BadMAC1:            c.badMAC1.Load(),
		RateLimited:        c.rateLimited.Load(),
		HandshakeRejected:  c.hsRejected.Load(),
		CookieRepliesSent:  d.cookieRepliesSent.Load(),
	}
}
