package conn

// StdBind: the kernel UDP transport.
//
// Pipeline map (one StdBind, two sockets on one port):
//
//	Open ──> udp4 socket ─┬─ ReceiveFunc: recvmmsg into the caller's buffers
//	         udp6 socket ─┘   -> sockaddr + PKTINFO parsed into Endpoint values
//	                          -> UDP GRO trains split in place (receive_linux.go)
//	Send(bufs, route) ──> the Sender's own sendState, or a pooled one
//	                      (own RCU reader, own mmsghdrs)
//	                      -> runs of equal sizes become UDP_SEGMENT messages
//	                      -> sendmmsg on the raw fd with the route's sockaddr
//	                         and sticky-source cmsg (send_linux.go)
//	netlink ──> address/route events ──> coalesced source-invalid hooks
//	            (sources_linux.go)
//	Close ──> unpublish sockets -> RCU grace period -> close
//
// Send takes no lock and allocates nothing: the sockets are published in
// an atomic pointer and borrowed like routes, and the grace period in
// Close (not a per-send reference on the file descriptor) is what keeps a
// Send from writing to a closed or reused descriptor.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Errors returned by StdBind.
var (
	// ErrNoRoute is returned by Send when given a nil route.
	ErrNoRoute = errors.New("conn: send without a route")
	// ErrBatchTooLarge is returned by Send when given more than
	// IdealBatchSize buffers.
	ErrBatchTooLarge = errors.New("conn: batch larger than IdealBatchSize")
	// ErrFamilyUnavailable is returned by Send for a destination whose
	// address family has no socket (IPv6 disabled on the host).
	ErrFamilyUnavailable = errors.New("conn: no socket for the destination's address family")
	// ErrRoutesMismatch is returned by SendEach when bufs and routes
	// differ in length.
	ErrRoutesMismatch = errors.New("conn: SendEach with a route count unlike the buffer count")
	// ErrShortSlices is returned by a ReceiveFunc whose sizes or eps slice
	// is shorter than bufs.
	ErrShortSlices = errors.New("conn: sizes or eps shorter than bufs")
)

const (
	// socketBufferSize is asked for SO_RCVBUF and SO_SNDBUF (the FORCE
	// variants first, which work with CAP_NET_ADMIN).
	socketBufferSize = 7 << 20
	// maxGSOSegments is the most datagrams one UDP_SEGMENT send may carry
	// (the kernel's UDP_MAX_SEGMENTS on older kernels).
	maxGSOSegments = 64
	// maxGROSegments is the most datagrams the kernel coalesces into one
	// received UDP GRO message (UDP_GRO_CNT_MAX).
	maxGROSegments = 64
	// groBufferSize is the smallest receive buffer that holds any
	// coalesced message; with smaller buffers GRO is turned off.
	groBufferSize = 1<<16 - 1
	// sourceQuiet is how long the source watcher waits for an event's
	// burst of netlink messages to end before it runs the hooks once.
	sourceQuiet = 15 * time.Millisecond
)

// Options tunes a StdBind. The zero value is the default: every offload the
// kernel supports, the netlink source watcher on, and an RCU domain owned by
// the bind.
type Options struct {
	// DisableGSO never sends UDP_SEGMENT messages.
	DisableGSO bool
	// DisableGRO never turns UDP_GRO on.
	DisableGRO bool
	// DisableSourceWatch runs no netlink listener; source-invalid hooks
	// then run only after sends that the kernel refused for their source.
	DisableSourceWatch bool
	// RCU is the domain Close waits on and that RCU() returns; nil makes
	// the bind create its own.
	RCU *RCU
	// Addr is the local address to bind. The zero Addr binds an IPv4 and
	// an IPv6 socket to every address; an IPv4 address (or the IPv4
	// wildcard 0.0.0.0) binds one IPv4 socket, an IPv6 address (or ::)
	// one IPv6-only socket. A server that listens on one address of a
	// multi-homed host sets it.
	Addr netip.Addr
}

// StdBind is the kernel UDP Bind: one IPv4 and (when the host has IPv6) one
// IPv6 socket on the same port, batched with recvmmsg/sendmmsg, sticky
// source addresses via IP_PKTINFO / IPV6_PKTINFO, UDP GSO on send and UDP
// GRO on receive when the kernel supports them.
//
// RCU ownership: the bind owns (or is given, Options.RCU) one RCU domain.
// Send enters a read section of it on its own (each pooled send state has a
// Reader), so Close's grace period covers every Send whatever the caller
// does. The device should use the same domain, via RCU(), for its route
// read sections and Synchronize calls: one domain, one kind of grace period.
type StdBind struct {
	opts  Options // immutable
	rcu   *RCU    // immutable
	inval *invalidator

	views atomic.Bool             // ReceiveFuncs of the next Open may hand out views (AllowViews)
	socks atomic.Pointer[sockets] // published by Open, cleared by Close; borrowed by Send inside a read section
	// segMax: segments of this size or more are sent singly (the kernel
	// refused them segmented); noSegLimit until a refusal, 0 once GSO is
	// off for the bind. Only lowered while open (gso_policy.go); reset by
	// Open.
	segMax atomic.Int64
	pool   sync.Pool // *sendState

	mu     sync.Mutex // serialises Open, Close and SetMark
	opened *sockets   // guarded by mu; the same pointer as socks while open
	mark   uint32     // guarded by mu
}

// sockets is what one Open made. Immutable once published, except the
// per-socket GRO flag.
type sockets struct {
	v4, v6 *udpSocket // nil when the family is unavailable
	port   uint16
	gso    bool // the kernel accepts UDP_SEGMENT
	watch  *sourceWatch
}

// udpSocket is one bound UDP socket.
type udpSocket struct {
	conn *net.UDPConn
	rc   syscall.RawConn
	fd   int // the descriptor; used raw by Send only inside a read section while the socket is published
	v6   bool
	gro  atomic.Bool // UDP_GRO is on; cleared once if the caller's buffers are too small for it
}

var _ Bind = (*StdBind)(nil)

// NewStdBind returns a closed StdBind with default Options.
func NewStdBind() *StdBind { return NewStdBindOptions(Options{}) }

// NewStdBindOptions returns a closed StdBind tuned by opts.
func NewStdBindOptions(opts Options) *StdBind {
	b := &StdBind{opts: opts, rcu: opts.RCU}
	if b.rcu == nil {
		b.rcu = new(RCU)
	}
	b.inval = newInvalidator()
	b.pool.New = func() any { return newSendState(b.rcu, true) }
	return b
}

// AllowViews lets the ReceiveFuncs of later Opens hand the segments of a
// coalesced (GRO) train out as views into the buffer it landed in, instead
// of copying each into a buffer of its own (see ReceiveFunc).
func (b *StdBind) AllowViews(on bool) { b.views.Store(on) }

var _ ViewReceiver = (*StdBind)(nil)

// RCU returns the bind's RCU domain. Send goroutines of the device take
// their Readers from it, and writers of routes Synchronize on it.
func (b *StdBind) RCU() *RCU { return b.rcu }

// OnSourceInvalid registers fn to run once per event that may have made
// sticky source addresses invalid: a netlink address or route change (a
// burst of messages for one change counts once), or a send the kernel
// refused because of its source. The device's hook clears the sticky
// sources of its peers' RouteCaches (RouteCache.ClearSrc), so each event
// costs one rebuild per peer, never one per packet. Hooks run one at a time
// on the bind's watcher goroutine and must not block for long. The
// returned function unregisters fn.
func (b *StdBind) OnSourceInvalid(fn func()) (remove func()) {
	return b.inval.add(fn)
}

// BatchSize returns IdealBatchSize.
func (b *StdBind) BatchSize() int { return IdealBatchSize }

// Offload reports which offloads the open bind uses right now: gso is false
// once a segmented send was refused (for some segment size, or for all);
// gro is true when any socket has UDP_GRO on.
func (b *StdBind) Offload() (gso, gro bool) {
	s := b.socks.Load()
	if s == nil {
		return false, false
	}
	gso = s.gso && b.segMax.Load() == noSegLimit
	for _, u := range []*udpSocket{s.v4, s.v6} {
		if u != nil && u.gro.Load() {
			gro = true
		}
	}
	return gso, gro
}

// Open binds an IPv4 and an IPv6 socket to port (0 picks one free for
// both), or the one socket of Options.Addr, and returns one ReceiveFunc
// per socket. IPv6 is skipped when the host has it disabled. Each ReceiveFunc must be called by one goroutine at
// a time; a datagram it could not read whole (truncated, or with an
// unreadable address) is reported with size 0.
func (b *StdBind) Open(port uint16) ([]ReceiveFunc, uint16, error) {
	rss, actual, err := b.open(port)
	if err != nil {
		return nil, 0, err
	}
	fns := make([]ReceiveFunc, len(rss))
	for i, rs := range rss {
		fns[i] = rs.receive
	}
	return fns, actual, nil
}

// open is Open, returning each socket's receive state.
func (b *StdBind) open(port uint16) ([]*recvState, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.opened != nil {
		return nil, 0, ErrBindAlreadyOpen
	}
	tries := 1
	if port == 0 {
		tries = 16
	}
	var s *sockets
	var err error
	for i := 0; i < tries; i++ {
		s, err = b.listen(port)
		if err == nil || !errors.Is(err, unix.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		return nil, 0, err
	}
	if !b.opts.DisableSourceWatch {
		s.watch, err = watchSources(b.inval.signal)
		if err != nil {
			s.close()
			return nil, 0, fmt.Errorf("conn: open port %d: source watch: %w", port, err)
		}
	}
	b.segMax.Store(noSegLimit)
	b.inval.start()
	var rss []*recvState
	for _, u := range []*udpSocket{s.v4, s.v6} {
		if u != nil {
			rs := newRecvState(u)
			rs.views = b.views.Load()
			rss = append(rss, rs)
		}
	}
	b.opened = s
	b.socks.Store(s)
	return rss, s.port, nil
}

// listen makes the sockets for one Open attempt.
func (b *StdBind) listen(port uint16) (*sockets, error) {
	s := &sockets{gso: !b.opts.DisableGSO}
	if local := b.opts.Addr.Unmap(); local.IsValid() {
		network := "udp6"
		if local.Is4() {
			network = "udp4"
		}
		u, err := b.listenUDP(network, netip.AddrPortFrom(local, port))
		if err != nil {
			return nil, fmt.Errorf("conn: listen %s %s: %w", network, netip.AddrPortFrom(local, port), err)
		}
		if local.Is4() {
			s.v4 = u
		} else {
			s.v6 = u
		}
		s.port = uint16(u.conn.LocalAddr().(*net.UDPAddr).Port)
	} else {
		v4, err := b.listenUDP("udp4", netip.AddrPortFrom(netip.IPv4Unspecified(), port))
		if err != nil {
			return nil, fmt.Errorf("conn: listen udp4 port %d: %w", port, err)
		}
		s.v4 = v4
		s.port = uint16(v4.conn.LocalAddr().(*net.UDPAddr).Port)
		v6, err := b.listenUDP("udp6", netip.AddrPortFrom(netip.IPv6Unspecified(), s.port))
		switch {
		case err == nil:
			s.v6 = v6
		case errors.Is(err, unix.EAFNOSUPPORT) || errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.EPROTONOSUPPORT):
			// IPv6 disabled on this host: IPv4 only.
		default:
			s.close()
			return nil, fmt.Errorf("conn: listen udp6 port %d: %w", s.port, err)
		}
	}
	for _, u := range []*udpSocket{s.v4, s.v6} {
		if u != nil && s.gso && !probeGSO(u) {
			s.gso = false
		}
	}
	return s, nil
}

// LocalAddr returns the address and port the open bind's first socket is
// bound to (the wildcard without Options.Addr), or the zero AddrPort when
// the bind is closed.
func (b *StdBind) LocalAddr() netip.AddrPort {
	s := b.socks.Load()
	if s == nil {
		return netip.AddrPort{}
	}
	u := s.v4
	if u == nil {
		u = s.v6
	}
	ap := u.conn.LocalAddr().(*net.UDPAddr).AddrPort()
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// listenUDP opens one socket with the bind's options set before bind(2).
func (b *StdBind) listenUDP(network string, ap netip.AddrPort) (*udpSocket, error) {
	v6 := network == "udp6"
	mark := b.mark
	var optErr error
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		err := c.Control(func(fd uintptr) {
			optErr = setSocketOptions(int(fd), v6, mark)
		})
		if err != nil {
			return err
		}
		return optErr
	}}
	pc, err := lc.ListenPacket(context.Background(), network, ap.String())
	if err != nil {
		return nil, err
	}
	conn := pc.(*net.UDPConn)
	rc, err := conn.SyscallConn()
	if err != nil {
		conn.Close()
		return nil, err
	}
	u := &udpSocket{conn: conn, rc: rc, v6: v6}
	if err := rc.Control(func(fd uintptr) { u.fd = int(fd) }); err != nil {
		conn.Close()
		return nil, err
	}
	if !b.opts.DisableGRO && unix.SetsockoptInt(u.fd, unix.SOL_UDP, unix.UDP_GRO, 1) == nil {
		u.gro.Store(true)
	}
	return u, nil
}

// setSocketOptions sets buffer sizes, the fwmark and source-address
// reporting on a fresh socket.
func setSocketOptions(fd int, v6 bool, mark uint32) error {
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[0], socketBufferSize) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, o[1], socketBufferSize) // capped by net.core.*mem_max; best effort
		}
	}
	if mark != 0 {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_MARK, int(mark)); err != nil {
			return fmt.Errorf("SO_MARK %d: %w", mark, err)
		}
	}
	if v6 {
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1); err != nil {
			return fmt.Errorf("IPV6_RECVPKTINFO: %w", err)
		}
		return nil
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1); err != nil {
		return fmt.Errorf("IP_PKTINFO: %w", err)
	}
	return nil
}

// probeGSO reports whether the kernel knows UDP_SEGMENT on u.
func probeGSO(u *udpSocket) bool {
	_, err := unix.GetsockoptInt(u.fd, unix.SOL_UDP, unix.UDP_SEGMENT)
	return err == nil
}

// SetMark sets SO_MARK on the open sockets and remembers it for later
// Opens; 0 clears it. It needs CAP_NET_ADMIN.
func (b *StdBind) SetMark(mark uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.opened; s != nil {
		for _, u := range []*udpSocket{s.v4, s.v6} {
			if u == nil {
				continue
			}
			var serr error
			if err := u.rc.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark))
			}); err != nil {
				return fmt.Errorf("conn: set mark %d: %w", mark, err)
			}
			if serr != nil {
				return fmt.Errorf("conn: set mark %d: %w", mark, os.NewSyscallError("setsockopt SO_MARK", serr))
			}
		}
	}
	b.mark = mark
	// Marks change the routing decision, so learned sources may be stale.
	b.inval.signal()
	return nil
}

// Close unpublishes the sockets, waits for a grace period of the bind's RCU
// domain so that no Send is still writing, then closes them. Once Close
// returns, Send returns net.ErrClosed and every ReceiveFunc returns
// net.ErrClosed. Closing a closed bind does nothing. Close must not be
// called inside a read section of the bind's domain (it would wait for
// itself).
func (b *StdBind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.opened
	if s == nil {
		return nil
	}
	b.opened = nil
	b.socks.Store(nil)
	// A Send parked waiting for socket buffer space wakes with a deadline
	// error instead of holding the grace period up.
	for _, u := range []*udpSocket{s.v4, s.v6} {
		if u != nil {
			_ = u.conn.SetWriteDeadline(time.Unix(1, 0))
		}
	}
	b.rcu.Synchronize()
	b.inval.stop()
	return s.close()
}

// close closes everything one Open made.
func (s *sockets) close() error {
	var first error
	if s.watch != nil {
		s.watch.close()
	}
	for _, u := range []*udpSocket{s.v4, s.v6} {
		if u != nil {
			if err := u.conn.Close(); err != nil && first == nil {
				first = err
			}
		}
	}
	runtime.KeepAlive(s)
	return first
}
