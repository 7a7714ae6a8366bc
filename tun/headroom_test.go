package tun

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// tcpPacket builds an IPv4 TCP segment of payload bytes between fixed
// addresses; port picks the flow.
func tcpPacket(port uint16, payload int) []byte {
	pkt := make([]byte, 40+payload)
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[9] = 6
	copy(pkt[12:16], []byte{10, 0, 0, 1})
	copy(pkt[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(pkt[20:], port)
	binary.BigEndian.PutUint16(pkt[22:], 5201)
	pkt[32] = 5 << 4
	pkt[33] = tcpFlagACK
	return pkt
}

func atOffset(pkts ...[]byte) [][]byte {
	bufs := make([][]byte, len(pkts))
	for i, p := range pkts {
		bufs[i] = append(make([]byte, Offset), p...)
	}
	return bufs
}

func TestHeadRoomPreparesRuns(t *testing.T) {
	var h HeadRoom
	var pkts [][]byte
	// Flow 1: 60 segments of 1380 bytes (two runs: 64 KiB holds 47);
	// flow 2 interleaved; a lone UDP datagram at the end.
	for i := 0; i < 60; i++ {
		pkts = append(pkts, tcpPacket(1000, 1380))
		if i%20 == 0 {
			pkts = append(pkts, tcpPacket(2000, 1380))
		}
	}
	pkts = append(pkts, v4UDPPacket(100))
	bufs := atOffset(pkts...)
	h.Prepare(bufs, Offset)
	var heads []int
	for i, b := range bufs {
		if string(b[Offset:]) != string(pkts[i]) {
			t.Fatalf("packet %d changed", i)
		}
		if cap(b) >= headBufferSize(Offset) {
			heads = append(heads, i)
		}
	}
	// Heads: flow 1 at 0 and after 47 of its packets; flow 2 at 1.
	if len(heads) != 3 || heads[0] != 0 || heads[1] != 1 || heads[2] != 50 {
		t.Fatalf("heads at %v", heads)
	}
	if len(h.bufs) != 3 {
		t.Fatalf("%d head buffers", len(h.bufs))
	}
	// A second batch reuses the buffers.
	h.Prepare(atOffset(pkts...), Offset)
	if len(h.bufs) != 3 {
		t.Fatalf("%d head buffers after reuse", len(h.bufs))
	}
	if a := testing.AllocsPerRun(20, func() { h.Prepare(atOffsetNoAlloc(bufs, pkts), Offset) }); a != 0 {
		t.Fatalf("%v allocations per batch", a)
	}
}

// atOffsetNoAlloc resets bufs to the original packets without allocating.
func atOffsetNoAlloc(bufs, pkts [][]byte) [][]byte {
	for i := range bufs {
		bufs[i] = bufs[i][:Offset+len(pkts[i])]
	}
	return bufs
}

func FuzzFlowOf(f *testing.F) {
	f.Add(tcpPacket(1, 10))
	f.Add(v6UDPPacket())
	f.Add([]byte{0x45})
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if _, hdr, _, ok := flowOf(pkt); ok && (hdr >= len(pkt) || hdr < 28) {
			t.Fatalf("header length %d for %d bytes", hdr, len(pkt))
		}
	})
}

func TestHeadRoomEndsRunsAtPSH(t *testing.T) {
	var h HeadRoom
	var pkts [][]byte
	// Three TSO trains of 5 segments, each ending with PSH, then a lone
	// PSH segment (nothing can merge into it).
	for train := 0; train < 3; train++ {
		for i := 0; i < 5; i++ {
			p := tcpPacket(1000, 1380)
			if i == 4 {
				p[33] |= tcpFlagPSH
			}
			pkts = append(pkts, p)
		}
	}
	psh := tcpPacket(1000, 1380)
	psh[33] |= tcpFlagPSH
	pkts = append(pkts, psh, tcpPacket(3000, 1380))
	bufs := atOffset(pkts...)
	h.Prepare(bufs, Offset)
	var heads []int
	for i, b := range bufs {
		if cap(b) >= headBufferSize(Offset) {
			heads = append(heads, i)
		}
	}
	if fmt.Sprint(heads) != "[0 5 10]" {
		t.Fatalf("heads at %v, want [0 5 10]", heads)
	}
}

// BenchmarkHeadRoomPrepare measures the merge preparation of a batch of
// 128 segments of one TCP stream (TSO trains of 16 ending with PSH).
func BenchmarkHeadRoomPrepare(b *testing.B) {
	var h HeadRoom
	pkts := make([][]byte, 128)
	for i := range pkts {
		pkts[i] = tcpPacket(1000, 1380)
		if i%16 == 15 {
			pkts[i][33] |= tcpFlagPSH
		}
	}
	bufs := atOffset(pkts...)
	orig := append([][]byte(nil), bufs...)
	b.SetBytes(int64(128 * len(pkts[0])))
	b.ReportAllocs()
	for b.Loop() {
		copy(bufs, orig)
		h.Prepare(bufs, Offset)
	}
}

// v6UDPPacket is a minimal IPv6 UDP packet with one byte of payload.
func v6UDPPacket() []byte {
	pkt := make([]byte, 40+8+1)
	pkt[0] = 0x60
	binary.BigEndian.PutUint16(pkt[4:], 9)
	pkt[6] = 17
	copy(pkt[8:24], netip.MustParseAddr("fd00::1").AsSlice())
	copy(pkt[24:40], netip.MustParseAddr("fd00::2").AsSlice())
	return pkt
}

// v4UDPPacket is an IPv4 UDP packet of payload bytes between fixed
// addresses (checksums left zero: HeadRoom does not read them).
func v4UDPPacket(payload int) []byte {
	pkt := make([]byte, 28+payload)
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[9] = 17
	copy(pkt[12:16], []byte{10, 0, 0, 1})
	copy(pkt[16:20], []byte{10, 0, 0, 2})
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+payload))
	return pkt
}
