// Package conn is Wirelane's UDP transport: batched sockets, sticky source
// addresses, UDP GSO/GRO, and the per-peer route cache that the send path
// borrows without taking a lock (the "noref" send path).
//
// The contract between the protocol engine (device/) and the transport:
//
//	device                           conn
//	------                           ----
//	peer.routes  RouteCache   --->   one atomic.Pointer[Route] per peer
//	send worker  rcu.Reader   --->   read section around one batch
//	             Bind.Send(bufs, route)   (route is borrowed, never stored)
//	receive      ReceiveFunc  <---   batches of (buf, size, Endpoint)
//	roaming      RouteCache.Set(ep) when a batch authenticates from a new
//	             place: at most one publication per batch
//	invalidation StdBind.OnSourceInvalid(hook): hook runs once per event
//
// StdBind (bind_linux.go) is the kernel implementation of Bind; it owns the
// RCU domain (StdBind.RCU) that the device's send goroutines read under and
// that Close waits on. The conventional locked path that the borrowed route
// is measured against is the device's (device/refmode.go), not part of this
// package. docs/noref-send-path.md explains the design and its invariants.
//
// Endpoints are values (netip types); nothing on the receive path allocates
// per datagram.
package conn

import (
	"errors"
	"net/netip"
)

// IdealBatchSize is the largest number of datagrams moved by one
// ReceiveFunc call or one Bind.Send call.
const IdealBatchSize = 128

// Endpoint is a peer's remote address together with the local (sticky)
// source address a datagram from it arrived on. It is a comparable value:
// two Endpoints are the same place exactly when they are ==.
type Endpoint struct {
	// Dst is the remote address and port.
	Dst netip.AddrPort
	// Src is the local address the last datagram from Dst arrived on; the
	// zero Addr means "let the kernel choose".
	Src netip.Addr
	// SrcIfindex is the interface index Src was seen on (0 = unknown).
	SrcIfindex int32
}

// ReceiveFunc reads at least one datagram into bufs. It returns how many
// elements of bufs, sizes and eps are filled. len(sizes) and len(eps) must be
// at least len(bufs), and len(bufs) must not exceed Bind.BatchSize(). After
// Bind.Close every ReceiveFunc returns net.ErrClosed.
//
// A bind whose caller has allowed it (ViewReceiver) may hand a datagram out
// as a view: bufs[i] replaced by a slice of another of the caller's buffers
// (a segment of a coalesced train, left where it landed). Such a caller
// reads bufs[i][:sizes[i]] before its next call and restores its own
// buffers in bufs before every call.
type ReceiveFunc func(bufs [][]byte, sizes []int, eps []Endpoint) (n int, err error)

// Bind is a UDP listener for IPv4 and IPv6 on one port.
type Bind interface {
	// Open binds the sockets to port (0 = any) and returns one ReceiveFunc
	// per socket and the port actually bound.
	Open(port uint16) (fns []ReceiveFunc, actualPort uint16, err error)
	// Close closes the sockets. It waits for a grace period so that once it
	// returns no Send is still writing to the closed sockets.
	Close() error
	// SetMark sets SO_MARK (fwmark) on the sockets; 0 clears it.
	SetMark(mark uint32) error
	// Send writes bufs as datagrams to r's destination, from r's sticky
	// source when it has one. r is borrowed: Send must not keep it past
	// its return. len(bufs) must not exceed BatchSize().
	Send(bufs [][]byte, r *Route) error
	// BatchSize is the number of buffers the ReceiveFuncs fill at most and
	// the number Send accepts at most.
	BatchSize() int
}

// ViewReceiver is implemented by a Bind that can hand datagrams out as
// views into the caller's buffers instead of copying them (see
// ReceiveFunc). AllowViews(true) before Open lets the ReceiveFuncs of that
// Open do so; a caller that does not restore its buffers before every call
// must not allow it.
type ViewReceiver interface {
	AllowViews(bool)
}

// Sender sends batches of datagrams to borrowed routes. Every Bind is a
// Sender; NewSender gives a goroutine one of its own.
type Sender interface {
	// Send is Bind.Send.
	Send(bufs [][]byte, r *Route) error
}

// NewSender returns a Sender for the calling goroutine's exclusive use and
// the function that releases it (call it once, when the goroutine stops
// sending). A Bind that keeps per-send scratch space (StdBind) hands out a
// Sender whose scratch is its own, so that its sends never touch a shared
// pool and never allocate once the first one has; any other Bind is its
// own Sender.
func NewSender(b Bind) (Sender, func()) {
	if sb, ok := b.(interface{ NewSender() (Sender, func()) }); ok {
		return sb.NewSender()
	}
	return b, func() {}
}

// ErrBindAlreadyOpen is returned by Open on an open Bind.
var ErrBindAlreadyOpen = errors.New("conn: bind is already open")

// StampedReceiveFunc is a ReceiveFunc that also says when each datagram
// reached its socket: arrived[i] is datagram i's kernel receive timestamp
// in Unix nanoseconds (CLOCK_REALTIME, the clock of time.Now), or 0 when it
// has none (timestamps off, see Timestamper). len(arrived) must be at least
// len(bufs). The time a datagram waited in the socket's receive buffer is
// time.Now().UnixNano() - arrived[i].
type StampedReceiveFunc func(bufs [][]byte, sizes []int, eps []Endpoint, arrived []int64) (n int, err error)

// Timestamper is implemented by a Bind whose sockets can stamp received
// datagrams with the time they arrived (kernel receive timestamps), so that
// a caller can tell how long each waited in the socket's buffer.
type Timestamper interface {
	// OpenStamped is Open, returning StampedReceiveFuncs (same sockets,
	// same one-caller-at-a-time rule). Timestamps start off.
	OpenStamped(port uint16) (fns []StampedReceiveFunc, actualPort uint16, err error)
	// SetReceiveTimestamps turns the kernel's receive timestamps on or
	// off on the open sockets. Off, nothing is stamped and the receive
	// path pays nothing for it. A datagram already queued when they were
	// turned on is stamped with the time it is read (age 0). It does
	// nothing on a closed bind.
	SetReceiveTimestamps(on bool) error
}
