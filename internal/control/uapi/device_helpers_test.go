package uapi_test

import (
	"encoding/hex"
	"net/netip"
	"testing"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

// Helpers of the tests that serve a real device (package uapi_test, since
// the device cannot import this package's tests).

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func hexKey(k noise.Key) string { return hex.EncodeToString(k[:]) }

func mustKey(t testing.TB) noise.Key {
	t.Helper()
	k, err := noise.GeneratePrivateKey()
	must(t, err)
	return k
}

// newSolo returns a device, down, on an in-memory TUN and network.
func newSolo(t *testing.T) (*device.Device, *conntest.Network, *conntest.Bind) {
	t.Helper()
	nw := conntest.NewNetwork()
	b := nw.NewBind(netip.MustParseAddr("192.0.2.1"))
	d := device.NewDevice(memtun.New("solo", 1420), b, device.Options{})
	t.Cleanup(d.Close)
	return d, nw, b
}

const bigPrefixCount = 131071

// bigPrefixes returns n distinct IPv4 /32 and IPv6 /128 prefixes.
func bigPrefixes(n int) []device.AllowedIPChange {
	out := make([]device.AllowedIPChange, 0, n)
	for i := 0; i < n; i++ {
		var p netip.Prefix
		if i%2 == 0 {
			p = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
		} else {
			a := [16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i >> 16), byte(i >> 8), byte(i)}
			p = netip.PrefixFrom(netip.AddrFrom16(a), 128)
		}
		out = append(out, device.AllowedIPChange{Prefix: p})
	}
	return out
}

// lineCounter counts the lines written to it.
type lineCounter struct{ n int }

func (c *lineCounter) Write(p []byte) (int, error) {
	for _, b := range p {
		if b == '\n' {
			c.n++
		}
	}
	return len(p), nil
}
