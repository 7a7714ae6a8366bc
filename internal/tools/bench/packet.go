package bench

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
)

// ipv4UDPPacket returns an IPv4/UDP packet of exactly size bytes from src to
// dst, with valid IP and UDP checksums and a payload of a repeating pattern.
// size must be at least 28 (the two headers). The UDP checksum is there
// because real UDP traffic has one and a TUN writer merges only UDP whose
// checksum verifies: without it (before 2026-12-02 15:00) no gateway in
// the netpeers section could merge a peer's packets into one TUN write.
func ipv4UDPPacket(size int, src, dst netip.Addr) ([]byte, error) {
	if size < 28 || size > 65535 {
		return nil, fmt.Errorf("packet size %d outside 28..65535", size)
	}
	if !src.Is4() || !dst.Is4() {
		return nil, fmt.Errorf("packet addresses %v -> %v: want IPv4", src, dst)
	}
	p := make([]byte, size)
	p[0] = 0x45 // version 4, 20-byte header
	binary.BigEndian.PutUint16(p[2:], uint16(size))
	p[8] = 64 // TTL
	p[9] = 17 // UDP
	s, d := src.As4(), dst.As4()
	copy(p[12:16], s[:])
	copy(p[16:20], d[:])
	binary.BigEndian.PutUint16(p[10:], inetsum.Checksum(p[:20]))
	binary.BigEndian.PutUint16(p[20:], 40000) // source port
	binary.BigEndian.PutUint16(p[22:], 9)     // discard
	binary.BigEndian.PutUint16(p[24:], uint16(size-20))
	for i := 28; i < size; i++ {
		p[i] = byte(i)
	}
	// The UDP checksum, over the pseudo-header and the datagram.
	pseudo := make([]byte, 12)
	copy(pseudo[0:8], p[12:20])
	pseudo[9] = 17
	binary.BigEndian.PutUint16(pseudo[10:], uint16(size-20))
	sum := inetsum.Checksum(append(pseudo, p[20:]...))
	if sum == 0 {
		sum = 0xffff
	}
	binary.BigEndian.PutUint16(p[26:], sum)
	return p, nil
}
