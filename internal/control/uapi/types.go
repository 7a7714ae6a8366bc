// Package uapi speaks WireGuard's cross-platform userspace configuration
// protocol (the one `wg` uses over /var/run/wireguard/NAME.sock): it parses
// set=1 requests into a validated SetRequest, streams get=1 answers through a
// Writer, and serves connections that carry several operations.
//
// The package knows nothing of the device: a Handler applies requests and
// streams state. Parsing is complete before anything is applied, so a bad
// line never leaves a half-applied configuration behind.
//
// Files: types.go (the contract), keyhex.go (key encoding), parse.go (set=1
// parser), writer.go (get=1 answers), serve.go (the operation loop),
// listen.go (the socket, stale sockets, removal watch).
package uapi

import (
	"fmt"
	"net/netip"
	"time"
)

// Key is a 32-byte Curve25519 or preshared key as carried on the wire
// (64 hexadecimal characters; written lowercase, read in either case).
//
// A Key formats as a fixed placeholder with every fmt verb, so that a
// SetRequest or PeerInfo printed by mistake never leaks key material.
type Key [32]byte

// IsZero reports whether k is all zeros (the wire's "no key"). It takes the
// same time whatever the key holds.
func (k Key) IsZero() bool {
	var acc byte
	for _, b := range k {
		acc |= b
	}
	return acc == 0
}

// Format prints a placeholder instead of the key's bytes.
func (k Key) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte("[key]")) }

// Errno is a UAPI error number. The server answers errno=-N on the wire, as
// the reference implementations do; Errno holds the positive N.
type Errno int64

// Error numbers answered by the server (negated on the wire). They are the
// Linux errno values the reference implementations use.
const (
	ErrnoInvalid  Errno = 22 // EINVAL: a malformed value, an unknown or misplaced key
	ErrnoAddrUse  Errno = 98 // EADDRINUSE: listen_port or fwmark could not be set
	ErrnoIO       Errno = 5  // EIO: the device failed, or the request could not be read
	ErrnoProtocol Errno = 71 // EPROTO: unknown operation, or a line without '='
	ErrnoOther    Errno = 55 // ENOANO: the catch-all the reference uses for other failures
)

// Error is a UAPI failure: an errno for the wire and a message (with the
// line number for parse errors) for logs. Messages never contain key material.
type Error struct {
	Errno Errno
	Line  int // 1-based line of the request (the line after set=1 is 1), 0 when not tied to a line
	Msg   string
}

// Error returns "uapi: line N: message" (or "uapi: message" when the error
// is not tied to a line).
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
// present in the request. When a key appears twice, the last value wins.
type SetRequest struct {
	PrivateKey   *Key    // all zeros clears the key
	ListenPort   *uint16 // 0 = random
	FwMark       *uint32 // 0 = off
	ReplacePeers bool
	Peers        []PeerRequest // in request order; one entry per public_key line
}

// PeerRequest is the part of a set=1 operation that follows one public_key.
// A public key that appears twice yields two entries, applied in order.
type PeerRequest struct {
	PublicKey           Key
	Remove              bool
	UpdateOnly          bool
	PresharedKey        *Key // all zeros = none
	Endpoint            *netip.AddrPort
	PersistentKeepalive *uint16 // seconds, 0 = off
	// ReplaceAllowedIPs asks to drop the peer's allowed IPs before applying
	// AllowedIPs. The parser has already discarded the allowed_ip lines
	// that preceded replace_allowed_ips, so applying "replace, then
	// AllowedIPs in order" gives the reference's line-by-line result.
	ReplaceAllowedIPs bool
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
	PrivateKey Key    // zero = none (then omitted)
	ListenPort uint16 // omitted when 0, as the reference does
	FwMark     uint32 // omitted when 0
}

// PeerInfo is one peer of a get=1 answer, without its allowed IPs (those are
// streamed one by one through Writer.AllowedIP).
type PeerInfo struct {
	PublicKey           Key
	PresharedKey        Key            // zero = none (written as zeros)
	Endpoint            netip.AddrPort // invalid = none (then omitted)
	LastHandshake       time.Time      // zero = never (written as 0 and 0)
	TxBytes, RxBytes    uint64
	PersistentKeepalive uint16
}

// Handler is the device side of the protocol. Serve calls it from one
// goroutine per connection, so it must be safe for concurrent use.
type Handler interface {
	// Get streams the device's state into w: w.Device once, then for each
	// peer w.Peer followed by its w.AllowedIP calls. It returns the first
	// error w reported. Serve writes the errno line and flushes afterwards.
	Get(w *Writer) error
	// Set applies a validated request. It returns an *Error for failures
	// the client should see (for example ErrnoAddrUse); any other error is
	// answered as ErrnoOther.
	Set(req *SetRequest) error
}
