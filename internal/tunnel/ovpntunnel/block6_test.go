package ovpntunnel

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"
)

// ipv6Packet builds an IPv6 packet from src to dst with next header nh
// and payload.
func ipv6Packet(src, dst string, nh byte, payload []byte) []byte {
	p := make([]byte, 40+len(payload))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(len(payload)))
	p[6], p[7] = nh, 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(p[8:], s[:])
	copy(p[24:], d[:])
	copy(p[40:], payload)
	return p
}

// onesSum folds the 16-bit ones' complement sum of the pseudo-header and
// the ICMPv6 message of the IPv6 packet p, checksum included: 0xffff when
// the checksum is right. Written apart from icmp6Checksum on purpose.
func onesSum(p []byte) uint16 {
	var b []byte
	b = append(b, p[8:40]...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(p)-40))
	b = append(b, 0, 0, 0, 58)
	b = append(b, p[40:]...)
	if len(b)%2 == 1 {
		b = append(b, 0)
	}
	var s uint64
	for i := 0; i < len(b); i += 2 {
		s += uint64(binary.BigEndian.Uint16(b[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return uint16(s)
}

func TestICMP6Unreachable(t *testing.T) {
	src := netip.MustParseAddr("fe80::7")
	udp := ipv6Packet("2001:db8:1::2", "2001:db8:99::1", 17, []byte("\x30\x39\x00\x35\x00\x0cabcd"))
	out := make([]byte, icmp6MaxLen)
	n := icmp6Unreachable(out, udp, src)
	if n != 48+len(udp) {
		t.Fatalf("reply length %d, want %d", n, 48+len(udp))
	}
	r := out[:n]
	if r[0] != 0x60 || int(binary.BigEndian.Uint16(r[4:])) != n-40 || r[6] != 58 || r[7] != 64 {
		t.Errorf("IPv6 header % x", r[:8])
	}
	if netip.AddrFrom16([16]byte(r[8:24])) != src || netip.AddrFrom16([16]byte(r[24:40])) != netip.MustParseAddr("2001:db8:1::2") {
		t.Errorf("addresses % x", r[8:40])
	}
	if r[40] != 1 || r[41] != 0 || !bytes.Equal(r[44:48], []byte{0, 0, 0, 0}) || !bytes.Equal(r[48:], udp) {
		t.Errorf("ICMPv6 message % x", r[40:])
	}
	if s := onesSum(r); s != 0xffff {
		t.Errorf("checksum wrong: sum %#x", s)
	}

	// A big packet is quoted up to the IPv6 minimum MTU.
	big := ipv6Packet("2001:db8:1::2", "2001:db8:99::1", 6, make([]byte, 3000))
	if n := icmp6Unreachable(out, big, src); n != icmp6MaxLen || !bytes.Equal(out[48:n], big[:n-48]) || onesSum(out[:n]) != 0xffff {
		t.Errorf("big packet: reply of %d bytes", n)
	}
	// An ICMPv6 echo request is answered (informational), an error is not.
	if n := icmp6Unreachable(out, ipv6Packet("2001:db8:1::2", "2001:db8:99::1", 58, []byte{128, 0, 0, 0, 0, 1, 0, 1}), src); n == 0 {
		t.Error("echo request not answered")
	}
	for name, p := range map[string][]byte{
		"ICMPv6 error":          ipv6Packet("2001:db8:1::2", "2001:db8:99::1", 58, []byte{1, 0, 0, 0, 0, 0, 0, 0}),
		"ICMPv6 without a type": ipv6Packet("2001:db8:1::2", "2001:db8:99::1", 58, nil),
		"multicast destination": ipv6Packet("2001:db8:1::2", "ff02::1", 17, []byte("x")),
		"multicast source":      ipv6Packet("ff02::1", "2001:db8:99::1", 17, []byte("x")),
		"unspecified source":    ipv6Packet("::", "2001:db8:99::1", 17, []byte("x")),
		"IPv4":                  append([]byte{0x45}, make([]byte, 59)...),
		"truncated":             udp[:39],
	} {
		if n := icmp6Unreachable(out, p, src); n != 0 {
			t.Errorf("%s answered (%d bytes)", name, n)
		}
	}
	if n := icmp6Unreachable(out[:50], udp, src); n != 0 {
		t.Errorf("reply written past a short buffer: %d", n)
	}
}

func TestNewBlock6(t *testing.T) {
	none := mustPush(t)
	if newBlock6(false, none) != nil {
		t.Error("blocking without block-ipv6")
	}
	if b := newBlock6(true, none); b == nil || b.src != netip.MustParseAddr("fe80::7") {
		t.Errorf("configured: %+v", b)
	}
	pushed := mustPush(t, "block-ipv6", "ifconfig-ipv6 fd42::1000/64 fd42::1")
	if b := newBlock6(false, pushed); b == nil || b.src != netip.MustParseAddr("fd42::1") {
		t.Errorf("pushed with an IPv6 remote: %+v", b)
	}
}

func FuzzICMP6Unreachable(f *testing.F) {
	f.Add(ipv6Packet("2001:db8:1::2", "2001:db8:99::1", 17, []byte("hello")))
	f.Add(ipv6Packet("2001:db8:1::2", "2001:db8:99::1", 58, []byte{1, 0, 0, 0}))
	f.Add([]byte{0x60})
	src := netip.MustParseAddr("fe80::7")
	out := make([]byte, icmp6MaxLen)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		n := icmp6Unreachable(out, pkt, src)
		if n == 0 {
			return
		}
		if n > icmp6MaxLen || n < 88 || onesSum(out[:n]) != 0xffff || !bytes.Equal(out[48:n], pkt[:n-48]) {
			t.Fatalf("bad reply of %d bytes to % x", n, pkt)
		}
	})
}

func BenchmarkICMP6Unreachable(b *testing.B) {
	pkt := ipv6Packet("2001:db8:1::2", "2001:db8:99::1", 6, make([]byte, 1400))
	out := make([]byte, icmp6MaxLen)
	src := netip.MustParseAddr("fe80::7")
	b.ReportAllocs()
	b.SetBytes(icmp6MaxLen)
	for b.Loop() {
		icmp6Unreachable(out, pkt, src)
	}
}
