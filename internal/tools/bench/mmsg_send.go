package bench

import (
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/sys/mmsg"
)

// pktinfoSender is the peers' side of the harness's sending: a batch of
// datagrams to one address (the gateway), each from its own source
// address (IP_PKTINFO; the peers' addresses are local to the namespace),
// and optionally each message a run of datagrams (UDP_SEGMENT), sent with
// as few sendmmsg calls as the socket allows. One goroutine uses it.
type pktinfoSender struct {
	bufs  [][]byte // the messages' buffers; the caller fills bufs[k]
	iovs  []unix.Iovec
	cmsgs []gsoCmsgs
	hdrs  []mmsg.Hdr

	off, total int // the batch being sent
	errno      syscall.Errno
	send       func(fd uintptr) bool
}

// newPktinfoSender makes a sender of batches of up to batch messages of
// up to bufSize bytes each to gw (which must stay put). With gso every
// message is cut by the kernel into datagrams of segment bytes.
func newPktinfoSender(gw *unix.RawSockaddrInet4, batch, bufSize int, gso bool, segment uint16) *pktinfoSender {
	s := &pktinfoSender{
		bufs: make([][]byte, batch), iovs: make([]unix.Iovec, batch),
		cmsgs: make([]gsoCmsgs, batch), hdrs: make([]mmsg.Hdr, batch),
	}
	ctl := unix.CmsgSpace(unix.SizeofInet4Pktinfo)
	if gso {
		ctl += unix.CmsgSpace(2)
	}
	for i := range s.bufs {
		s.bufs[i] = make([]byte, bufSize)
		c := &s.cmsgs[i]
		c.hdr.Level, c.hdr.Type = unix.IPPROTO_IP, unix.IP_PKTINFO
		c.hdr.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		c.seg.hdr.Level, c.seg.hdr.Type = unix.IPPROTO_UDP, unix.UDP_SEGMENT
		c.seg.hdr.SetLen(unix.CmsgLen(2))
		c.seg.size = segment
		h := &s.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(gw))
		h.Namelen = unix.SizeofSockaddrInet4
		h.Iov = &s.iovs[i]
		h.SetIovlen(1)
		h.Control = (*byte)(unsafe.Pointer(c))
		h.SetControllen(ctl)
	}
	s.send = func(fd uintptr) bool {
		r, e := mmsg.Send(int(fd), s.hdrs[s.off:s.total])
		if e == unix.EAGAIN {
			return false
		}
		if e == 0 {
			s.off += r
		}
		s.errno = e
		return true
	}
	return s
}

// set makes message k the first n bytes of bufs[k], sent from src.
func (s *pktinfoSender) set(k, n int, src [4]byte) {
	s.iovs[k].Base = &s.bufs[k][0]
	s.iovs[k].SetLen(n)
	s.cmsgs[k].info.Spec_dst = src
}

// sendBatch sends messages 0 to n-1 on raw, waiting for room in the
// socket as needed. failed is true when a call failed (not EAGAIN or
// EINTR): the rest of the batch is dropped, as a lossy link would. err
// is raw's (the socket closed).
func (s *pktinfoSender) sendBatch(raw syscall.RawConn, n int) (failed bool, err error) {
	s.off, s.total = 0, n
	for s.off < s.total {
		if err := raw.Write(s.send); err != nil {
			return false, err
		}
		if s.errno != 0 && s.errno != unix.EINTR {
			failed = true
			break
		}
	}
	runtime.KeepAlive(s.iovs)
	runtime.KeepAlive(s.cmsgs)
	return failed, nil
}
