package device

// Acceptance tests of crypto-routing on receive beyond the unknown-source
// case: an inner source that belongs to another peer is dropped too, for
// IPv4 and IPv6, and malformed inner packets never reach the TUN device.

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

func TestAcceptanceCryptoRoutingOtherPeersSource(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	// B knows a third peer C owning 10.0.0.3 and fd00::3; A routes those
	// through B so that A will seal packets claiming to come from C.
	c := mustKey(t).PublicKey()
	must(t, p.b.Configure(&Config{Peers: []PeerConfig{{
		PublicKey: c, AllowedIPs: prefixes("10.0.0.3/32", "fd00::3/128"),
	}}}))
	for _, tc := range []struct{ src, dst netip.Addr }{
		{netip.MustParseAddr("10.0.0.3"), ipB4},
		{netip.MustParseAddr("fd00::3"), ipB6},
		{netip.MustParseAddr("10.0.0.2"), ipB4}, // B's own address
	} {
		p.ta.Inject(ipPacket(tc.src, tc.dst, []byte("impersonation")))
		p.expectNone(p.tb, 100*time.Millisecond)
	}
	p.send(p.ta, p.tb, ipA6, ipB6, "genuine v6 still delivered")
	p.send(p.ta, p.tb, ipA4, ipB4, "genuine v4 still delivered")
}

func TestAcceptanceMalformedInnerPacketsDropped(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	good4 := ipPacket(ipA4, ipB4, []byte("payload of a v4 packet"))
	good6 := ipPacket(ipA6, ipB6, []byte("payload of a v6 packet"))
	var bad [][]byte
	// IPv4 total length beyond the packet.
	b := append([]byte(nil), good4...)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)+40))
	bad = append(bad, b)
	// IPv4 total length below the header size.
	b = append([]byte(nil), good4...)
	binary.BigEndian.PutUint16(b[2:], 12)
	bad = append(bad, b)
	// IPv6 payload length beyond the packet.
	b = append([]byte(nil), good6...)
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	bad = append(bad, b)
	// Version 5, and a truncated IPv6 header.
	b = append([]byte(nil), good4...)
	b[0] = 0x55
	bad = append(bad, b, good6[:30])
	for _, pk := range bad {
		// The sender routes by destination before it checks anything, so
		// these may or may not leave A; either way B must not deliver them.
		p.ta.Inject(pk)
	}
	p.expectNone(p.tb, 100*time.Millisecond)
	// A longer packet with a shorter IPv4 total length is cut to it.
	long := append(append([]byte(nil), good4...), make([]byte, 13)...)
	must(t, p.ta.Inject(long))
	p.expect(p.tb, good4)
}
