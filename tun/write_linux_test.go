package tun

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// countingTUN counts the Writes that reach the wireguard tun package.
type countingTUN struct {
	wgtun.Device
	writes int
}

func (c *countingTUN) Write(bufs [][]byte, offset int) (int, error) {
	c.writes++
	return c.Device.Write(bufs, offset)
}

// TestLonePacketWrittenRaw: a batch whose non-TCP packets have nothing
// to be merged with (one packet, or several of which no two share a UDP
// or TCP flow) is written by the package itself (raw, with a zero
// virtio-net header, whatever the caller left there); two packets of one
// UDP flow go to the fallback, which merges UDP. Either way the kernel
// takes them: the echo requests are answered.
func TestLonePacketWrittenRaw(t *testing.T) {
	d, name := newTestTUN(t, "wlw", 1420)
	nd, ok := d.(*nsDevice)
	if !ok || nd.gro == nil {
		t.Fatalf("CreateTUN gave %T without the TCP writer; offloads are expected on Linux", d)
	}
	local, peer := bringUp(t, name)
	fallback := &countingTUN{Device: nd.Device}

	const off = 16
	request := func(id uint16) []byte {
		req := echoRequest(peer, local, id)
		buf := make([]byte, off+len(req))
		for i := range off {
			buf[i] = 0xff // not a valid virtio-net header
		}
		copy(buf[off:], req)
		return buf
	}
	answered := func(id uint16) {
		t.Helper()
		readUntil(t, d, func(p []byte) bool {
			return len(p) >= 28 && p[0]>>4 == 4 && p[9] == unix.IPPROTO_ICMP && p[20] == 0 &&
				binary.BigEndian.Uint16(p[24:]) == id
		})
	}

	id := uint16(rand.Uint32())
	one := request(id)
	n, err := nd.gro.write(fallback, [][]byte{one}, off)
	if err != nil {
		t.Fatalf("write of one packet: %v", err)
	}
	if want := len(one) - off + VirtioHeaderLen; n != want {
		t.Errorf("write of one packet reported %d bytes, want %d", n, want)
	}
	if fallback.writes != 0 {
		t.Errorf("a lone packet went to the fallback (%d writes)", fallback.writes)
	}
	answered(id)

	a, b := request(id+1), request(id+2)
	if _, err := nd.gro.write(fallback, [][]byte{a, b}, off); err != nil {
		t.Fatalf("write of two packets: %v", err)
	}
	if fallback.writes != 0 {
		t.Errorf("two echo requests (no flow to merge): %d fallback writes, want 0", fallback.writes)
	}
	answered(id + 1)
	answered(id + 2)

	// Two UDP packets of one flow, to a port nobody listens on: with a
	// checksum the fallback may merge them; without one (a zero field) it
	// never does, and they are written here.
	udp := func(sum uint16) []byte {
		p := make([]byte, off+20+8+32)
		ip := p[off:]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:4], 20+8+32)
		ip[8] = 64
		ip[9] = unix.IPPROTO_UDP
		s, d := peer.As4(), local.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		binary.BigEndian.PutUint16(ip[10:], checksum(ip[:20]))
		binary.BigEndian.PutUint16(ip[20:], 40000)
		binary.BigEndian.PutUint16(ip[22:], 9)
		binary.BigEndian.PutUint16(ip[24:], 8+32)
		binary.BigEndian.PutUint16(ip[26:], sum)
		return p
	}
	if _, err := nd.gro.write(fallback, [][]byte{udp(0x1234), udp(0x1234)}, off); err != nil {
		t.Fatalf("write of two UDP packets of one flow: %v", err)
	}
	if fallback.writes != 1 {
		t.Errorf("two UDP packets of one flow: %d fallback writes, want 1", fallback.writes)
	}
	if _, err := nd.gro.write(fallback, [][]byte{udp(0), udp(0)}, off); err != nil {
		t.Fatalf("write of two UDP packets of one flow without a checksum: %v", err)
	}
	if fallback.writes != 1 {
		t.Errorf("two UDP packets without a checksum went to the fallback (%d writes, want still 1)", fallback.writes)
	}
	c := request(id + 3)
	if _, err := nd.gro.write(fallback, [][]byte{c}, off); err != nil {
		t.Fatalf("write after the UDP packets: %v", err)
	}
	answered(id + 3)
}
