package uapi_test

import (
	"bufio"
	"io"
	"net/netip"
	"runtime"
	"testing"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/tun/memtun"
)

// fleetDevice returns a device holding n peers like a fleet gateway's
// sites: an endpoint, a keepalive and two networks each.
func fleetDevice(t testing.TB, n int) *device.Device {
	t.Helper()
	nw := conntest.NewNetwork()
	d := device.NewDevice(memtun.New("fleet", 1420), nw.NewBind(netip.MustParseAddr("192.0.2.1")), device.Options{})
	t.Cleanup(d.Close)
	k := mustKey(t)
	cfg := &device.Config{PrivateKey: &k}
	for i := range n {
		ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 51820)
		cfg.Peers = append(cfg.Peers, device.PeerConfig{
			PublicKey: mustKey(t), Endpoint: &ep, PersistentKeepalive: ptr(uint16(25)),
			AllowedIPs: []device.AllowedIPChange{
				{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)},
				{Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), 32)},
			},
		})
	}
	must(t, d.Configure(cfg))
	return d
}

// getToDiscard answers one get=1 of d into io.Discard.
func getToDiscard(t testing.TB, d *device.Device) {
	w := uapi.NewWriter(bufio.NewWriterSize(io.Discard, 16<<10))
	must(t, w.Finish(d.WriteStatus(w)))
}

// TestGetOfManyPeersAllocatesLittle: the answer to a get of hundreds of
// peers with a few allowed IPs each is streamed with a buffer or two, not
// one per peer (which once cost 128 KB a peer, 0.2 s for a get of 1,000).
func TestGetOfManyPeersAllocatesLittle(t *testing.T) {
	d := fleetDevice(t, 300)
	getToDiscard(t, d)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	getToDiscard(t, d)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 256<<10 {
		t.Errorf("a get of 300 peers allocated %d bytes, want at most 256 KiB", got)
	}
}

// BenchmarkGetFleet1000 answers a get=1 of 1,000 peers shaped like a
// fleet gateway's sites (the full reload's read of the device), into
// io.Discard: the daemon's side of the cost.
func BenchmarkGetFleet1000(b *testing.B) {
	d := fleetDevice(b, 1000)
	b.ReportAllocs()
	for b.Loop() {
		getToDiscard(b, d)
	}
}
