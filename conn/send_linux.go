package conn

// The send path, for one Send(bufs, route) call:
//
//	1. take a sendState from the bind's pool (per-P; its mmsghdr, iovec
//	   and control arrays are reused, so nothing is allocated)
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
//	6. exit the read section, clear the state's pointers, return it

import (
	"net"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	maxGSOPayload4 = 1<<16 - 1 - 20 - 8 // IPv4 total length minus headers
	maxGSOPayload6 = 1<<16 - 1 - 8      // IPv6 payload length minus the UDP header
)

// sendState is one sender's scratch space. It is used by one Send at a time.
type sendState struct {
	rd    *Reader // this state's read-section marker in the bind's domain
	hdrs  [IdealBatchSize]mmsghdr
	iovs  [IdealBatchSize]unix.Iovec
	ctrl  [IdealBatchSize][sendCtrlSpace]byte // per-message cmsgs for segmented messages
	end   [IdealBatchSize]uint16              // end[m]: index after message m's last datagram
	seg   [IdealBatchSize]bool                // message m is segmented (UDP_SEGMENT)
	nmsg  int                                 // messages built
	done  int                                 // messages the kernel took
	errno unix.Errno                          // the refusal that stopped the send, or 0
	write func(fd uintptr) bool               // s.writeMsgs bound once, so the poller path allocates nothing
}

func newSendState(d *RCU) *sendState {
	s := &sendState{rd: d.NewReader()}
	s.write = s.writeMsgs
	// A state the pool drops is no longer a reader of the domain.
	runtime.AddCleanup(s, func(rd *Reader) { rd.Release() }, s.rd)
	return s
}

// Send writes bufs as datagrams to r's destination from r's sticky source.
// It takes no lock and, on the success path, allocates nothing.
func (b *StdBind) Send(bufs [][]byte, r *Route) error {
	if r == nil {
		return ErrNoRoute
	}
	if len(bufs) == 0 {
		return nil
	}
	if len(bufs) > IdealBatchSize {
		return ErrBatchTooLarge
	}
	st := b.pool.Get().(*sendState)
	st.rd.Enter()
	err := b.send(st, bufs, r)
	st.rd.Exit()
	st.clear()
	b.pool.Put(st)
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
		h := &st.hdrs[m].hdr
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
		n, e := sendmmsg(u.fd, st.hdrs[st.done:st.nmsg])
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
		n, e := sendmmsg(int(fd), st.hdrs[st.done:st.nmsg])
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
		h := &st.hdrs[m].hdr
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
