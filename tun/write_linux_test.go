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

// TestLonePacketWrittenRaw: a batch whose only non-TCP packet has nothing
// to be merged with is written by the package itself (raw, with a zero
// virtio-net header, whatever the caller left there); two or more go to
// the fallback, which merges UDP. Either way the kernel takes them: the
// echo requests are answered.
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
	if fallback.writes != 1 {
		t.Errorf("two packets: %d fallback writes, want 1", fallback.writes)
	}
	answered(id + 1)
	answered(id + 2)
}
