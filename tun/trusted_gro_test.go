package tun

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
)

const testOffset = 16 // room for the virtio-net header, as the engine leaves

// segSpec describes one TCP segment for the tests.
type segSpec struct {
	v6      bool
	seq     uint32
	ack     uint32
	flags   byte
	window  uint16
	payload []byte
	options []byte // multiple of 4
	tos     byte   // IPv4 TOS or IPv6 traffic class
	ttl     byte
	df      bool
	srcPort uint16
	frag    bool // IPv4 fragment offset set
}

func defaultSpec(v6 bool, seq uint32, payload []byte) segSpec {
	return segSpec{v6: v6, seq: seq, ack: 777, flags: tcpFlagACK, window: 512, payload: payload,
		options: []byte{1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2}, ttl: 64, df: true, srcPort: 40000}
}

// build makes a correct packet (valid IP and TCP checksums) at testOffset
// of a buffer with capacity for room more bytes.
func build(s segSpec, room int) []byte {
	th := 20 + len(s.options)
	var ip []byte
	if s.v6 {
		ip = make([]byte, 40)
		ip[0] = 6<<4 | s.tos>>4
		ip[1] = s.tos << 4
		binary.BigEndian.PutUint16(ip[4:6], uint16(th+len(s.payload)))
		ip[6] = 6
		ip[7] = s.ttl
		copy(ip[8:24], []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
		copy(ip[24:40], []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2})
	} else {
		ip = make([]byte, 20)
		ip[0] = 0x45
		ip[1] = s.tos
		binary.BigEndian.PutUint16(ip[2:4], uint16(20+th+len(s.payload)))
		binary.BigEndian.PutUint16(ip[4:6], uint16(s.seq))
		if s.df {
			ip[6] = 0x40
		}
		if s.frag {
			ip[7] = 8
		}
		ip[8] = s.ttl
		ip[9] = 6
		copy(ip[12:16], []byte{10, 9, 8, 1})
		copy(ip[16:20], []byte{10, 9, 8, 2})
		binary.BigEndian.PutUint16(ip[10:12], ^inetsum.Fold(inetsum.Add(0, ip)))
	}
	tcp := make([]byte, th)
	binary.BigEndian.PutUint16(tcp[0:2], s.srcPort)
	binary.BigEndian.PutUint16(tcp[2:4], 5201)
	binary.BigEndian.PutUint32(tcp[4:8], s.seq)
	binary.BigEndian.PutUint32(tcp[8:12], s.ack)
	tcp[12] = byte(th/4) << 4
	tcp[13] = s.flags
	binary.BigEndian.PutUint16(tcp[14:16], s.window)
	copy(tcp[20:], s.options)
	pkt := append(append(ip, tcp...), s.payload...)
	setFullChecksum(pkt, len(ip))
	b := make([]byte, testOffset+len(pkt), testOffset+len(pkt)+room)
	copy(b[testOffset:], pkt)
	return b
}

// setFullChecksum writes pkt's correct TCP checksum, computed the slow
// and obvious way.
func setFullChecksum(pkt []byte, iphLen int) {
	pkt[iphLen+16], pkt[iphLen+17] = 0, 0
	binary.BigEndian.PutUint16(pkt[iphLen+16:], ^inetsum.Fold(pseudo(pkt, iphLen)+inetsum.Add(0, pkt[iphLen:])))
}

func pseudo(pkt []byte, iphLen int) uint64 {
	var acc uint64
	if pkt[0]>>4 == 6 {
		acc = inetsum.Add(0, pkt[8:40])
	} else {
		acc = inetsum.Add(0, pkt[12:20])
	}
	return acc + 6 + uint64(len(pkt)-iphLen)
}

// kernelFinish does what the kernel (or a NIC) does with a
// CHECKSUM_PARTIAL packet on its way out: sum from csum_start to the end,
// with the field holding the pseudo-header sum, and store the complement.
func kernelFinish(t *testing.T, b []byte) []byte {
	t.Helper()
	h := b[testOffset-VirtioHeaderLen : testOffset]
	if h[0] != virtioNeedsCsum {
		t.Fatalf("virtio flags = %d, want NEEDS_CSUM", h[0])
	}
	pkt := append([]byte(nil), b[testOffset:]...)
	start := int(binary.NativeEndian.Uint16(h[6:8]))
	off := int(binary.NativeEndian.Uint16(h[8:10]))
	c := ^inetsum.Fold(inetsum.Add(0, pkt[start:]))
	binary.BigEndian.PutUint16(pkt[start+off:], c)
	return pkt
}

// checkValid fails unless pkt has valid IP (v4) and TCP checksums.
func checkValid(t *testing.T, pkt []byte) {
	t.Helper()
	iphLen := 40
	if pkt[0]>>4 == 4 {
		iphLen = int(pkt[0]&0xf) * 4
		if inetsum.Fold(inetsum.Add(0, pkt[:iphLen])) != 0xffff {
			t.Fatalf("IPv4 header checksum invalid")
		}
		if int(binary.BigEndian.Uint16(pkt[2:4])) != len(pkt) {
			t.Fatalf("IPv4 total length %d, packet %d", binary.BigEndian.Uint16(pkt[2:4]), len(pkt))
		}
	} else if int(binary.BigEndian.Uint16(pkt[4:6]))+40 != len(pkt) {
		t.Fatalf("IPv6 payload length %d, packet %d", binary.BigEndian.Uint16(pkt[4:6]), len(pkt))
	}
	if inetsum.Fold(pseudo(pkt, iphLen)+inetsum.Add(0, pkt[iphLen:])) != 0xffff {
		t.Fatalf("TCP checksum invalid")
	}
}

func payloads(n, size int) [][]byte {
	r := rand.New(rand.NewPCG(1, uint64(n*size)))
	out := make([][]byte, n)
	for i := range out {
		out[i] = make([]byte, size)
		for j := range out[i] {
			out[i][j] = byte(r.Uint32())
		}
	}
	return out
}

// stream builds n segments of one flow, the first with room to merge.
func stream(v6 bool, n, size int, last func(*segSpec)) [][]byte {
	ps := payloads(n, size)
	bufs := make([][]byte, n)
	seq := uint32(1000)
	for i := range bufs {
		s := defaultSpec(v6, seq, ps[i])
		if i == n-1 && last != nil {
			last(&s)
		}
		room := 0
		if i == 0 {
			room = 1 << 16
		}
		bufs[i] = build(s, room)
		seq += uint32(len(s.payload))
	}
	return bufs
}

func TestTrustedGROMergesARun(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		bufs := stream(v6, 10, 1000, func(s *segSpec) {
			s.payload = s.payload[:300]
			s.flags |= tcpFlagPSH
		})
		var want []byte
		for _, b := range bufs {
			want = append(want, b[len(b)-payloadLen(b):]...)
		}
		var g trustedGRO
		g.plan(bufs, testOffset)
		if len(g.ours) != 1 || g.ours[0] != 0 || len(g.rest) != 0 {
			t.Fatalf("v6=%v: ours %v, rest %d; want one merged packet", v6, g.ours, len(g.rest))
		}
		h := bufs[0][testOffset-VirtioHeaderLen : testOffset]
		wantGSO := byte(virtioGSOTCPv4)
		iph := 20
		if v6 {
			wantGSO, iph = virtioGSOTCPv6, 40
		}
		if h[1] != wantGSO || binary.NativeEndian.Uint16(h[4:6]) != 1000 ||
			binary.NativeEndian.Uint16(h[2:4]) != uint16(iph+32) ||
			binary.NativeEndian.Uint16(h[6:8]) != uint16(iph) || binary.NativeEndian.Uint16(h[8:10]) != 16 {
			t.Fatalf("v6=%v: virtio header % x", v6, h)
		}
		pkt := kernelFinish(t, bufs[0])
		checkValid(t, pkt)
		if got := pkt[iph+32:]; !bytes.Equal(got, want) {
			t.Fatalf("v6=%v: merged payload differs (%d bytes, want %d)", v6, len(got), len(want))
		}
		if pkt[iph+13] != tcpFlagACK|tcpFlagPSH {
			t.Fatalf("v6=%v: merged flags %#x, want ACK|PSH", v6, pkt[iph+13])
		}
	}
}

func payloadLen(b []byte) int {
	s, ok := classify(b[testOffset:])
	if !ok {
		panic("not TCP")
	}
	return s.payload
}

// A single packet is only re-marked: once the kernel fills in the
// checksum, it is byte for byte what the peer sent.
func TestTrustedGROSinglePacketUnchanged(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, flags := range []byte{tcpFlagACK, tcpFlagACK | tcpFlagPSH, 0x02, 0x12, tcpFlagACK | 0x01} {
			s := defaultSpec(v6, 5, []byte("hello, tunnel"))
			s.flags = flags
			b := build(s, 0)
			orig := append([]byte(nil), b[testOffset:]...)
			var g trustedGRO
			g.plan([][]byte{b}, testOffset)
			if len(g.ours) != 1 {
				t.Fatalf("v6=%v flags %#x: not written by the trusted path", v6, flags)
			}
			if h := b[testOffset-VirtioHeaderLen:]; h[1] != virtioGSONone {
				t.Fatalf("v6=%v flags %#x: GSO type %d for a single packet", v6, flags, h[1])
			}
			if got := kernelFinish(t, b); !bytes.Equal(got, orig) {
				t.Fatalf("v6=%v flags %#x: packet changed", v6, flags)
			}
		}
	}
}

// Each mutation of the second segment must keep it out of the first's
// run, and both packets must come out valid and complete.
func TestTrustedGRORefusesWhatTheKernelWouldNotMerge(t *testing.T) {
	cases := []struct {
		name string
		v6   bool
		mut  func(*segSpec)
		room int // the head's room; 0 means plenty
	}{
		{"ack", false, func(s *segSpec) { s.ack++ }, 0},
		{"window", false, func(s *segSpec) { s.window++ }, 0},
		{"options", false, func(s *segSpec) { s.options = []byte{1, 1, 8, 10, 0, 0, 0, 9, 0, 0, 0, 2} }, 0},
		{"option length", false, func(s *segSpec) { s.options = nil }, 0},
		{"tos", false, func(s *segSpec) { s.tos = 3 }, 0},
		{"ttl", false, func(s *segSpec) { s.ttl = 63 }, 0},
		{"df", false, func(s *segSpec) { s.df = false }, 0},
		{"traffic class", true, func(s *segSpec) { s.tos = 0x20 }, 0},
		{"hop limit", true, func(s *segSpec) { s.ttl = 1 }, 0},
		{"port", false, func(s *segSpec) { s.srcPort++ }, 0},
		{"sequence gap", false, func(s *segSpec) { s.seq++ }, 0},
		{"sequence gap v6", true, func(s *segSpec) { s.seq-- }, 0},
		{"larger segment", false, func(s *segSpec) { s.payload = append(s.payload, 1) }, 0},
		{"syn", false, func(s *segSpec) { s.flags = 0x02 }, 0},
		{"fin", false, func(s *segSpec) { s.flags |= 0x01 }, 0},
		{"urg", true, func(s *segSpec) { s.flags |= 0x20 }, 0},
		{"no payload", false, func(s *segSpec) { s.payload = nil }, 0},
		{"no room", false, func(s *segSpec) {}, 999},
		{"no room v6", true, func(s *segSpec) {}, 999},
	}
	for _, c := range cases {
		ps := payloads(2, 1000)
		a := defaultSpec(c.v6, 100, ps[0])
		b := defaultSpec(c.v6, 1100, ps[1])
		c.mut(&b)
		room := 1 << 16
		if c.room != 0 {
			room = c.room
		}
		bufs := [][]byte{build(a, room), build(b, 0)}
		orig := [][]byte{append([]byte(nil), bufs[0][testOffset:]...), append([]byte(nil), bufs[1][testOffset:]...)}
		var g trustedGRO
		g.plan(bufs, testOffset)
		if len(g.ours) != 2 {
			t.Fatalf("%s: merged (ours %v)", c.name, g.ours)
		}
		for i := range bufs {
			if got := kernelFinish(t, bufs[i]); !bytes.Equal(got, orig[i]) {
				t.Fatalf("%s: packet %d changed", c.name, i)
			}
		}
	}
}

// Runs end after a PSH and after a short segment; interleaved flows each
// get their own run; a packet larger than 64 KiB never results.
func TestTrustedGRORunBoundaries(t *testing.T) {
	// PSH in the middle: two runs.
	bufs := stream(false, 6, 1000, nil)
	bufs[3] = build(func() segSpec {
		s := defaultSpec(false, 1000+3*1000, payloads(6, 1000)[3])
		s.flags |= tcpFlagPSH
		return s
	}(), 1<<16)
	bufs[4] = build(defaultSpec(false, 1000+4*1000, payloads(6, 1000)[4]), 1<<16)
	var g trustedGRO
	g.plan(bufs, testOffset)
	if len(g.ours) != 2 || g.ours[0] != 0 || g.ours[1] != 4 {
		t.Fatalf("PSH: ours %v, want [0 4]", g.ours)
	}
	for _, i := range g.ours {
		checkValid(t, kernelFinish(t, bufs[i]))
	}

	// A short segment ends its run.
	bufs = stream(true, 4, 1000, nil)
	bufs[1] = build(defaultSpec(true, 2000, payloads(1, 500)[0]), 0)
	bufs[2] = build(defaultSpec(true, 2500, payloads(1, 1000)[0]), 0)
	bufs[3] = build(defaultSpec(true, 3500, payloads(1, 1000)[0]), 0)
	g.plan(bufs, testOffset)
	if len(g.ours) != 3 {
		t.Fatalf("short segment: ours %v, want 3 packets", g.ours)
	}

	// Two interleaved flows.
	ps := payloads(6, 1000)
	bufs = nil
	for i := 0; i < 6; i++ {
		s := defaultSpec(false, uint32(1000+i/2*1000), ps[i])
		s.srcPort = uint16(40000 + i%2)
		room := 0
		if i < 2 {
			room = 1 << 16
		}
		bufs = append(bufs, build(s, room))
	}
	g.plan(bufs, testOffset)
	if len(g.ours) != 2 {
		t.Fatalf("two flows: ours %v, want 2 runs", g.ours)
	}
	for _, i := range g.ours {
		pkt := kernelFinish(t, bufs[i])
		checkValid(t, pkt)
		if len(pkt) != 20+32+3000 {
			t.Fatalf("two flows: run %d is %d bytes", i, len(pkt))
		}
	}

	// 70 segments of 1000 bytes: the first run stops below 64 KiB, after
	// 65 segments; the rest have no room to merge into and go singly.
	bufs = stream(false, 70, 1000, nil)
	g.plan(bufs, testOffset)
	if len(g.ours) != 6 || g.ours[0] != 0 || g.ours[1] != 65 {
		t.Fatalf("64 KiB: ours %v, want [0 65 66 67 68 69]", g.ours)
	}
	if n := len(bufs[0]) - testOffset; n > maxIPPacket || n < maxIPPacket-1000 {
		t.Fatalf("64 KiB: first run %d bytes", n)
	}
	checkValid(t, kernelFinish(t, bufs[0]))
}

// Packets that are not plain TCP go to the fallback untouched.
func TestTrustedGROLeavesOthersAlone(t *testing.T) {
	frag := defaultSpec(false, 1, []byte("x"))
	frag.frag = true
	udp := build(defaultSpec(false, 1, []byte("udp!")), 0)
	udp[testOffset+9] = 17
	short := build(defaultSpec(false, 1, []byte("abc")), 0)
	short = short[:len(short)-1] // IPv4 total length no longer matches
	v6ext := build(defaultSpec(true, 1, []byte("abc")), 0)
	v6ext[testOffset+6] = 0 // hop-by-hop options header
	bufs := [][]byte{build(frag, 0), udp, short, v6ext, {0, 1, 2}}
	bufs[4] = append(make([]byte, testOffset), 0x45, 0)
	var copies [][]byte
	for _, b := range bufs {
		copies = append(copies, append([]byte(nil), b...))
	}
	var g trustedGRO
	g.plan(bufs, testOffset)
	if len(g.ours) != 0 || len(g.rest) != len(bufs) {
		t.Fatalf("ours %v, rest %d; want all %d in rest", g.ours, len(g.rest), len(bufs))
	}
	for i := range bufs {
		if !bytes.Equal(g.rest[i], copies[i]) {
			t.Fatalf("packet %d changed", i)
		}
	}
}

// FuzzTrustedGRO feeds arbitrary packets (and valid streams with fuzzed
// bytes flipped) through plan: it must not panic, every packet must be
// written exactly once or merged, and no payload byte may be lost.
func FuzzTrustedGRO(f *testing.F) {
	f.Add([]byte{}, uint16(0), byte(0), false)
	f.Add([]byte{0x45, 0, 0, 40}, uint16(3), byte(0x10), true)
	f.Add(bytes.Repeat([]byte{0x60}, 80), uint16(50), byte(0x08), false)
	f.Fuzz(func(t *testing.T, raw []byte, flip uint16, val byte, v6 bool) {
		bufs := stream(v6, 8, 200, nil)
		// Flip one byte of one packet, then add raw as a packet of its own.
		pi := int(flip) % len(bufs)
		pkt := bufs[pi][testOffset:]
		pkt[int(flip)%len(pkt)] ^= val
		extra := make([]byte, testOffset+len(raw), testOffset+len(raw)+1<<16)
		copy(extra[testOffset:], raw)
		bufs = append(bufs[:4], append([][]byte{extra}, bufs[4:]...)...)
		in := 0
		for _, b := range bufs {
			if s, ok := classify(b[testOffset:]); ok {
				in += s.payload
			}
		}
		var g trustedGRO
		g.plan(bufs, testOffset)
		out := 0
		for _, i := range g.ours {
			s, ok := classify(bufs[i][testOffset:])
			if !ok {
				t.Fatalf("packet %d written as TCP no longer parses", i)
			}
			if len(bufs[i])-testOffset > maxIPPacket {
				t.Fatalf("packet %d is %d bytes", i, len(bufs[i])-testOffset)
			}
			out += s.payload
		}
		if in != out {
			t.Fatalf("TCP payload in %d, out %d", in, out)
		}
		if len(g.ours)+len(g.rest) > len(bufs) {
			t.Fatalf("%d written of %d", len(g.ours)+len(g.rest), len(bufs))
		}
	})
}

// withIPOptions returns a copy of the IPv4 packet in b with four bytes of
// IP options (NOPs) and room to merge.
func withIPOptions(b []byte) []byte {
	pkt := b[testOffset:]
	out := make([]byte, testOffset, testOffset+len(pkt)+4+1<<16)
	out = append(out, pkt[:20]...)
	out = append(out, 1, 1, 1, 1)
	out = append(out, pkt[20:]...)
	ip := out[testOffset:]
	ip[0] = 0x46
	binary.BigEndian.PutUint16(ip[2:4], uint16(len(ip)))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:12], ^inetsum.Fold(inetsum.Add(0, ip[:24])))
	return out
}

// IPv4 packets with options are written singly, as the kernel's GRO
// would leave them, and arrive unchanged.
func TestTrustedGROIPv4OptionsNotMerged(t *testing.T) {
	ps := payloads(2, 1000)
	bufs := [][]byte{
		withIPOptions(build(defaultSpec(false, 100, ps[0]), 0)),
		withIPOptions(build(defaultSpec(false, 1100, ps[1]), 0)),
	}
	orig := [][]byte{append([]byte(nil), bufs[0][testOffset:]...), append([]byte(nil), bufs[1][testOffset:]...)}
	checkValid(t, orig[0])
	var g trustedGRO
	g.plan(bufs, testOffset)
	if len(g.ours) != 2 {
		t.Fatalf("ours %v, want both packets singly", g.ours)
	}
	for i := range bufs {
		if got := kernelFinish(t, bufs[i]); !bytes.Equal(got, orig[i]) {
			t.Fatalf("packet %d changed", i)
		}
	}
}

// A merged run stays merged when its place in the table of open runs is
// taken by a later flow (more than maxOpenRuns flows in one batch).
func TestTrustedGROMergedRunOutlivesItsTableSlot(t *testing.T) {
	ps := payloads(3, 1000)
	var bufs [][]byte
	for i := 0; i < 3; i++ {
		s := defaultSpec(false, uint32(1000+i*1000), ps[i])
		if i == 2 {
			s.flags |= tcpFlagPSH // closes the run
		}
		room := 0
		if i == 0 {
			room = 1 << 16
		}
		bufs = append(bufs, build(s, room))
	}
	for f := 0; f < maxOpenRuns; f++ {
		s := defaultSpec(false, 1, ps[0][:100])
		s.srcPort = uint16(50000 + f)
		bufs = append(bufs, build(s, 0))
	}
	var g trustedGRO
	g.plan(bufs, testOffset)
	if len(g.ours) != 1+maxOpenRuns || g.ours[0] != 0 {
		t.Fatalf("ours %v", g.ours)
	}
	if h := bufs[0][testOffset-VirtioHeaderLen:]; h[1] != virtioGSOTCPv4 {
		t.Fatalf("merged run written with GSO type %d", h[1])
	}
	pkt := kernelFinish(t, bufs[0])
	checkValid(t, pkt)
	if len(pkt) != 20+32+3000 {
		t.Fatalf("merged run is %d bytes", len(pkt))
	}
}
