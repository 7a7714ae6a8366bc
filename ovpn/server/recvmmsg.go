package server

// The UDP socket's batched receive without allocations:
//
//	recvmmsg (MSG_DONTWAIT, through the runtime poller) into fixed
//	    buffers, sockaddrs and control space -> per message: source
//	    address (netip, parsed in place) and the UDP_GRO segment size
//	    (control message parsed in place)
//
// x/net's ReadBatch allocates a net.UDPAddr per message and
// unix.ParseSocketControlMessage a slice per call; with clients that do
// not coalesce (one datagram per message) those were allocations per
// packet.

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/sys/mmsg"
)

// groCtrlSpace holds one UDP_GRO control message (an int).
var groCtrlSpace = unix.CmsgSpace(4)

// batchReader receives batches of datagrams on one UDP socket. Only one
// goroutine uses it.
type batchReader struct {
	rc    syscall.RawConn
	hdrs  []mmsg.Hdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for either family
	oob   []byte                  // groCtrlSpace bytes per message
	n     int                     // messages of the last read
	errno unix.Errno              // error of the last read, 0 if none
	read  func(fd uintptr) bool   // b.recv bound once, so a read allocates nothing
}

// newBatchReader prepares to receive into bufs (one datagram, or one
// coalesced train, per buffer).
func newBatchReader(c *net.UDPConn, bufs [][]byte) (*batchReader, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	n := len(bufs)
	b := &batchReader{rc: rc, hdrs: make([]mmsg.Hdr, n), iovs: make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet6, n), oob: make([]byte, n*groCtrlSpace)}
	for i := range bufs {
		b.iovs[i].Base = &bufs[i][0]
		b.iovs[i].SetLen(len(bufs[i]))
		h := &b.hdrs[i].Hdr
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
	b.read = b.recv
	return b, nil
}

// recv is one recvmmsg attempt; false asks the poller to wait.
func (b *batchReader) recv(fd uintptr) bool {
	n, e := mmsg.Recv(int(fd), b.hdrs)
	if e == unix.EAGAIN || e == unix.EINTR {
		return false
	}
	b.n, b.errno = n, e
	return true
}

// readBatch waits for at least one datagram and returns how many
// messages arrived.
func (b *batchReader) readBatch() (int, error) {
	for i := range b.hdrs {
		h := &b.hdrs[i].Hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Namelen = uint32(unsafe.Sizeof(b.names[i]))
		h.Control = &b.oob[i*groCtrlSpace]
		h.SetControllen(groCtrlSpace)
		h.Flags = 0
		b.hdrs[i].Len = 0
	}
	b.n, b.errno = 0, 0
	if err := b.rc.Read(b.read); err != nil {
		return 0, err
	}
	if b.errno != 0 {
		return 0, os.NewSyscallError("recvmmsg", b.errno)
	}
	return b.n, nil
}

// message returns message i's length, source address and UDP_GRO segment
// size (0 when it is a single datagram).
func (b *batchReader) message(i int) (n int, from netip.AddrPort, seg int) {
	m := &b.hdrs[i]
	return int(m.Len), sockaddrAddrPort(&b.names[i], m.Hdr.Namelen), groSegmentRaw(b.oob[i*groCtrlSpace : i*groCtrlSpace+int(m.Hdr.Controllen)])
}

// sockaddrAddrPort converts a received sockaddr_in or sockaddr_in6; an
// IPv4-mapped IPv6 address comes back as IPv4. Anything else is invalid.
func sockaddrAddrPort(sa *unix.RawSockaddrInet6, namelen uint32) netip.AddrPort {
	port := func(p *uint16) uint16 { return binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(p))[:]) }
	switch sa.Family {
	case unix.AF_INET:
		if namelen < unix.SizeofSockaddrInet4 {
			return netip.AddrPort{}
		}
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), port(&sa4.Port))
	case unix.AF_INET6:
		if namelen < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}
		}
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), port(&sa.Port))
	}
	return netip.AddrPort{}
}

// groSegmentRaw returns the segment size of a coalesced receive from its
// control messages, or 0.
func groSegmentRaw(oob []byte) int {
	// The header is read field by field: the bytes need not be aligned.
	const lenSize = int(unsafe.Sizeof(unix.Cmsghdr{}.Len))
	hdrLen := unix.CmsgLen(0)
	for len(oob) >= hdrLen {
		var l int
		if lenSize == 8 {
			l = int(min(binary.NativeEndian.Uint64(oob), uint64(len(oob)+1)))
		} else {
			l = int(binary.NativeEndian.Uint32(oob))
		}
		level := int32(binary.NativeEndian.Uint32(oob[lenSize:]))
		typ := int32(binary.NativeEndian.Uint32(oob[lenSize+4:]))
		if l < hdrLen || l > len(oob) {
			return 0
		}
		if level == unix.SOL_UDP && typ == unix.UDP_GRO {
			d := oob[hdrLen:l]
			switch {
			case len(d) >= 4:
				return int(binary.NativeEndian.Uint32(d))
			case len(d) >= 2:
				return int(binary.NativeEndian.Uint16(d))
			}
			return 0
		}
		next := unix.CmsgSpace(l - hdrLen)
		if next > len(oob) {
			return 0
		}
		oob = oob[next:]
	}
	return 0
}
