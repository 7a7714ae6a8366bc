package tun

import (
	"encoding/binary"
	"testing"
)

// udpPacket builds an IPv4 (or IPv6) UDP packet at testOffset from
// source address byte src and port sport to a fixed destination.
func udpPacket(v6 bool, src byte, sport uint16) []byte {
	var p []byte
	if v6 {
		p = make([]byte, testOffset+40+8+32)
		ip := p[testOffset:]
		ip[0] = 6 << 4
		binary.BigEndian.PutUint16(ip[4:6], 8+32)
		ip[6] = 17
		ip[7] = 64
		copy(ip[8:24], []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, src})
		copy(ip[24:40], []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1})
		binary.BigEndian.PutUint16(ip[40:], sport)
		binary.BigEndian.PutUint16(ip[42:], 9)
		return p
	}
	p = make([]byte, testOffset+20+8+32)
	ip := p[testOffset:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:4], 20+8+32)
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], []byte{10, 89, 1, src})
	copy(ip[16:20], []byte{10, 89, 0, 1})
	binary.BigEndian.PutUint16(ip[20:], sport)
	binary.BigEndian.PutUint16(ip[22:], 9)
	ip[26] = 0x12 // a checksum field that is not zero ("no checksum")
	return p
}

// TestRestFlowsDistinct: a batch with one packet of each of many flows
// (a gateway's batch across its peers) is distinct; two packets of one
// UDP or TCP flow anywhere in the batch are not; packets no writer
// merges (ICMP, fragments, IPv4 UDP without a checksum) never make a batch non-distinct; and the
// table is empty again after every call.
func TestRestFlowsDistinct(t *testing.T) {
	var ft flowTable
	many := func(v6 bool, n int) [][]byte {
		var bufs [][]byte
		for i := range n {
			bufs = append(bufs, udpPacket(v6, byte(i), 40000))
		}
		return bufs
	}
	icmp := udpPacket(false, 200, 40000)
	icmp[testOffset+9] = 1
	frag := udpPacket(false, 201, 40000)
	frag[testOffset+6] = 0x20 // MF
	fragTwin := udpPacket(false, 201, 40000)
	fragTwin[testOffset+7] = 8 // fragment offset
	noSum := udpPacket(false, 202, 40000)
	noSum[testOffset+26] = 0 // IPv4 UDP without a checksum: never merged
	tcp := build(defaultSpec(false, 1, []byte("tcp")), 0)

	cases := []struct {
		name string
		bufs [][]byte
		want bool
	}{
		{"one packet of each of 100 IPv4 flows", many(false, 100), true},
		{"one packet of each of 100 IPv6 flows", many(true, 100), true},
		{"two packets of one IPv4 UDP flow at the ends of 100", append(many(false, 100), udpPacket(false, 0, 40000)), false},
		{"two packets of one IPv6 UDP flow", append(many(true, 3), udpPacket(true, 1, 40000)), false},
		{"the same addresses, another source port", append(many(false, 3), udpPacket(false, 1, 40001)), true},
		{"two TCP packets of one flow", [][]byte{tcp, build(defaultSpec(false, 4, []byte("tcp")), 0)}, false},
		{"ICMP and fragments twice over", [][]byte{icmp, icmp, frag, fragTwin, frag}, true},
		{"IPv4 UDP of one flow without a checksum", [][]byte{noSum, noSum, noSum}, true},
		{"more packets than the table takes", many(false, restSlots/2+1), false},
	}
	for _, c := range cases {
		if got := ft.restFlowsDistinct(c.bufs, testOffset); got != c.want {
			t.Errorf("%s: restFlowsDistinct = %v, want %v", c.name, got, c.want)
		}
		for i, s := range ft.slot {
			if s != 0 {
				t.Fatalf("%s: slot %d left filled", c.name, i)
			}
		}
	}
	bufs := many(false, 100)
	if a := testing.AllocsPerRun(100, func() { ft.restFlowsDistinct(bufs, testOffset) }); a != 0 {
		t.Errorf("restFlowsDistinct allocates %.1f per call, want 0", a)
	}
}
