package fleet

import (
	"context"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// TestAgentMemoryPerSite measures what an agent keeps per site: the Go
// heap after a collection, with 1,000 records known and applied, less the
// heap with none. It logs the figure (docs/gateway.md#scale) and fails
// only past 16 KB, far above what it is, to catch a leak that grows with
// every record.
func TestAgentMemoryPerSite(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	const sites = 1000
	m := store.NewMem()
	g := testGateway(t, "a", `"10.1.0.0/16"`, "")
	r := start(t, m, g)
	eventually(t, "published", func() bool { return r.a.Status().Published })
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for i := 0; i < sites; i++ {
		k, _ := wgquick.GeneratePrivateKey()
		rec := Record{Name: fmt.Sprintf("s%04d", i), PublicKey: k.PublicKey(), Endpoints: []string{fmt.Sprintf("192.0.2.%d:%d", 1+i%250, 20000+i)},
			Networks: []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.%d.%d.0/24", 128+i/256, i%256))}}
		m.Put(context.Background(), "/t/sites/"+rec.Name, rec.Encode(), 0, store.Always)
	}
	eventually(t, "all applied", func() bool { return r.a.Status().InSync == sites+1 })
	time.Sleep(100 * time.Millisecond)
	// What the fake device holds is the engine's business, not the
	// agent's: drop it before measuring.
	r.dev.mu.Lock()
	r.dev.cfg = nil
	r.dev.mu.Unlock()
	after := heap()
	// The store's copy of the records (the log and the keys) is etcd's,
	// not the agent's: subtract a second store holding the same.
	m2 := store.NewMem()
	kvs, _, _ := m.List(context.Background(), "/t/sites/")
	b2 := heap()
	for _, kv := range kvs {
		m2.Put(context.Background(), kv.Key, kv.Value, 0, store.Always)
	}
	storeCost := int64(heap()) - int64(b2)
	runtime.KeepAlive(m2)
	per := (float64(int64(after)-int64(before)) - float64(storeCost)) / sites
	t.Logf("agent heap per site: %.0f bytes (%.0f with the test's in-memory store, which shares the record bytes; %d sites; heap %d -> %d, less the store's %d)", per, float64(int64(after)-int64(before))/sites, sites, before, after, storeCost)
	if per > 16<<10 {
		t.Errorf("the agent keeps %.0f bytes per site", per)
	}
}
