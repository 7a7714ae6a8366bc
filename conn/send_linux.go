package conn

// The send path, for one Send(bufs, route) call:
//
//	1. use the Sender's own sendState (NewSender), or take one from the
//	   bind's pool (Send); its mmsghdr, iovec and control arrays are reused
//	2. enter the state's RCU read section and borrow the published
//	   sockets (one atomic load)
//	3. build messages: every message points at the route's ready-made
//	   sockaddr and sticky-source cmsg; with GSO a run of equal-size
//	   datagrams (the last may be shorter) becomes one message whose
//	   iovecs are the caller's buffers and whose cmsg adds UDP_SEGMENT
//	4. sendmmsg on the raw descriptor; if the socket buffer is full, wait
//	   for space through the runtime poller and go on
//	5. on refusal, the policy of gso_policy.go: GSO off for the bind (EIO)
//	   or for the refused segment size and larger (EMSGSIZE, EINVAL without
//	   a sticky source), the sticky source dropped for the rest of the
//	   batch (hooks signalled), or a single oversized datagram skipped; the
//	   rest of the batch is resent
//
// SendEach is the same path for a batch with a route per datagram (many
// peers on one socket, the OpenVPN server): messages never join datagrams
// of different routes, and the batch is cut where the family changes.
//	6. exit the read section, clear the state's pointers (and return a
//	   pooled state to the pool)

import (
	"errors"
	"net"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/sys/mmsg"
)

// The UDP payload of one segmented message. The protocol would allow up
// to 65,507 bytes (IPv4) and 65,527 (IPv6), but a device takes a GSO packet
// whole only up to its gso_max_size, 65,536 bytes by default, counted with
// the link-layer header: past that the kernel segments it in software
// before the device (on veth, about four times the cost per byte). So a
// message stays that far below 64 KiB, with room for a link header and tags.
const (
	gsoMaxSize     = 1 << 16 // the kernel's default gso_max_size
	linkHeaderRoom = 64      // Ethernet, VLAN tags and the like
	maxGSOPayload4 = gsoMaxSize - linkHeaderRoom - 20 - 8
	maxGSOPayload6 = gsoMaxSize - linkHeaderRoom - 40 - 8
)

// sendState is one sender's scratch space. It is used by one Send at a time.
type sendState struct {
	rd    *Reader // this state's read-section marker in the bind's domain
	hdrs  [IdealBatchSize]mmsg.Hdr
	iovs  [IdealBatchSize]unix.Iovec
	ctrl  [IdealBatchSize][sendCtrlSpace]byte // per-message cmsgs for segmented messages
	end   [IdealBatchSize]uint16              // end[m]: index after message m's last datagram
	seg   [IdealBatchSize]bool                // message m is segmented (UDP_SEGMENT)
	stk   [IdealBatchSize]bool                // message m carries a sticky source
	nmsg  int                                 // messages built
	done  int                                 // messages the kernel took
	errno unix.Errno                          // the refusal that stopped the send, or 0
	write func(fd uintptr) bool               // s.writeMsgs bound once, so the poller path allocates nothing
}

// newSendState returns scratch space with its own reader in d. A pooled
// state (pooled) releases its reader when the pool drops it; a Sender's
// state is released by the Sender's owner.
func newSendState(d *RCU, pooled bool) *sendState {
	s := &sendState{rd: d.NewReader()}
	s.write = s.writeMsgs
	if pooled {
		// A state the pool drops is no longer a reader of the domain.
		runtime.AddCleanup(s, func(rd *Reader) { rd.Release() }, s.rd)
	}
	return s
}

// checkSendArgs validates one Send's arguments; ok is false when there is
// nothing to send.
func checkSendArgs(bufs [][]byte, r *Route) (ok bool, err error) {
	switch {
	case r == nil:
		return false, ErrNoRoute
	case len(bufs) == 0:
		return false, nil
	case len(bufs) > IdealBatchSize:
		return false, ErrBatchTooLarge
	}
	return true, nil
}

// Send writes bufs as datagrams to r's destination from r's sticky source.
// It takes no lock. Its scratch space comes from a pool shared by all
// callers, which allocates now and then (a goroutine landing on an empty
// pool shard, or after collections); a goroutine that sends in a loop
// should take a Sender of its own (NewSender), which never allocates.
func (b *StdBind) Send(bufs [][]byte, r *Route) error {
	if ok, err := checkSendArgs(bufs, r); !ok {
		return err
	}
	st := b.pool.Get().(*sendState)
	err := b.sendWith(st, bufs, r, nil)
	b.pool.Put(st)
	return err
}

// SendEach writes bufs[i] to routes[i], for many peers on one bind in one
// call: consecutive datagrams to the same route (the same *Route, as
// borrowed from one RouteCache) may leave as one segmented message, and
// the batch takes one sendmmsg per address family. The routes are
// borrowed like Send's. Scratch comes from the pool, as for Send; see
// NewSender for a goroutine's own. It returns the first error; the
// datagrams of other families are still sent.
func (b *StdBind) SendEach(bufs [][]byte, routes []*Route) error {
	if ok, err := checkEachArgs(bufs, routes); !ok {
		return err
	}
	st := b.pool.Get().(*sendState)
	err := b.sendWith(st, bufs, nil, routes)
	b.pool.Put(st)
	return err
}

// checkEachArgs validates one SendEach's arguments; ok is false when there
// is nothing to send.
func checkEachArgs(bufs [][]byte, routes []*Route) (ok bool, err error) {
	switch {
	case len(routes) != len(bufs):
		return false, ErrRoutesMismatch
	case len(bufs) == 0:
		return false, nil
	case len(bufs) > IdealBatchSize:
		return false, ErrBatchTooLarge
	}
	for _, r := range routes {
		if r == nil {
			return false, ErrNoRoute
		}
	}
	return true, nil
}

// NewSender returns a Sender whose scratch space belongs to it alone, and
// the function that releases it. The scratch (about 16 KiB) is allocated by
// the first Send, so a Sender that never sends costs almost nothing; after
// that, its sends allocate nothing. The Sender must be used by one goroutine
// at a time, and not after release.
func (b *StdBind) NewSender() (Sender, func()) {
	s := &stdSender{b: b}
	return s, s.release
}

// stdSender is one goroutine's Sender on a StdBind.
type stdSender struct {
	b  *StdBind   // immutable
	st *sendState // nil until the first Send; owned by the using goroutine
}

// Send is StdBind.Send with the sender's own scratch space.
func (s *stdSender) Send(bufs [][]byte, r *Route) error {
	if ok, err := checkSendArgs(bufs, r); !ok {
		return err
	}
	if s.st == nil {
		s.st = newSendState(s.b.rcu, false)
	}
	return s.b.sendWith(s.st, bufs, r, nil)
}

// SendEach is StdBind.SendEach with the sender's own scratch space.
func (s *stdSender) SendEach(bufs [][]byte, routes []*Route) error {
	if ok, err := checkEachArgs(bufs, routes); !ok {
		return err
	}
	if s.st == nil {
		s.st = newSendState(s.b.rcu, false)
	}
	return s.b.sendWith(s.st, bufs, nil, routes)
}

func (s *stdSender) release() {
	if s.st != nil {
		s.st.rd.Release()
		s.st = nil
	}
}

// sendWith sends bufs with st's scratch inside st's read section and
// leaves st holding no pointers. routes is nil (every datagram to r) or
// one route per datagram (r unused).
func (b *StdBind) sendWith(st *sendState, bufs [][]byte, r *Route, routes []*Route) error {
	st.rd.Enter()
	var err error
	if routes == nil {
		err = b.send(st, bufs, r, nil)
	} else {
		err = b.sendEach(st, bufs, routes)
	}
	st.rd.Exit()
	st.clear()
	return err
}

// sendEach runs inside st's read section: it cuts bufs into runs whose
// routes share an address family (one socket each) and sends each run.
func (b *StdBind) sendEach(st *sendState, bufs [][]byte, routes []*Route) error {
	var first error
	for start := 0; start < len(bufs); {
		end := start + 1
		for end < len(bufs) && routes[end].v6 == routes[start].v6 {
			end++
		}
		err := b.send(st, bufs[start:end], routes[start], routes[start:end])
		st.clear()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			if first == nil {
				first = err
			}
		}
		start = end
	}
	return first
}

// send runs inside st's read section. Every datagram goes to r when routes
// is nil, else bufs[i] to routes[i] (all of r's family).
func (b *StdBind) send(st *sendState, bufs [][]byte, r *Route, routes []*Route) error {
	s := b.socks.Load()
	if s == nil {
		return net.ErrClosed
	}
	u := s.v4
	if r.v6 {
		u = s.v6
	}
	if u == nil {
		return ErrFamilyUnavailable
	}
	segMax := int64(0)
	if s.gso {
		segMax = b.segMax.Load()
	}
	sticky := true // routes' sticky sources are used until one is refused
	var skipped error
	for start := 0; start < len(bufs); {
		var rs []*Route
		if routes != nil {
			rs = routes[start:]
		}
		st.build(bufs[start:], r, rs, segMax, sticky)
		if err := st.transmit(u); err != nil {
			if b.socks.Load() == nil {
				return net.ErrClosed
			}
			return err
		}
		if st.errno == 0 {
			break
		}
		// Messages before st.done went out; resume at the refused one.
		failed := st.done
		if failed > 0 {
			start += int(st.end[failed-1])
		}
		switch classifyRefusal(st.errno, st.seg[failed], st.stk[failed]) {
		case refuseGSOOff:
			b.segMax.Store(0)
			segMax = 0
		case refuseSegSize:
			size := int64(len(bufs[start]))
			b.lowerSegMax(size)
			segMax = min(segMax, size)
		case refuseSource:
			sticky = false
			b.inval.signal()
		case refuseSkip:
			if skipped == nil {
				skipped = os.NewSyscallError("sendmmsg", st.errno)
			}
			start++ // this one datagram cannot go; the rest can
		default:
			return os.NewSyscallError("sendmmsg", st.errno)
		}
	}
	return skipped
}

// build lays bufs out as messages: to r when routes is nil, else bufs[i]
// to routes[i]. Datagrams to one route (the same *Route) may join a
// segmented message when GSO is on for their size (below segMax); a
// message carries its route's sticky source when sticky allows.
func (st *sendState) build(bufs [][]byte, r *Route, routes []*Route, segMax int64, sticky bool) {
	maxPayload := maxGSOPayload4
	if r.v6 {
		maxPayload = maxGSOPayload6
	}
	m := 0
	for i := 0; i < len(bufs); m++ {
		rt := r
		if routes != nil {
			rt = routes[i]
		}
		j := i + 1
		size := len(bufs[i])
		if size > 0 && int64(size) < segMax {
			total := size
			for j < len(bufs) && j-i < maxGSOSegments && (routes == nil || routes[j] == rt) {
				l := len(bufs[j])
				if l == 0 || l > size || total+l > maxPayload {
					break
				}
				total += l
				j++
				if l < size {
					break // a shorter datagram ends a run
				}
			}
		}
		for k := i; k < j; k++ {
			v := &st.iovs[k]
			if len(bufs[k]) > 0 {
				v.Base = &bufs[k][0]
			} else {
				v.Base = nil
			}
			v.SetLen(len(bufs[k]))
		}
		h := &st.hdrs[m].Hdr
		h.Name = (*byte)(unsafe.Pointer(&rt.sa))
		h.Namelen = rt.saLen
		h.Iov = &st.iovs[i]
		h.SetIovlen(j - i)
		h.Flags = 0
		st.seg[m] = j-i > 1
		st.stk[m] = sticky && len(rt.ctrl) > 0
		switch {
		case st.seg[m]:
			c := st.ctrl[m][:]
			n := 0
			if st.stk[m] {
				n = copy(c, rt.ctrl)
			}
			n += putSegment(c[n:], uint16(size))
			h.Control = &c[0]
			h.SetControllen(n)
		case st.stk[m]:
			h.Control = &rt.ctrl[0]
			h.SetControllen(len(rt.ctrl))
		default:
			h.Control = nil
			h.SetControllen(0)
		}
		st.end[m] = uint16(j)
		i = j
	}
	st.nmsg = m
}

// transmit sends the built messages. It returns a non-nil error only when
// the socket itself failed (closed); a kernel refusal of one message is left
// in st.errno with st.done messages sent before it.
func (st *sendState) transmit(u *udpSocket) error {
	st.done, st.errno = 0, 0
	for st.done < st.nmsg {
		n, e := mmsg.Send(u.fd, st.hdrs[st.done:st.nmsg])
		switch e {
		case 0:
			st.done += n
		case unix.EINTR:
		case unix.EAGAIN:
			// Socket buffer full: let the poller wait for space.
			if err := u.rc.Write(st.write); err != nil {
				return err
			}
			return nil
		default:
			st.errno = e
			return nil
		}
	}
	return nil
}

// writeMsgs is transmit's body for the poller (RawConn.Write): false means
// "wait until writable and call again".
func (st *sendState) writeMsgs(fd uintptr) bool {
	for st.done < st.nmsg {
		n, e := mmsg.Send(int(fd), st.hdrs[st.done:st.nmsg])
		switch e {
		case 0:
			st.done += n
		case unix.EINTR:
		case unix.EAGAIN:
			return false
		default:
			st.errno = e
			return true
		}
	}
	return true
}

// clear drops the state's pointers to the caller's buffers and the route,
// so a pooled state keeps nothing alive.
func (st *sendState) clear() {
	for m := 0; m < st.nmsg; m++ {
		h := &st.hdrs[m].Hdr
		h.Name, h.Iov, h.Control = nil, nil, nil
	}
	if st.nmsg > 0 {
		last := int(st.end[st.nmsg-1])
		for k := 0; k < last; k++ {
			st.iovs[k].Base = nil
		}
	}
	st.nmsg = 0
}
