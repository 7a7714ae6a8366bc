package device

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/control/uapi"
)

// ipPacket builds a UDP packet from src to dst carrying payload, IPv4 or
// IPv6 depending on the addresses.
func ipPacket(src, dst netip.Addr, payload []byte) []byte {
	udp := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 1234)
	binary.BigEndian.PutUint16(udp[2:], 5678)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], payload)
	if src.Is4() {
		h := make([]byte, 20, 20+len(udp))
		h[0] = 0x45
		binary.BigEndian.PutUint16(h[2:], uint16(20+len(udp)))
		h[8] = 64
		h[9] = 17
		s, d := src.As4(), dst.As4()
		copy(h[12:], s[:])
		copy(h[16:], d[:])
		var sum uint32
		for i := 0; i < 20; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(h[i:]))
		}
		for sum > 0xffff {
			sum = sum>>16 + sum&0xffff
		}
		binary.BigEndian.PutUint16(h[10:], ^uint16(sum))
		return append(h, udp...)
	}
	h := make([]byte, 40, 40+len(udp))
	h[0] = 0x60
	binary.BigEndian.PutUint16(h[4:], uint16(len(udp)))
	h[6] = 17
	h[7] = 64
	s, d := src.As16(), dst.As16()
	copy(h[8:], s[:])
	copy(h[24:], d[:])
	return append(h, udp...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func mustKey(t testing.TB) noise.PrivateKey {
	t.Helper()
	k, err := noise.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ptr[T any](v T) *T { return &v }

func prefixes(ss ...string) []uapi.AllowedIPChange {
	var out []uapi.AllowedIPChange
	for _, s := range ss {
		out = append(out, uapi.AllowedIPChange{Prefix: netip.MustParsePrefix(s).Masked()})
	}
	return out
}
