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
//	5. on refusal: EIO/EMSGSIZE for a segmented message turns GSO off for
//	   the bind and the rest of the batch is resent unsegmented; a refused
//	   sticky source (EINVAL, ENODEV, EADDRNOTAVAIL, ENETUNREACH) resends
//	   the rest without it and signals the source-invalid hooks; a single
//	   oversized datagram is skipped and reported
//	6. exit the read section, clear the state's pointers (and return a
//	   pooled state to the pool)

import (
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
	err := b.sendWith(st, bufs, r)
	b.pool.Put(st)
	return err
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
	return s.b.sendWith(s.st, bufs, r)
}

func (s *stdSender) release() {
	if s.st != nil {
		s.st.rd.Release()
		s.st = nil
	}
}

// sendWith sends bufs with st's scratch inside st's read section and
// leaves st holding no pointers.
func (b *StdBind) sendWith(st *sendState, bufs [][]byte, r *Route) error {
	st.rd.Enter()
	err := b.send(st, bufs, r)
	st.rd.Exit()
	st.clear()
	return err
}

// send runs inside st's read section.
func (b *StdBind) send(st *sendState, bufs [][]byte, r *Route) error {
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
	gso := s.gso && !b.gsoOff.Load()
	sticky := len(r.ctrl) > 0
	var skipped error
	for start := 0; start < len(bufs); {
		st.build(bufs[start:], r, gso, sticky)
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
		switch e := st.errno; {
		case st.seg[failed] && (e == unix.EIO || e == unix.EMSGSIZE):
			b.gsoOff.Store(true)
			gso = false
		case sticky && isSourceError(e):
			sticky = false
			b.inval.signal()
		case e == unix.EMSGSIZE:
			if skipped == nil {
				skipped = os.NewSyscallError("sendmmsg", e)
			}
			start++ // this one datagram cannot go; the rest can
		default:
			return os.NewSyscallError("sendmmsg", e)
		}
	}
	return skipped
}

// isSourceError reports whether the kernel refused a datagram because of
// its sticky source (address gone, interface gone, no route from it).
func isSourceError(e unix.Errno) bool {
	return e == unix.EINVAL || e == unix.ENODEV || e == unix.EADDRNOTAVAIL || e == unix.ENETUNREACH
}

// build lays bufs out as messages to r.
func (st *sendState) build(bufs [][]byte, r *Route, gso, sticky bool) {
	maxPayload := maxGSOPayload4
	if r.v6 {
		maxPayload = maxGSOPayload6
	}
	m := 0
	for i := 0; i < len(bufs); m++ {
		j := i + 1
		size := len(bufs[i])
		if gso && size > 0 {
			total := size
			for j < len(bufs) && j-i < maxGSOSegments {
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
		h.Name = (*byte)(unsafe.Pointer(&r.sa))
		h.Namelen = r.saLen
		h.Iov = &st.iovs[i]
		h.SetIovlen(j - i)
		h.Flags = 0
		st.seg[m] = j-i > 1
		switch {
		case st.seg[m]:
			c := st.ctrl[m][:]
			n := 0
			if sticky {
				n = copy(c, r.ctrl)
			}
			n += putSegment(c[n:], uint16(size))
			h.Control = &c[0]
			h.SetControllen(n)
		case sticky:
			h.Control = &r.ctrl[0]
			h.SetControllen(len(r.ctrl))
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
