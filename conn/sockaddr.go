package conn

import (
	"encoding/binary"
	"net"
	"net/netip"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Raw socket addresses, built once per route for the send path and parsed
// without allocation on the receive path.

// rawSockaddr holds a sockaddr_in or sockaddr_in6 exactly as the kernel reads
// it: the larger of the two, aligned for either.
type rawSockaddr = unix.RawSockaddrInet6

// putSockaddr writes ap into sa and returns the length the kernel must be
// given. IPv4 (and 4in6) addresses become sockaddr_in, everything else
// sockaddr_in6; a v6 zone becomes the scope id (numeric, or an interface
// name looked up once here, never on the send path).
func putSockaddr(sa *rawSockaddr, ap netip.AddrPort) uint32 {
	*sa = rawSockaddr{}
	addr := ap.Addr()
	if addr.Is4() || addr.Is4In6() {
		s := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		s.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s.Port))[:], ap.Port())
		s.Addr = addr.Unmap().As4()
		return unix.SizeofSockaddrInet4
	}
	s := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
	s.Family = unix.AF_INET6
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s.Port))[:], ap.Port())
	s.Addr = addr.As16()
	s.Scope_id = zoneIndex(addr.Zone())
	return unix.SizeofSockaddrInet6
}

// zoneIndex turns a v6 zone into an interface index (0 when unknown).
func zoneIndex(zone string) uint32 {
	if zone == "" {
		return 0
	}
	if n, err := strconv.ParseUint(zone, 10, 32); err == nil {
		return uint32(n)
	}
	if ifi, err := net.InterfaceByName(zone); err == nil {
		return uint32(ifi.Index)
	}
	return 0
}

// parseSockaddr reads a sockaddr_in or sockaddr_in6 from b.
// A link-local v6 source keeps its scope as a numeric zone (the only case
// that allocates, and only for link-local peers).
func parseSockaddr(b []byte) (netip.AddrPort, bool) {
	if len(b) < 2 {
		return netip.AddrPort{}, false
	}
	family := binary.NativeEndian.Uint16(b[0:2]) // host byte order, as the kernel writes it
	switch family {
	case unix.AF_INET:
		if len(b) < 8 {
			return netip.AddrPort{}, false
		}
		port := binary.BigEndian.Uint16(b[2:4])
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), true
	case unix.AF_INET6:
		if len(b) < unix.SizeofSockaddrInet6 {
			return netip.AddrPort{}, false
		}
		port := binary.BigEndian.Uint16(b[2:4])
		addr := netip.AddrFrom16([16]byte(b[8:24]))
		if addr.Is4In6() {
			addr = addr.Unmap()
		} else if scope := binary.NativeEndian.Uint32(b[24:28]); scope != 0 && addr.IsLinkLocalUnicast() {
			addr = addr.WithZone(strconv.FormatUint(uint64(scope), 10))
		}
		return netip.AddrPortFrom(addr, port), true
	}
	return netip.AddrPort{}, false
}

var netipZero netip.Addr
