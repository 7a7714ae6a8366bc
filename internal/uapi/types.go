// Package uapi speaks WireGuard's cross-platform userspace configuration
// protocol (the one `wg` uses over /var/run/wireguard/NAME.sock): it parses
// set=1 requests into a validated SetRequest, streams get=1 answers through a
// Writer, and serves connections that carry several operations.
//
// The package knows nothing of the device: a Handler applies requests and
// streams state. Parsing is complete before anything is applied, so a bad
// line never leaves a half-applied configuration behind.
package uapi

import (
	"net/netip"
	"time"
)

// Key is a 32-byte Curve25519 or preshared key as carried on the wire
// (64 lowercase hex characters).
type Key [32]byte

// Errno is a UAPI error number; the server answers errno=-N... as the
// reference implementations do (see the constants).
type Errno int64

// Error numbers answered by the server (negated on the wire).
const (
	ErrnoInvalid  Errno = 22 // EINVAL: a malformed or unknown line
	ErrnoAddrUse  Errno = 98 // EADDRINUSE: listen_port or fwmark could not be set
	ErrnoIO       Errno = 5  // EIO: the device failed
	ErrnoProtocol Errno = 71 // EPROTO: unknown operation
	ErrnoOther    Errno = 55 // ENOBUFS-like catch-all used by the reference
)

// Error is a UAPI failure: an errno for the wire and a message (with the
// line number for parse errors) for logs. Messages never contain key material.
type Error struct {
	Errno Errno
	Line  int // 1-based line of the request, 0 when not tied to a line
	Msg   string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return "uapi: line " + itoa(e.Line) + ": " + e.Msg
	}
	return "uapi: " + e.Msg
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}

// SetRequest is one validated set=1 operation. Nil pointer fields were not
// present in the request.
type SetRequest struct {
	PrivateKey   *Key    // all zeros clears the key
	ListenPort   *uint16 // 0 = random
	FwMark       *uint32 // 0 = off
	ReplacePeers bool
	Peers        []PeerRequest // in request order
}

// PeerRequest is the part of a set=1 operation that follows one public_key.
type PeerRequest struct {
	PublicKey           Key
	Remove              bool
	UpdateOnly          bool
	PresharedKey        *Key // all zeros = none
	Endpoint            *netip.AddrPort
	PersistentKeepalive *uint16 // seconds, 0 = off
	ReplaceAllowedIPs   bool
	// AllowedIPs lists additions and removals in request order.
	AllowedIPs []AllowedIPChange
}

// AllowedIPChange adds (Remove false) or removes one allowed-IPs prefix.
type AllowedIPChange struct {
	Prefix netip.Prefix // masked
	Remove bool
}

// DeviceInfo is the device part of a get=1 answer.
type DeviceInfo struct {
	PrivateKey Key // zero = none (then omitted)
	ListenPort uint16
	FwMark     uint32 // omitted when 0
}

// PeerInfo is one peer of a get=1 answer, without its allowed IPs (those are
// streamed one by one through Writer.AllowedIP).
type PeerInfo struct {
	PublicKey           Key
	PresharedKey        Key // zero = none
	Endpoint            netip.AddrPort // invalid = none
	LastHandshake       time.Time      // zero = never
	TxBytes, RxBytes    uint64
	PersistentKeepalive uint16
}

// Handler is the device side of the protocol.
type Handler interface {
	// Get streams the device's state into w: w.Device once, then for each
	// peer w.Peer followed by its w.AllowedIP calls. It returns the first
	// error w reported.
	Get(w *Writer) error
	// Set applies a validated request. It returns an *Error for failures
	// the client should see (for example ErrnoAddrUse).
	Set(req *SetRequest) error
}
