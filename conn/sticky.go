package conn

import (
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// normalize turns 4in6 destinations into plain IPv4 ones so that equal
// places compare equal.
func normalize(ap netip.AddrPort) netip.AddrPort {
	if ap.Addr().Is4In6() {
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return ap
}

// stickyControl builds the IP_PKTINFO or IPV6_PKTINFO control message that
// makes a datagram leave from ep.Src, or nil when there is no sticky source.
func stickyControl(ep Endpoint) []byte {
	if !ep.Src.IsValid() {
		return nil
	}
	if ep.Dst.Addr().Is4() {
		src := ep.Src.Unmap()
		if !src.Is4() {
			return nil
		}
		cm := ipv4.ControlMessage{Src: src.AsSlice(), IfIndex: int(ep.SrcIfindex)}
		return cm.Marshal()
	}
	cm := ipv6.ControlMessage{Src: ep.Src.AsSlice(), IfIndex: int(ep.SrcIfindex)}
	return cm.Marshal()
}
