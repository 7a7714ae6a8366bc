package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// benchAgent returns an agent of gateway "a" that knows n site records
// and has applied them once, its status and cache files in a temporary
// directory as `gateway up` has them; set is its SetPeers.
func benchAgent(b *testing.B, n int, set func(context.Context, *wgquick.Config, []wgquick.Peer, []wgquick.Peer) error) (*Agent, []Record) {
	b.Helper()
	k, err := wgquick.GeneratePrivateKey()
	if err != nil {
		b.Fatal(err)
	}
	g, err := gateway.Parse("/etc/wirelane/a.toml", []byte(gatewaySource("a", `"10.1.0.0/16"`, "", k)))
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	a, err := New(Config{Gateway: g, Store: store.NewMem(), SetPeers: set,
		Apply:      func(context.Context, *wgquick.Config) error { return nil },
		StatusFile: filepath.Join(dir, "status.json"), CacheFile: filepath.Join(dir, "cache.json"),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	recs := make([]Record, n)
	for i := range recs {
		pk, _ := wgquick.GeneratePrivateKey()
		recs[i] = Record{Name: fmt.Sprintf("s%04d", i), PublicKey: pk.PublicKey(), Endpoints: []string{fmt.Sprintf("192.0.2.%d:%d", 1+i%250, 20000+i)},
			Networks: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256))}}
		key := a.prefix + SitesKey + recs[i].Name
		a.records[key] = store.KV{Key: key, Value: recs[i].Encode(), CreateRev: int64(i + 1), ModRev: int64(i + 1)}
	}
	a.rev = int64(n)
	if err := a.apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	return a, recs
}

// BenchmarkApplyOneChangeOf1000 is the agent's side of one change among
// 1,000 sites (a site's network moved): the record set resolved again,
// the changed peer found, the status and cache files written. SetPeers
// is a no-op here; BenchmarkSetPeersOneOf1000 in wgtunnel is the device's
// side, and scripts/fleet-scale.sh the whole of it.
func BenchmarkApplyOneChangeOf1000(b *testing.B) {
	sent := 0
	a, recs := benchAgent(b, 1000, func(_ context.Context, _ *wgquick.Config, old, now []wgquick.Peer) error {
		sent++
		return nil
	})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		r := recs[i%len(recs)]
		r.Networks = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 250, byte(i >> 8), byte(i)}), 32)}
		i++
		key := a.prefix + SitesKey + r.Name
		a.mu.Lock()
		kv := a.records[key]
		kv.Value, kv.ModRev = r.Encode(), a.rev+1
		a.records[key], a.rev = kv, a.rev+1
		a.mu.Unlock()
		if err := a.apply(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	if sent != i {
		b.Fatalf("%d changes sent for %d changes", sent, i)
	}
}
