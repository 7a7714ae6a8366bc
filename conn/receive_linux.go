package conn

// The receive path, for one ReceiveFunc call:
//
//	1. hand out datagrams left over from the previous call (the stash),
//	   if any; when they fill the caller's buffers, return
//	2. point one mmsghdr per remaining caller buffer at it, at a reused
//	   sockaddr slot and a reused control buffer; with GRO on, read only
//	   into the last "span" buffers, where span adapts to how coalesced
//	   traffic was on the previous call (len/64 after full trains, all of
//	   them after single datagrams)
//	3. recvmmsg through the runtime poller (one receiver per socket)
//	4. parse each message's sockaddr and control messages into an Endpoint
//	   value: Dst from the sockaddr, Src and SrcIfindex from PKTINFO; and,
//	   for a StampedReceiveFunc while timestamps are on, the kernel's
//	   receive timestamp (timestamps_linux.go)
//	5. lay the datagrams out forward from the first free buffer, cutting
//	   GRO trains at their segment size (copied, or with AllowViews handed
//	   out as views into the buffer they landed in); every piece carries its train's
//	   Endpoint, sticky source included. A train that does not fit goes to
//	   the stash (copied once into a reused slab) with everything read
//	   after it, so nothing is lost and the next call starts with it.
//
// Nothing allocates per datagram or per batch (a link-local IPv6 peer's
// zone string excepted); the stash slab grows, once, to the largest
// overflow seen (at most one batch of 64 KiB trains).

import (
	"errors"
	"net"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/sys/mmsg"
)

// recvState is one socket's receive scratch space.
type recvState struct {
	u *udpSocket // immutable

	mu     sync.Mutex // one ReceiveFunc call at a time; guards everything below
	hdrs   [IdealBatchSize]mmsg.Hdr
	iovs   [IdealBatchSize]unix.Iovec
	names  [IdealBatchSize]rawSockaddr
	oob    [IdealBatchSize][recvCtrlSpace]byte
	cnt    int                   // messages asked for
	n      int                   // messages received
	errno  unix.Errno            // receive error
	read   func(fd uintptr) bool // readMsgs bound once
	drops  uint64                // datagrams dropped (truncated, unparseable, buffer too small)
	span   int                   // messages to read next with GRO on; 0 = not yet known
	slab   []byte                // stashed datagram bytes; slab[:used] in use
	used   int                   // bytes of slab in use
	pend   []stashed             // stashed messages, oldest first, from pend[head] on
	head   int                   // first stashed message not yet handed out
	nowait bool                  // datagrams are already in hand: do not wait for more
	views  bool                  // segments may be handed out as views (AllowViews); immutable
}

// stashed is a message (single datagram or GRO train) read but not yet
// handed to the caller.
type stashed struct {
	off, n int // its bytes: slab[off:off+n]
	gso    int // segment size; 0 for a single datagram
	ep     Endpoint
	at     int64 // receive timestamp (Unix ns); 0 when none
}

func newRecvState(u *udpSocket) *recvState {
	rs := &recvState{u: u, pend: make([]stashed, 0, IdealBatchSize)}
	rs.read = rs.readMsgs
	return rs
}

func (rs *recvState) readMsgs(fd uintptr) bool {
	n, e := mmsg.Recv(int(fd), rs.hdrs[:rs.cnt])
	switch e {
	case 0:
		rs.n, rs.errno = n, 0
		return true
	case unix.EINTR:
		return false
	case unix.EAGAIN:
		if rs.nowait {
			rs.n, rs.errno = 0, 0
			return true
		}
		return false
	default:
		rs.n, rs.errno = 0, e
		return true
	}
}

// receive is the socket's ReceiveFunc.
func (rs *recvState) receive(bufs [][]byte, sizes []int, eps []Endpoint) (int, error) {
	return rs.receiveStamped(bufs, sizes, eps, nil)
}

// receiveStamped is the socket's StampedReceiveFunc; receive when arrived
// is nil.
func (rs *recvState) receiveStamped(bufs [][]byte, sizes []int, eps []Endpoint, arrived []int64) (int, error) {
	if len(bufs) > IdealBatchSize {
		bufs = bufs[:IdealBatchSize]
	}
	if len(sizes) < len(bufs) || len(eps) < len(bufs) || (arrived != nil && len(arrived) < len(bufs)) {
		return 0, ErrShortSlices
	}
	if len(bufs) == 0 {
		return 0, nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	k := len(bufs)
	o := rs.unstash(bufs, sizes, eps, arrived)
	if o == k || rs.head < len(rs.pend) {
		return o, nil
	}
	gro := rs.u.gro.Load()
	r := k - o
	if gro {
		if rs.span == 0 {
			rs.span = max(1, k/maxGROSegments)
		}
		r = min(r, rs.span)
		for i := k - r; i < k; i++ {
			if len(bufs[i]) < groBufferSize {
				// Trains would not fit the caller's buffers: give GRO up.
				_ = rs.u.rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 0) })
				rs.u.gro.Store(false)
				gro, r = false, k-o
				break
			}
		}
	}
	readAt := k - r
	rs.cnt = r
	for m := 0; m < r; m++ {
		b := bufs[readAt+m]
		v := &rs.iovs[m]
		if len(b) > 0 {
			v.Base = &b[0]
		} else {
			v.Base = nil
		}
		v.SetLen(len(b))
		h := &rs.hdrs[m].Hdr
		h.Name = (*byte)(unsafe.Pointer(&rs.names[m]))
		h.Namelen = unix.SizeofSockaddrInet6
		h.Iov = v
		h.SetIovlen(1)
		h.Control = &rs.oob[m][0]
		h.SetControllen(recvCtrlSpace)
		h.Flags = 0
	}
	rs.nowait = o > 0
	err := rs.u.rc.Read(rs.read)
	for m := 0; m < r; m++ {
		rs.iovs[m].Base = nil // keep no caller buffer alive
	}
	if err != nil {
		if o > 0 {
			return o, nil // hand out the stash first; the error comes back next call
		}
		if errors.Is(err, net.ErrClosed) {
			return 0, net.ErrClosed
		}
		return 0, err
	}
	if rs.errno != 0 {
		if o > 0 {
			return o, nil
		}
		return 0, &net.OpError{Op: "recvmmsg", Net: "udp", Err: rs.errno}
	}
	o, maxSegs := rs.layout(bufs, sizes, eps, arrived, o, readAt, rs.n)
	if gro && rs.n > 0 {
		rs.span = max(1, k/maxSegs)
	}
	return o, nil
}

// message parses message m's address and control messages.
func (rs *recvState) message(m int) (ep Endpoint, gso int, at int64, ok bool) {
	h := &rs.hdrs[m].Hdr
	if h.Flags&unix.MSG_TRUNC != 0 {
		return Endpoint{}, 0, 0, false
	}
	name := (*[unix.SizeofSockaddrInet6]byte)(unsafe.Pointer(&rs.names[m]))[:min(int(h.Namelen), unix.SizeofSockaddrInet6)]
	oob := rs.oob[m][:min(int(h.Controllen), recvCtrlSpace)]
	return parseMessage(name, oob)
}

// parseMessage turns a received sockaddr and control messages into an
// Endpoint, the GRO segment size and the receive timestamp (0: none).
func parseMessage(name, oob []byte) (ep Endpoint, gso int, at int64, ok bool) {
	dst, ok := parseSockaddr(name)
	if !ok {
		return Endpoint{}, 0, 0, false
	}
	ep.Dst = dst
	ep.Src, ep.SrcIfindex, gso, at = parseControl(oob)
	if ep.Src.IsValid() && ep.Src.Is4() != dst.Addr().Is4() {
		ep.Src, ep.SrcIfindex = netipZero, 0 // a family mix-up is no usable source
	}
	return ep, gso, at, true
}

// layout lays the n messages read at bufs[readAt:] out as datagrams from
// bufs[o] on, cutting GRO trains at their segment size, and returns the new
// count and the most segments one message held (at least 1). A destination
// is safe when it is at or before the message being cut (already consumed)
// or past every message read. When a train does not fit, its rest and all
// later messages go to the stash. Every piece of a train carries its
// receive timestamp into arrived (when not nil).
func (rs *recvState) layout(bufs [][]byte, sizes []int, eps []Endpoint, arrived []int64, o, readAt, n int) (int, int) {
	maxSegs := 1
	for m := 0; m < n; m++ {
		i := readAt + m
		ep, gso, at, ok := rs.message(m)
		if !ok {
			rs.drops++
			continue
		}
		l := int(rs.hdrs[m].Len)
		src := bufs[i][:l] // bufs[i] itself may be replaced by a view below
		if gso <= 0 || gso >= l {
			gso = 0
		} else {
			maxSegs = max(maxSegs, (l+gso-1)/gso)
		}
		for off := 0; ; {
			seg := l - off
			if gso > 0 {
				seg = min(gso, seg)
			}
			if (o > i && o < readAt+n) || o >= len(bufs) {
				// No safe buffer left: keep the rest for the next call.
				rs.stash(src[off:l], gso, ep, at)
				for mm := m + 1; mm < n; mm++ {
					if ep, gso, at, ok := rs.message(mm); ok {
						rs.stash(bufs[readAt+mm][:rs.hdrs[mm].Len], gso, ep, at)
					} else {
						rs.drops++
					}
				}
				return o, maxSegs
			}
			switch {
			case rs.views:
				bufs[o] = src[off : off+seg : off+seg]
				sizes[o], eps[o] = seg, ep
				if arrived != nil {
					arrived[o] = at
				}
				o++
			case len(bufs[o]) < seg:
				rs.drops++
			default:
				if o != i || off != 0 {
					copy(bufs[o][:seg], src[off:off+seg])
				}
				sizes[o], eps[o] = seg, ep
				if arrived != nil {
					arrived[o] = at
				}
				o++
			}
			off += seg
			if off >= l {
				break
			}
		}
	}
	return o, maxSegs
}

// stash keeps one message (a datagram or the rest of a train) for the next
// call. The slab grows only when an overflow is larger than any before.
func (rs *recvState) stash(data []byte, gso int, ep Endpoint, at int64) {
	if need := rs.used + len(data); need > len(rs.slab) {
		grown := make([]byte, max(need, 2*len(rs.slab)))
		copy(grown, rs.slab[:rs.used])
		rs.slab = grown
	}
	copy(rs.slab[rs.used:], data)
	rs.pend = append(rs.pend, stashed{off: rs.used, n: len(data), gso: gso, ep: ep, at: at})
	rs.used += len(data)
}

// unstash hands stashed datagrams out from bufs[0] on and returns how many.
func (rs *recvState) unstash(bufs [][]byte, sizes []int, eps []Endpoint, arrived []int64) int {
	o := 0
	for rs.head < len(rs.pend) && o < len(bufs) {
		p := &rs.pend[rs.head]
		seg := p.n
		if p.gso > 0 {
			seg = min(p.gso, p.n)
		}
		if len(bufs[o]) < seg {
			rs.drops++
		} else {
			copy(bufs[o], rs.slab[p.off:p.off+seg])
			sizes[o], eps[o] = seg, p.ep
			if arrived != nil {
				arrived[o] = p.at
			}
			o++
		}
		p.off += seg
		p.n -= seg
		if p.n <= 0 {
			rs.head++
		}
	}
	if rs.head == len(rs.pend) {
		rs.pend, rs.head, rs.used = rs.pend[:0], 0, 0
	}
	return o
}
