package ovpntunnel

// block-ipv6 on the client, as OpenVPN 2.6 defines it: IPv6 packets that
// reach the tunnel are not sent to the server but answered on the device
// with an ICMPv6 "destination unreachable, no route" error, so a
// dual-stacked host behind an IPv4-only VPN fails fast over IPv6 (and
// falls back to IPv4) instead of leaking around the tunnel.
//
//	TUN read batch -> pumpFromTUN: block-ipv6 active?
//	    IPv4 packets -> Session.WritePackets (as always)
//	    IPv6 packets -> icmp6Unreachable -> the replies written back to
//	                    the device in one Write (nothing sent to the server)
//
// Active when the server pushes `block-ipv6` or the .ovpn file (or
// --block-ipv6) asks for it. OpenVPN leaves routing IPv6 into the tunnel
// to the configuration (redirect-gateway ipv6 with an IPv6 address);
// Wirelane also routes 2000::/4 and 3000::/4 (all global unicast IPv6)
// into the tunnel when block-ipv6 meets a redirect-gateway that does not
// redirect IPv6 there already (routes.go), so the common case, an IPv4
// provider's redirect-gateway def1, leaks no IPv6.

import (
	"encoding/binary"
	"net/netip"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
	"github.com/wirelane/wirelane/ovpn/control"
)

// icmp6MaxLen bounds an ICMPv6 error packet: the IPv6 minimum MTU
// (RFC 4443 section 2.4 (c): as much of the invoking packet as fits).
const icmp6MaxLen = 1280

// blockSourceDefault is the source of the replies when the server pushed
// no IPv6 remote address (the address OpenVPN uses too).
var blockSourceDefault = netip.MustParseAddr("fe80::7")

// block6 is an active block-ipv6: the source address of the replies.
type block6 struct {
	src netip.Addr
}

// newBlock6 returns the blocker for a session, nil when block-ipv6 is not
// in force (neither the configuration nor the push asks for it).
func newBlock6(configured bool, push *control.PushReply) *block6 {
	if !configured && !push.BlockIPv6 {
		return nil
	}
	if push.Remote6.IsValid() {
		return &block6{src: push.Remote6}
	}
	return &block6{src: blockSourceDefault}
}

// icmp6Unreachable writes into out the ICMPv6 destination unreachable
// (code 0, no route to destination) answering the IPv6 packet pkt, sent
// from src, and returns its length. It returns 0, writing nothing, for
// packets that get no answer (RFC 4443 section 2.4 (e)): not IPv6 or
// truncated, from the unspecified or a multicast address, to a multicast
// address, or an ICMPv6 error message itself. out needs icmp6MaxLen
// bytes at most (48 plus the packet).
func icmp6Unreachable(out, pkt []byte, src netip.Addr) int {
	const hdr = 40 // IPv6 header
	if len(pkt) < hdr || pkt[0]>>4 != 6 {
		return 0
	}
	from := netip.AddrFrom16([16]byte(pkt[8:24]))
	to := netip.AddrFrom16([16]byte(pkt[24:40]))
	if from.IsUnspecified() || from.IsMulticast() || to.IsMulticast() {
		return 0
	}
	if pkt[6] == 58 && (len(pkt) == hdr || pkt[hdr] < 128) { // ICMPv6 error (types 0..127) or no type at all
		return 0
	}
	quoted := min(len(pkt), icmp6MaxLen-hdr-8)
	total := hdr + 8 + quoted
	if len(out) < total {
		return 0
	}
	out = out[:total]
	out[0], out[1], out[2], out[3] = 0x60, 0, 0, 0 // version 6, traffic class and flow label 0
	binary.BigEndian.PutUint16(out[4:], uint16(8+quoted))
	out[6] = 58 // ICMPv6
	out[7] = 64 // hop limit
	s16 := src.As16()
	copy(out[8:24], s16[:])
	copy(out[24:40], pkt[8:24]) // back to the sender
	icmp := out[hdr:]
	icmp[0], icmp[1] = 1, 0 // destination unreachable, no route to destination
	icmp[2], icmp[3] = 0, 0 // checksum, below
	icmp[4], icmp[5], icmp[6], icmp[7] = 0, 0, 0, 0
	copy(icmp[8:], pkt[:quoted])
	binary.BigEndian.PutUint16(icmp[2:], icmp6Checksum(out[8:24], out[24:40], icmp))
	return total
}

// icmp6Checksum is the ICMPv6 checksum of msg (checksum field zero) from
// src to dst: the ones' complement sum over the pseudo-header (addresses,
// upper-layer length, next header 58) and the message.
func icmp6Checksum(src, dst, msg []byte) uint16 {
	acc := inetsum.Add(inetsum.Add(0, src), dst) + uint64(len(msg)) + 58
	return ^inetsum.Fold(inetsum.Add(acc, msg))
}
