// Package uapi speaks WireGuard's cross-platform userspace configuration
// protocol (the one `wg` uses over /var/run/wireguard/NAME.sock): it parses
// set=1 requests into a validated device.Config, writes a device's status
// (device.StatusWriter) as a get=1 answer through a Writer, and serves
// connections that carry several operations.
//
// The text is this package's alone: the device speaks in its own types
// (device.Config, device.Status), and a Handler (a *device.Device or a test
// double) applies configurations and streams state. Parsing is complete
// before anything is applied, so a bad line never leaves a half-applied
// configuration behind.
//
// Files: types.go (the contract, errors), keyhex.go (key encoding),
// parse.go (set=1 parser), writer.go (get=1 answers), serve.go (the
// operation loop), text.go (one operation as a string), listen.go (the
// socket, stale sockets, removal watch).
package uapi

import "github.com/wirelane/wirelane/device"

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

// Handler is the device side of the protocol; *device.Device is one. Serve
// calls it from one goroutine per connection, so it must be safe for
// concurrent use.
type Handler interface {
	// WriteStatus streams the device's state into w: w.Device once, then
	// for each peer w.Peer followed by its w.AllowedIP calls. It returns
	// the first error w reported. Serve writes the errno line and flushes
	// afterwards.
	WriteStatus(w device.StatusWriter) error
	// Configure applies a validated request. Its error is answered with
	// the errno ErrnoOf gives it (for example ErrnoAddrUse for a
	// *device.BindError).
	Configure(c *device.Config) error
}
