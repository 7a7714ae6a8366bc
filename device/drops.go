package device

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
	// HandshakeStale: handshake messages dropped unread under load
	// because they waited in the socket's buffer longer than
	// StaleHandshakeAge.
	HandshakeStale uint64
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

// Drops returns the device's drop counters: a view of Counters by the
// attack each number shows.
func (d *Device) Drops() Drops {
	c := d.Counters()
	return Drops{
		Junk:               c.Dropped[DropMalformed],
		UnknownIndex:       c.Dropped[DropUnknownIndex],
		NoBuffer:           c.Dropped[DropNoBuffer],
		Unauthenticated:    c.Dropped[DropDecrypt],
		Replayed:           c.Dropped[DropReplay] + c.Dropped[DropExpired],
		NotAllowed:         c.Dropped[DropNotAllowed],
		HandshakeQueueFull: c.Dropped[DropHandshakeQueue],
		HandshakeStale:     c.Dropped[DropHandshakeStale],
		BadMAC1:            c.Rejected[RejectMAC1],
		RateLimited:        c.Rejected[RejectRateLimit],
		HandshakeRejected:  c.Rejected[RejectInvalid] + c.Rejected[RejectStale],
		CookieRepliesSent:  c.CookieRepliesSent,
	}
}
