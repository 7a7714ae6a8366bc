package conn

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Sticky source: the local address a peer's datagrams arrive on is learned
// from IP_PKTINFO / IPV6_PKTINFO on receive, kept in Endpoint.Src, and
// replayed as a ready-made control message in every send on the route.
// Control messages are written and read with explicit byte order so that no
// buffer needs a particular alignment.

const (
	cmsgHdrLen = unix.SizeofCmsghdr
	// cmsgAlign is the kernel's CMSG_ALIGN unit: sizeof(long).
	cmsgAlign = int(unsafe.Sizeof(uintptr(0)))
	// pktinfo4Space and pktinfo6Space are the aligned sizes of the
	// sticky-source control messages.
	pktinfo4Space = (cmsgHdrLen + unix.SizeofInet4Pktinfo + cmsgAlign - 1) &^ (cmsgAlign - 1)
	pktinfo6Space = (cmsgHdrLen + unix.SizeofInet6Pktinfo + cmsgAlign - 1) &^ (cmsgAlign - 1)
	// segmentSpace is the aligned size of a UDP_SEGMENT control message.
	segmentSpace = (cmsgHdrLen + 2 + cmsgAlign - 1) &^ (cmsgAlign - 1)
	// groSpace is the aligned size of a UDP_GRO control message.
	groSpace = (cmsgHdrLen + 4 + cmsgAlign - 1) &^ (cmsgAlign - 1)
	// sendCtrlSpace fits a sticky source and a segment size.
	sendCtrlSpace = pktinfo6Space + segmentSpace
	// recvCtrlSpace fits everything the receive path asks for (a receive
	// timestamp only while they are on), with room for one unexpected
	// message.
	recvCtrlSpace = pktinfo6Space + groSpace + timestampSpace + 64
)

// putCmsgHeader writes a control message header for dataLen bytes of data
// at b[0:] and returns the aligned space the message takes. b must hold it.
func putCmsgHeader(b []byte, level, typ int32, dataLen int) int {
	n := cmsgHdrLen + dataLen
	if cmsgHdrLen == 16 {
		binary.NativeEndian.PutUint64(b[0:8], uint64(n))
		binary.NativeEndian.PutUint32(b[8:12], uint32(level))
		binary.NativeEndian.PutUint32(b[12:16], uint32(typ))
	} else {
		binary.NativeEndian.PutUint32(b[0:4], uint32(n))
		binary.NativeEndian.PutUint32(b[4:8], uint32(level))
		binary.NativeEndian.PutUint32(b[8:12], uint32(typ))
	}
	return (n + cmsgAlign - 1) &^ (cmsgAlign - 1)
}

// stickyControl builds the IP_PKTINFO or IPV6_PKTINFO control message that
// makes a datagram leave from ep.Src (and ep.SrcIfindex when known), or nil
// when there is no usable sticky source.
func stickyControl(ep Endpoint) []byte {
	if !ep.Src.IsValid() {
		return nil
	}
	dst := ep.Dst.Addr().Unmap()
	src := ep.Src.Unmap()
	if dst.Is4() {
		if !src.Is4() {
			return nil
		}
		b := make([]byte, pktinfo4Space)
		putCmsgHeader(b, unix.IPPROTO_IP, unix.IP_PKTINFO, unix.SizeofInet4Pktinfo)
		d := b[cmsgHdrLen:]
		binary.NativeEndian.PutUint32(d[0:4], uint32(ep.SrcIfindex))
		a := src.As4()
		copy(d[4:8], a[:]) // ipi_spec_dst: the source to use
		return b
	}
	if !src.Is6() {
		return nil
	}
	b := make([]byte, pktinfo6Space)
	putCmsgHeader(b, unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, unix.SizeofInet6Pktinfo)
	d := b[cmsgHdrLen:]
	a := src.As16()
	copy(d[0:16], a[:])
	binary.NativeEndian.PutUint32(d[16:20], uint32(ep.SrcIfindex))
	return b
}

// putSegment appends a UDP_SEGMENT control message for segments of size
// at b[0:] and returns its space.
func putSegment(b []byte, size uint16) int {
	n := putCmsgHeader(b, unix.SOL_UDP, unix.UDP_SEGMENT, 2)
	binary.NativeEndian.PutUint16(b[cmsgHdrLen:cmsgHdrLen+2], size)
	clear(b[cmsgHdrLen+2 : n])
	return n
}

// parseControl walks received control messages and returns the sticky
// source (address and interface), the UDP GRO segment size (0 when the
// datagram was not coalesced) and the kernel's receive timestamp in Unix
// nanoseconds (0 when timestamps are off). Malformed messages end the
// walk; what was read before them stands.
func parseControl(oob []byte) (src netip.Addr, ifindex int32, gso int, at int64) {
	for len(oob) >= cmsgHdrLen {
		var l uint64
		var level, typ int32
		if cmsgHdrLen == 16 {
			l = binary.NativeEndian.Uint64(oob[0:8])
			level = int32(binary.NativeEndian.Uint32(oob[8:12]))
			typ = int32(binary.NativeEndian.Uint32(oob[12:16]))
		} else {
			l = uint64(binary.NativeEndian.Uint32(oob[0:4]))
			level = int32(binary.NativeEndian.Uint32(oob[4:8]))
			typ = int32(binary.NativeEndian.Uint32(oob[8:12]))
		}
		if l < cmsgHdrLen || l > uint64(len(oob)) {
			return
		}
		data := oob[cmsgHdrLen:l]
		switch {
		case level == unix.IPPROTO_IP && typ == unix.IP_PKTINFO && len(data) >= unix.SizeofInet4Pktinfo:
			ifindex = int32(binary.NativeEndian.Uint32(data[0:4]))
			src = netip.AddrFrom4([4]byte(data[4:8])) // ipi_spec_dst: the local address to answer from
		case level == unix.IPPROTO_IPV6 && typ == unix.IPV6_PKTINFO && len(data) >= unix.SizeofInet6Pktinfo:
			src = netip.AddrFrom16([16]byte(data[0:16]))
			ifindex = int32(binary.NativeEndian.Uint32(data[16:20]))
		case level == unix.SOL_UDP && typ == unix.UDP_GRO && len(data) >= 2:
			if len(data) >= 4 {
				gso = int(binary.NativeEndian.Uint32(data[0:4]))
			} else {
				gso = int(binary.NativeEndian.Uint16(data[0:2]))
			}
		case level == unix.SOL_SOCKET:
			at = parseTimestamp(typ, data)
		}
		next := (l + uint64(cmsgAlign) - 1) &^ uint64(cmsgAlign-1)
		if next > uint64(len(oob)) {
			return
		}
		oob = oob[next:]
	}
	return
}

// normalize turns 4in6 destinations into plain IPv4 ones so that equal
// places compare equal.
func normalize(ap netip.AddrPort) netip.AddrPort {
	if ap.Addr().Is4In6() {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return ap
}
