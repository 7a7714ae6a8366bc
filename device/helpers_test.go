package device

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/device/noise"
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

func prefixes(ss ...string) []AllowedIPChange {
	var out []AllowedIPChange
	for _, s := range ss {
		out = append(out, AllowedIPChange{Prefix: netip.MustParsePrefix(s).Masked()})
	}
	return out
}

// bigPrefixes returns n distinct IPv4 /32 and IPv6 /128 prefixes.
func bigPrefixes(n int) []AllowedIPChange {
	out := make([]AllowedIPChange, 0, n)
	for i := 0; i < n; i++ {
		var p netip.Prefix
		if i%2 == 0 {
			p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		} else {
			a := [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}
			p = netip.PrefixFrom(netip.AddrFrom16(a), 128)
		}
		out = append(out, AllowedIPChange{Prefix: p})
	}
	return out
}

// statusRecorder keeps what WriteStatus reports.
type statusRecorder struct {
	dev     Status
	peers   []PeerStatus
	allowed [][]netip.Prefix // per peer, in the order reported
}

func (r *statusRecorder) Device(s Status) error { r.dev = s; return nil }

func (r *statusRecorder) Peer(p PeerStatus) error {
	r.peers = append(r.peers, p)
	r.allowed = append(r.allowed, nil)
	return nil
}

func (r *statusRecorder) AllowedIP(p netip.Prefix) error {
	r.allowed[len(r.allowed)-1] = append(r.allowed[len(r.allowed)-1], p)
	return nil
}

// status returns d's state as WriteStatus reports it.
func status(t testing.TB, d *Device) *statusRecorder {
	t.Helper()
	var r statusRecorder
	if err := d.WriteStatus(&r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// connectConfig makes a device with key priv send to the peer pub at ep,
// which owns the prefix allowed.
func connectConfig(priv, pub noise.Key, ep netip.AddrPort, allowed string) *Config {
	return &Config{PrivateKey: &priv, Peers: []PeerConfig{{PublicKey: pub, Endpoint: &ep, AllowedIPs: prefixes(allowed)}}}
}
