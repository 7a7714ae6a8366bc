package tun

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
)

// outBufs returns n buffers of size bytes and their sizes.
func outBufs(n, size int) ([][]byte, []int) {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	return bufs, make([]int, n)
}

// setIPv4ID sets an IPv4 packet's identification and fixes its header
// checksum.
func setIPv4ID(pkt []byte, id uint16) {
	binary.BigEndian.PutUint16(pkt[4:6], id)
	pkt[10], pkt[11] = 0, 0
	binary.BigEndian.PutUint16(pkt[10:12], inetsum.Checksum(pkt[:20]))
}

// Splitting what the merge made gives back, byte for byte, the segments
// it was made of: the kernel's TSO rules and ours are the same rules.
func TestSplitUndoesTheMerge(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		segs := stream(v6, 10, 1000, func(s *segSpec) {
			s.payload = s.payload[:300]
			s.flags |= tcpFlagPSH
		})
		var want [][]byte
		for i, b := range segs {
			if !v6 {
				setIPv4ID(b[testOffset:], uint16(500+i))
			}
			want = append(want, append([]byte(nil), b[testOffset:]...))
		}
		var g trustedGRO
		g.plan(segs, testOffset)
		if len(g.ours) != 1 {
			t.Fatalf("v6=%v: the merge made %d packets, want 1", v6, len(g.ours))
		}
		bufs, sizes := outBufs(16, testOffset+1500)
		n, err := split(segs[0][testOffset-VirtioHeaderLen:], bufs, sizes, testOffset)
		if err != nil || n != len(want) {
			t.Fatalf("v6=%v: split = %d, %v; want %d segments", v6, n, err, len(want))
		}
		for i := range n {
			got := bufs[i][testOffset : testOffset+sizes[i]]
			if !bytes.Equal(got, want[i]) {
				t.Fatalf("v6=%v: segment %d differs:\n got % x\nwant % x", v6, i, got[:60], want[i][:60])
			}
		}
	}
}

// CWR stays on the first segment only, FIN and PSH on the last only.
func TestSplitTCPFlags(t *testing.T) {
	seg := build(defaultSpec(false, 1, make([]byte, 3000)), 0)
	pkt := seg[testOffset:]
	pkt[20+tcpFlagsOffset] = tcpFlagACK | tcpFlagCWR | tcpFlagPSH | tcpFlagFIN
	in := trainOf(pkt, virtioGSOTCPv4, 20, tcpCsumOffset, 1000)
	bufs, sizes := outBufs(4, 2000)
	n, err := split(in, bufs, sizes, 0)
	if err != nil || n != 3 {
		t.Fatalf("split = %d, %v; want 3", n, err)
	}
	for i, want := range []byte{tcpFlagACK | tcpFlagCWR, tcpFlagACK, tcpFlagACK | tcpFlagPSH | tcpFlagFIN} {
		if got := bufs[i][20+tcpFlagsOffset]; got != want {
			t.Errorf("segment %d flags %#x, want %#x", i, got, want)
		}
		checkValid(t, bufs[i][:sizes[i]])
	}
}

// trainOf prefixes pkt with a virtio-net header for a GSO train.
func trainOf(pkt []byte, gsoType byte, csumStart, csumOffset, gsoSize int) []byte {
	in := make([]byte, VirtioHeaderLen+len(pkt))
	in[0] = virtioNeedsCsum
	in[1] = gsoType
	binary.NativeEndian.PutUint16(in[2:4], uint16(csumStart+20))
	binary.NativeEndian.PutUint16(in[4:6], uint16(gsoSize))
	binary.NativeEndian.PutUint16(in[6:8], uint16(csumStart))
	binary.NativeEndian.PutUint16(in[8:10], uint16(csumOffset))
	copy(in[VirtioHeaderLen:], pkt)
	return in
}

// udpTrain is a UDP GSO train over IPv4 or IPv6 carrying payload.
func udpTrain(v6 bool, payload []byte, gsoSize int) []byte {
	var ip []byte
	if v6 {
		ip = make([]byte, 40)
		ip[0] = 6 << 4
		binary.BigEndian.PutUint16(ip[4:6], uint16(8+len(payload)))
		ip[6], ip[7] = 17, 64
		ip[8], ip[23] = 0xfd, 1
		ip[24], ip[39] = 0xfd, 2
	} else {
		ip = make([]byte, 20)
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:4], uint16(28+len(payload)))
		binary.BigEndian.PutUint16(ip[4:6], 0xfffe) // wraps while splitting
		ip[8], ip[9] = 64, 17
		copy(ip[12:20], []byte{10, 0, 0, 1, 10, 0, 0, 2})
		binary.BigEndian.PutUint16(ip[10:12], inetsum.Checksum(ip))
	}
	udp := make([]byte, 8)
	binary.BigEndian.PutUint16(udp[0:2], 4000)
	binary.BigEndian.PutUint16(udp[2:4], 5000)
	binary.BigEndian.PutUint16(udp[4:6], uint16(8+len(payload)))
	pkt := append(append(ip, udp...), payload...)
	in := trainOf(pkt, virtioGSOUDPL4, len(ip), udpCsumOffset, gsoSize)
	binary.NativeEndian.PutUint16(in[2:4], uint16(len(ip)+8))
	return in
}

// checkUDP fails unless pkt is a valid UDP packet (lengths, IPv4 header
// checksum, UDP checksum) and returns its payload.
func checkUDP(t *testing.T, pkt []byte) []byte {
	t.Helper()
	iph := 40
	var acc uint64
	if pkt[0]>>4 == 4 {
		iph = 20
		if inetsum.Fold(inetsum.Add(0, pkt[:20])) != 0xffff || int(binary.BigEndian.Uint16(pkt[2:4])) != len(pkt) {
			t.Fatalf("bad IPv4 header % x", pkt[:20])
		}
		acc = inetsum.Add(0, pkt[12:20])
	} else {
		if int(binary.BigEndian.Uint16(pkt[4:6]))+40 != len(pkt) {
			t.Fatalf("bad IPv6 payload length")
		}
		acc = inetsum.Add(0, pkt[8:40])
	}
	udp := pkt[iph:]
	if int(binary.BigEndian.Uint16(udp[4:6])) != len(udp) {
		t.Fatalf("UDP length %d, datagram %d", binary.BigEndian.Uint16(udp[4:6]), len(udp))
	}
	if inetsum.Fold(acc+17+uint64(len(udp))+inetsum.Add(0, udp)) != 0xffff {
		t.Fatalf("UDP checksum invalid")
	}
	return udp[8:]
}

func TestSplitUDP(t *testing.T) {
	payload := payloads(1, 5000)[0]
	for _, v6 := range []bool{false, true} {
		bufs, sizes := outBufs(8, 1500)
		n, err := split(udpTrain(v6, payload, 1200), bufs, sizes, 0)
		if err != nil || n != 5 {
			t.Fatalf("v6=%v: split = %d, %v; want 5 datagrams", v6, n, err)
		}
		var got []byte
		for i := range n {
			pkt := bufs[i][:sizes[i]]
			got = append(got, checkUDP(t, pkt)...)
			if !v6 {
				if id := binary.BigEndian.Uint16(pkt[4:6]); id != uint16(0xfffe+i) {
					t.Errorf("datagram %d: IPv4 id %#x, want %#x", i, id, uint16(0xfffe+i))
				}
			}
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("v6=%v: payload differs", v6)
		}
	}
}

// A single packet is handed out as it is, its checksum completed when the
// header asks for it.
func TestSplitSinglePacket(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		b := build(defaultSpec(v6, 9, []byte("hello, tunnel")), 0)
		want := append([]byte(nil), b[testOffset:]...)
		iph := 20
		if v6 {
			iph = 40
		}
		// What the kernel hands out: the pseudo-header sum in the field.
		pkt := append([]byte(nil), want...)
		binary.BigEndian.PutUint16(pkt[iph+16:], inetsum.Fold(pseudo(pkt, iph)))
		in := trainOf(pkt, virtioGSONone, iph, tcpCsumOffset, 0)
		bufs, sizes := outBufs(2, testOffset+1500)
		n, err := split(in, bufs, sizes, testOffset)
		if err != nil || n != 1 || !bytes.Equal(bufs[0][testOffset:testOffset+sizes[0]], want) {
			t.Fatalf("v6=%v: NEEDS_CSUM packet: n=%d err=%v", v6, n, err)
		}
		in = trainOf(pkt, virtioGSONone, iph, tcpCsumOffset, 0)
		in[0] = 0 // no checksum asked for: copied untouched
		n, err = split(in, bufs, sizes, testOffset)
		if err != nil || n != 1 || !bytes.Equal(bufs[0][testOffset:testOffset+sizes[0]], pkt) {
			t.Fatalf("v6=%v: plain packet: n=%d err=%v", v6, n, err)
		}
	}
}

// Inconsistent headers are errors, and nothing is handed out.
func TestSplitRefuses(t *testing.T) {
	good := func() []byte {
		b := build(defaultSpec(false, 1, make([]byte, 3000)), 0)
		return trainOf(b[testOffset:], virtioGSOTCPv4, 20, tcpCsumOffset, 1000)
	}
	for _, c := range []struct {
		name  string
		edit  func([]byte) []byte
		nbufs int
		size  int
	}{
		{"shorter than the header", func(in []byte) []byte { return in[:5] }, 4, 2000},
		{"unknown GSO type", func(in []byte) []byte { in[1] = 3; return in }, 4, 2000},
		{"TCPV6 on IPv4", func(in []byte) []byte { in[1] = virtioGSOTCPv6; return in }, 4, 2000},
		{"csum_start not the IPv4 header", func(in []byte) []byte { binary.NativeEndian.PutUint16(in[6:8], 24); return in }, 4, 2000},
		{"csum_offset not TCP's", func(in []byte) []byte { binary.NativeEndian.PutUint16(in[8:10], 6); return in }, 4, 2000},
		{"TCP header under 20 bytes", func(in []byte) []byte { in[VirtioHeaderLen+32] = 4 << 4; return in }, 4, 2000},
		{"ends inside the TCP header", func(in []byte) []byte { return in[:VirtioHeaderLen+30] }, 4, 2000},
		{"segment size 0", func(in []byte) []byte { binary.NativeEndian.PutUint16(in[4:6], 0); return in }, 4, 2000},
		{"not IP", func(in []byte) []byte { in[VirtioHeaderLen] = 0x55; return in }, 4, 2000},
		{"empty train", func(in []byte) []byte { return in[:VirtioHeaderLen] }, 4, 2000},
		{"segment does not fit", func(in []byte) []byte { return in }, 4, 1000},
		{"checksum past the end", func(in []byte) []byte {
			in[1] = virtioGSONone
			binary.NativeEndian.PutUint16(in[6:8], 3040)
			return in
		}, 4, 4000},
		{"single packet too big", func(in []byte) []byte { in[0], in[1] = 0, virtioGSONone; return in }, 4, 2000},
	} {
		bufs, sizes := outBufs(c.nbufs, c.size)
		if n, err := split(c.edit(good()), bufs, sizes, 0); err == nil || n != 0 {
			t.Errorf("%s: split = %d, %v; want an error and nothing", c.name, n, err)
		}
	}
	bufs, sizes := outBufs(2, 2000)
	if n, err := split(good(), bufs, sizes, 0); n != 0 || !errors.Is(err, ErrTooManySegments) {
		t.Errorf("3 segments into 2 buffers: split = %d, %v; want ErrTooManySegments", n, err)
	}
}

// Whatever a read holds, split does not panic, and every segment it cuts
// from a train is a valid packet.
func FuzzSplit(f *testing.F) {
	b := build(defaultSpec(false, 1, make([]byte, 3000)), 0)
	f.Add(trainOf(b[testOffset:], virtioGSOTCPv4, 20, tcpCsumOffset, 1000))
	b6 := build(defaultSpec(true, 1, make([]byte, 2000)), 0)
	f.Add(trainOf(b6[testOffset:], virtioGSOTCPv6, 40, tcpCsumOffset, 700))
	f.Add(udpTrain(false, make([]byte, 2500), 1000))
	f.Add(udpTrain(true, make([]byte, 100), 1000))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 20, 0, 16, 0, 0x45})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > VirtioHeaderLen+maxIPPacket {
			return
		}
		train := len(in) >= 2 && in[1] != virtioGSONone
		bufs, sizes := outBufs(8, 4+2000)
		n, err := split(in, bufs, sizes, 4)
		if err != nil {
			if n != 0 {
				t.Fatalf("error %v with %d packets", err, n)
			}
			return
		}
		if n < 1 || n > len(bufs) {
			t.Fatalf("%d packets", n)
		}
		for i := range n {
			pkt := bufs[i][4 : 4+sizes[i]]
			if !train {
				continue
			}
			iph := 40
			var acc uint64
			if pkt[0]>>4 == 4 {
				iph = int(pkt[0]&0xf) * 4
				if inetsum.Fold(inetsum.Add(0, pkt[:iph])) != 0xffff || int(binary.BigEndian.Uint16(pkt[2:4])) != len(pkt) {
					t.Fatalf("segment %d: bad IPv4 header", i)
				}
				acc = inetsum.Add(0, pkt[12:20])
			} else {
				if int(binary.BigEndian.Uint16(pkt[4:6]))+40 != len(pkt) {
					t.Fatalf("segment %d: bad IPv6 payload length", i)
				}
				acc = inetsum.Add(0, pkt[8:40])
				iph = int(binary.NativeEndian.Uint16(in[6:8]))
			}
			proto := uint64(6)
			if in[1]&^virtioGSOECN == virtioGSOUDPL4 {
				proto = 17
			}
			l4 := pkt[iph:]
			if inetsum.Fold(acc+proto+uint64(len(l4))+inetsum.Add(0, l4)) != 0xffff {
				t.Fatalf("segment %d: transport checksum invalid", i)
			}
		}
	})
}
