package tun

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
)

// udpDatagram builds a correct UDP datagram (valid IP header and UDP
// checksum) from src:srcPort to dst:dstPort at testOffset of a buffer
// with capacity for room more bytes.
func udpDatagram(src, dst netip.Addr, srcPort, dstPort uint16, payload []byte, room int) []byte {
	var ip []byte
	if src.Is6() {
		ip = make([]byte, 40)
		ip[0] = 6 << 4
		binary.BigEndian.PutUint16(ip[4:6], uint16(8+len(payload)))
		ip[6], ip[7] = 17, 64
		s, d := src.As16(), dst.As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
	} else {
		ip = make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:4], uint16(20+8+len(payload)))
		ip[6] = 0x40 // DF
		ip[8], ip[9] = 64, 17
		s, d := src.As4(), dst.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		binary.BigEndian.PutUint16(ip[10:12], ^inetsum.Fold(inetsum.Add(0, ip)))
	}
	udp := make([]byte, 8, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:2], srcPort)
	binary.BigEndian.PutUint16(udp[2:4], dstPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(8+len(payload)))
	udp = append(udp, payload...)
	var acc uint64
	if src.Is6() {
		acc = inetsum.Add(0, ip[8:40])
	} else {
		acc = inetsum.Add(0, ip[12:20])
	}
	c := ^inetsum.Fold(acc + 17 + uint64(len(udp)) + inetsum.Add(0, udp))
	if c == 0 {
		c = 0xffff // zero means "no checksum"
	}
	binary.BigEndian.PutUint16(udp[6:8], c)
	pkt := append(ip, udp...)
	b := make([]byte, testOffset+len(pkt), testOffset+len(pkt)+room)
	copy(b[testOffset:], pkt)
	return b
}

var (
	udpSrc4, udpDst4 = netip.MustParseAddr("10.9.8.1"), netip.MustParseAddr("10.9.8.2")
	udpSrc6, udpDst6 = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
)

// udpFlow builds n datagrams of one flow with the payloads ps, the first
// with room to merge.
func udpFlow(v6 bool, srcPort uint16, ps [][]byte) [][]byte {
	src, dst := udpSrc4, udpDst4
	if v6 {
		src, dst = udpSrc6, udpDst6
	}
	bufs := make([][]byte, len(ps))
	for i, p := range ps {
		room := 0
		if i == 0 {
			room = 1 << 16
		}
		bufs[i] = udpDatagram(src, dst, srcPort, 9000, p, room)
	}
	return bufs
}

// A run of one UDP flow (equal datagrams, a shorter last one) becomes one
// GSO UDP_L4 packet whose checksum, once the kernel completes it, is
// valid, and whose payload is the datagrams' in order.
func TestTrustedGROMergesUDP(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		ps := payloads(6, 1000)
		ps[5] = ps[5][:300]
		bufs := udpFlow(v6, 4000, ps)
		g := trustedGRO{udp: true}
		g.plan(bufs, testOffset)
		if len(g.ours) != 1 || g.ours[0] != 0 || len(g.rest) != 0 {
			t.Fatalf("v6=%v: ours %v, rest %d; want one merged packet", v6, g.ours, len(g.rest))
		}
		iph := 20
		if v6 {
			iph = 40
		}
		h := bufs[0][testOffset-VirtioHeaderLen : testOffset]
		if h[1] != virtioGSOUDPL4 || binary.NativeEndian.Uint16(h[4:6]) != 1000 ||
			binary.NativeEndian.Uint16(h[2:4]) != uint16(iph+8) ||
			binary.NativeEndian.Uint16(h[6:8]) != uint16(iph) || binary.NativeEndian.Uint16(h[8:10]) != udpCsumOffset {
			t.Fatalf("v6=%v: virtio header % x", v6, h)
		}
		got := checkUDP(t, kernelFinish(t, bufs[0]))
		if want := bytes.Join(ps, nil); !bytes.Equal(got, want) {
			t.Fatalf("v6=%v: merged payload differs (%d bytes, want %d)", v6, len(got), len(want))
		}
	}
}

// What UDP GSO cannot carry is not merged: another flow, a datagram
// longer than the run's first, anything after a shorter one, more than
// udpMaxSegments; IPv4 UDP without a checksum goes to the fallback
// unchanged; and a device without UDP offload merges no UDP at all.
func TestTrustedGROUDPBoundaries(t *testing.T) {
	count := func(g *trustedGRO, bufs [][]byte) (ours, merged int) {
		for _, i := range g.ours {
			if bufs[i][testOffset-VirtioHeaderLen+1] == virtioGSOUDPL4 {
				merged++
			}
		}
		return len(g.ours), merged
	}
	t.Run("flows", func(t *testing.T) {
		a, b := udpFlow(false, 4000, payloads(3, 500)), udpFlow(false, 4001, payloads(3, 500))
		bufs := [][]byte{a[0], b[0], a[1], b[1], a[2], b[2]}
		g := trustedGRO{udp: true}
		g.plan(bufs, testOffset)
		if ours, merged := count(&g, bufs); ours != 2 || merged != 2 || g.ours[0] != 0 || g.ours[1] != 1 {
			t.Fatalf("two interleaved flows: ours %v (%d merged), want [0 1] both merged", g.ours, merged)
		}
	})
	t.Run("longer and after a short one", func(t *testing.T) {
		ps := [][]byte{make([]byte, 500), make([]byte, 600), make([]byte, 400), make([]byte, 400)}
		bufs := udpFlow(false, 4000, ps)
		bufs[1] = append(make([]byte, 0, testOffset+len(bufs[1])+1<<16), bufs[1]...)
		g := trustedGRO{udp: true}
		g.plan(bufs, testOffset)
		// 500 alone (600 is longer); 600 + 400 (short: ends the run);
		// the last 400 alone.
		if len(g.ours) != 3 || g.ours[0] != 0 || g.ours[1] != 1 || g.ours[2] != 3 {
			t.Fatalf("ours %v, want [0 1 3]", g.ours)
		}
		if got := checkUDP(t, kernelFinish(t, bufs[1])); len(got) != 1000 {
			t.Fatalf("the second run carries %d bytes, want 1000", len(got))
		}
	})
	t.Run("segments", func(t *testing.T) {
		bufs := udpFlow(false, 4000, payloads(udpMaxSegments+6, 100))
		bufs[udpMaxSegments] = append(make([]byte, 0, testOffset+len(bufs[udpMaxSegments])+1<<16), bufs[udpMaxSegments]...)
		g := trustedGRO{udp: true}
		g.plan(bufs, testOffset)
		if len(g.ours) != 2 || g.ours[1] != udpMaxSegments {
			t.Fatalf("ours %v, want [0 %d]", g.ours, udpMaxSegments)
		}
		if got := checkUDP(t, kernelFinish(t, bufs[0])); len(got) != udpMaxSegments*100 {
			t.Fatalf("the first run carries %d bytes, want %d", len(got), udpMaxSegments*100)
		}
	})
	t.Run("no checksum", func(t *testing.T) {
		bufs := udpFlow(false, 4000, payloads(3, 500))
		for _, b := range bufs {
			b[testOffset+26], b[testOffset+27] = 0, 0
		}
		copies := make([][]byte, len(bufs))
		for i, b := range bufs {
			copies[i] = append([]byte(nil), b...)
		}
		g := trustedGRO{udp: true}
		g.plan(bufs, testOffset)
		if len(g.ours) != 0 || len(g.rest) != 3 {
			t.Fatalf("ours %v, rest %d; want all in rest", g.ours, len(g.rest))
		}
		for i := range bufs {
			if !bytes.Equal(g.rest[i], copies[i]) {
				t.Fatalf("datagram %d changed", i)
			}
		}
	})
	t.Run("no offload", func(t *testing.T) {
		bufs := udpFlow(true, 4000, payloads(3, 500))
		var g trustedGRO
		g.plan(bufs, testOffset)
		if len(g.ours) != 0 || len(g.rest) != 3 {
			t.Fatalf("without USO: ours %v, rest %d; want all in rest", g.ours, len(g.rest))
		}
	})
}

// FuzzTrustedGROUDP feeds UDP flows with one byte flipped, and an
// arbitrary packet, through plan with UDP offload on: it must not panic,
// no UDP payload byte may be lost or added, and no packet written may
// exceed an IP packet's size.
func FuzzTrustedGROUDP(f *testing.F) {
	f.Add([]byte{}, uint16(0), byte(0), false)
	f.Add([]byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17}, uint16(3), byte(0x10), true)
	f.Add(bytes.Repeat([]byte{0x60}, 60), uint16(50), byte(0x11), false)
	f.Fuzz(func(t *testing.T, raw []byte, flip uint16, val byte, v6 bool) {
		ps := payloads(8, 300)
		bufs := udpFlow(v6, 4000, ps)
		pi := int(flip) % len(bufs)
		pkt := bufs[pi][testOffset:]
		pkt[int(flip)%len(pkt)] ^= val
		extra := make([]byte, testOffset+len(raw), testOffset+len(raw)+1<<16)
		copy(extra[testOffset:], raw)
		bufs = append(bufs[:4], append([][]byte{extra}, bufs[4:]...)...)
		in := 0
		for _, b := range bufs {
			if s, ok := classifyUDP(b[testOffset:]); ok {
				in += s.payload
			} else if s, ok := classify(b[testOffset:]); ok {
				in += s.payload
			}
		}
		g := trustedGRO{udp: true}
		g.plan(bufs, testOffset)
		out := 0
		for _, i := range g.ours {
			p := bufs[i][testOffset:]
			if len(p) > maxIPPacket {
				t.Fatalf("packet %d is %d bytes", i, len(p))
			}
			s, ok := classifyUDP(p)
			if !ok {
				s, ok = classify(p)
			}
			if !ok {
				t.Fatalf("packet %d written here no longer parses", i)
			}
			out += s.payload
		}
		if in != out {
			t.Fatalf("payload in %d, out %d", in, out)
		}
	})
}
