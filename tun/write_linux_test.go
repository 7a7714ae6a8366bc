package tun

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
	"time"

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
	// checksum they are merged here when the device takes UDP
	// segmentation offload (else the fallback may merge them); without
	// one (a zero field) nobody merges them, and they are written here.
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
	wantFallback := 1
	if nd.gro.g.udp {
		wantFallback = 0
	}
	if fallback.writes != wantFallback {
		t.Errorf("two UDP packets of one flow (USO %v): %d fallback writes, want %d", nd.gro.g.udp, fallback.writes, wantFallback)
	}
	if _, err := nd.gro.write(fallback, [][]byte{udp(0), udp(0)}, off); err != nil {
		t.Fatalf("write of two UDP packets of one flow without a checksum: %v", err)
	}
	if fallback.writes != wantFallback {
		t.Errorf("two UDP packets without a checksum went to the fallback (%d writes, want still %d)", fallback.writes, wantFallback)
	}
	c := request(id + 3)
	if _, err := nd.gro.write(fallback, [][]byte{c}, off); err != nil {
		t.Fatalf("write after the UDP packets: %v", err)
	}
	answered(id + 3)
}

// On a real TUN device that takes UDP segmentation offload: datagrams of
// one flow written in one batch are merged into one GSO write, and a
// socket on the device's address receives every one of them, in order,
// byte for byte, none through the fallback writer.
func TestUDPRunWrittenMergedOnARealTUN(t *testing.T) {
	d, name := newTestTUN(t, "wlu", 1420)
	nd, ok := d.(*nsDevice)
	if !ok || nd.gro == nil {
		t.Fatalf("CreateTUN gave %T without the raw writer; offloads are expected on Linux", d)
	}
	if !nd.gro.g.udp {
		t.Skip("this kernel's TUN takes no UDP segmentation offload (Linux 6.2 and later do)")
	}
	local, peer := bringUp(t, name)
	sock, err := net.ListenUDP("udp4", &net.UDPAddr{IP: local.AsSlice()})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	port := uint16(sock.LocalAddr().(*net.UDPAddr).Port)
	fallback := &countingTUN{Device: nd.Device}

	ps := payloads(11, 1200)
	ps[10] = ps[10][:500]
	bufs := make([][]byte, len(ps))
	for i, p := range ps {
		room := 0
		if i == 0 {
			room = 1 << 16
		}
		bufs[i] = udpDatagram(peer, local, 40001, port, p, room)
	}
	if _, err := nd.gro.write(fallback, bufs, testOffset); err != nil {
		t.Fatalf("write: %v", err)
	}
	if fallback.writes != 0 {
		t.Errorf("%d fallback writes, want 0", fallback.writes)
	}
	if h := bufs[0][testOffset-VirtioHeaderLen+1]; h != virtioGSOUDPL4 {
		t.Errorf("the run's head was written with GSO type %d, want UDP_L4", h)
	}
	sock.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	for i, want := range ps {
		n, from, err := sock.ReadFromUDPAddrPort(buf)
		if err != nil {
			t.Fatalf("datagram %d of %d: %v", i+1, len(ps), err)
		}
		if from.Addr() != peer || from.Port() != 40001 || !bytes.Equal(buf[:n], want) {
			t.Fatalf("datagram %d: %d bytes from %v, want %d bytes from %v:40001 as written", i+1, n, from, len(want), peer)
		}
	}
}
