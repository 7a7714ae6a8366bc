package fleet

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// These tests run agents on store.Mem with an Apply that records the
// configuration instead of reloading a device: the reconciler's logic
// without a network. The end-to-end tests (internal/testkit/e2e,
// TestFleet*) run the same agents on a real etcd cluster and real
// gateways.

// testGateway is a gateway with a [fleet] table, parsed from TOML.
func testGateway(t *testing.T, site, networks, extra string) *gateway.Gateway {
	t.Helper()
	k, err := wgquick.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.Parse("/etc/wirelane/"+site+".toml", []byte(gatewaySource(site, networks, extra, k)))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// gatewaySource is the file testGateway parses.
func gatewaySource(site, networks, extra string, k wgquick.Key) string {
	return "[interface]\nname = \"wg-" + site + "\"\nprivate_key = \"" + k.String() + "\"\n" +
		"[fleet]\nendpoints = [\"https://127.0.0.1:2379\"]\nca_file = \"ca\"\ncert_file = \"c\"\nkey_file = \"k\"\n" +
		"prefix = \"/t\"\nsite = \"" + site + "\"\nnetworks = [" + networks + "]\npublic_endpoints = [\"192.0.2.1:51820\"]\nlease_ttl = 3\n" + extra
}

// fakeDevice records what the agent applies: apply takes a whole
// configuration (a full reload), setPeers changes the peers it holds by
// the difference between old and now (as wgtunnel.SetPeers sends it).
type fakeDevice struct {
	mu    sync.Mutex
	cfg   *wgquick.Config
	calls int // applies of either kind
	full  int // full applies
	// sent is how many peers the last setPeers changed; changes counts
	// the applies that changed the peers (a flap would).
	sent, changes int
}

func (d *fakeDevice) apply(_ context.Context, c *wgquick.Config) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg == nil || peerSet(d.cfg.Peers) != peerSet(c.Peers) {
		d.changes++
	}
	d.cfg, d.calls, d.full = c, d.calls+1, d.full+1
	return nil
}

// peerSet identifies peers in any order.
func peerSet(ps []wgquick.Peer) string {
	var s []string
	for _, p := range ps {
		s = append(s, fingerprint([]wgquick.Peer{p}))
	}
	slices.Sort(s)
	return strings.Join(s, "\n")
}

func (d *fakeDevice) setPeers(_ context.Context, c *wgquick.Config, old, now []wgquick.Peer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cfg == nil {
		d.cfg = &wgquick.Config{}
	}
	peers := map[wgquick.Key]wgquick.Peer{}
	for _, p := range d.cfg.Peers {
		peers[p.PublicKey] = p
	}
	was := map[wgquick.Key]wgquick.Peer{}
	for _, p := range old {
		was[p.PublicKey] = p
	}
	d.sent = 0
	for _, p := range old {
		if !slices.ContainsFunc(now, func(q wgquick.Peer) bool { return q.PublicKey == p.PublicKey }) {
			delete(peers, p.PublicKey)
			d.sent++
		}
	}
	for _, p := range now {
		if o, ok := was[p.PublicKey]; !ok || fingerprint([]wgquick.Peer{o}) != fingerprint([]wgquick.Peer{p}) {
			peers[p.PublicKey] = p
			d.sent++
		}
	}
	n := *d.cfg
	n.Peers = nil
	for _, p := range peers {
		n.Peers = append(n.Peers, p)
	}
	d.cfg, d.calls = &n, d.calls+1
	if d.sent > 0 {
		d.changes++
	}
	return nil
}

// peers returns the applied peers' allowed IPs by public key.
func (d *fakeDevice) peers() map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := map[string]string{}
	if d.cfg == nil {
		return m
	}
	for _, p := range d.cfg.Peers {
		var s []string
		for _, a := range p.AllowedIPs {
			s = append(s, a.String())
		}
		m[p.PublicKey.String()] = strings.Join(s, ",")
	}
	return m
}

type runningAgent struct {
	a    *Agent
	dev  *fakeDevice
	stop func()
	done chan struct{}
}

func start(t *testing.T, st store.Store, g *gateway.Gateway) *runningAgent {
	t.Helper()
	dev := &fakeDevice{}
	a, err := New(Config{Gateway: g, Store: st, Apply: dev.apply, SetPeers: dev.setPeers, ApplyDelay: 10 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningAgent{a: a, dev: dev, stop: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func pub(g *gateway.Gateway) string { return g.PrivateKey.PublicKey().String() }

func TestAgentsMeshAndDropAnExpiredSite(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	gb := testGateway(t, "b", `"10.2.0.0/16"`, "")
	gc := testGateway(t, "c", `"10.3.0.0/16"`, "")
	ra, rb := start(t, m, ga), start(t, m, gb)
	rc := start(t, m, gc)
	eventually(t, "a full mesh", func() bool {
		return ra.dev.peers()[pub(gb)] == "10.2.0.0/16" && ra.dev.peers()[pub(gc)] == "10.3.0.0/16" &&
			rb.dev.peers()[pub(ga)] == "10.1.0.0/16" && rc.dev.peers()[pub(gb)] == "10.2.0.0/16"
	})
	// The status follows the device: an apply sets the peers first and
	// records what it did after.
	eventually(t, "a's status in sync", func() bool { st := ra.a.Status(); return st.Known == 3 && st.InSync == 3 })
	st := ra.a.Status()
	if st.Known != 3 || st.InSync != 3 || st.Conflicts != 0 || !st.StoreReachable || !st.Published {
		t.Fatalf("status %+v", st)
	}
	// c's lease expires (its gateway died): a and b drop it.
	kv, _, _ := m.Get(context.Background(), "/t/sites/c")
	rc.stop()
	<-rc.done // its Run revoked the lease already; expire for the record
	m.Expire(kv.Lease)
	eventually(t, "c removed", func() bool {
		_, inA := ra.dev.peers()[pub(gc)]
		_, inB := rb.dev.peers()[pub(gc)]
		return !inA && !inB
	})
	if _, ok := ra.dev.peers()[pub(gb)]; !ok {
		t.Fatal("b was removed with c")
	}
}

func TestAnExpiredLeaseIsPublishedAgain(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	start(t, m, ga)
	var kv store.KV
	eventually(t, "a published", func() bool { var ok bool; kv, ok, _ = m.Get(context.Background(), "/t/sites/a"); return ok })
	m.Expire(kv.Lease)
	eventually(t, "a published again", func() bool {
		k, ok, _ := m.Get(context.Background(), "/t/sites/a")
		return ok && k.Lease != kv.Lease
	})
}

func TestOverlappingNetworksTheOlderRecordWins(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	ra := start(t, m, ga)
	gb := testGateway(t, "b", `"10.2.0.0/16"`, "")
	gc := testGateway(t, "c", `"10.2.5.0/24"`, "")
	start(t, m, gb)
	eventually(t, "b", func() bool { return ra.dev.peers()[pub(gb)] != "" })
	start(t, m, gc)
	eventually(t, "c refused", func() bool {
		for _, s := range ra.a.Status().Sites {
			if s.Name == "c" && s.State == StateConflict && strings.Contains(s.Reason, "overlaps 10.2.0.0/16 of site b") {
				return true
			}
		}
		return false
	})
	if _, ok := ra.dev.peers()[pub(gc)]; ok {
		t.Fatal("the conflicting site became a peer")
	}
	if st := ra.a.Status(); st.Conflicts != 1 {
		t.Fatalf("conflicts = %d, want 1", st.Conflicts)
	}
}

func TestABadRecordIsReportedAndIgnored(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	ra := start(t, m, ga)
	m.Put(context.Background(), "/t/sites/evil", []byte(`{"v":1,"name":"evil","public_key":"not a key","networks":["10.9.0.0/16"]}`), 0, store.Always)
	m.Put(context.Background(), "/t/sites/liar", []byte(`{"v":1,"name":"other","public_key":"`+testKeyA+`","networks":["10.8.0.0/16"]}`), 0, store.Always)
	eventually(t, "bad records reported", func() bool {
		st := ra.a.Status()
		n := 0
		for _, s := range st.Sites {
			if s.State == StateBad {
				n++
			}
		}
		return n == 2 && st.Conflicts == 2
	})
	if len(ra.dev.peers()) != 0 {
		t.Fatalf("peers %v from bad records", ra.dev.peers())
	}
}

func TestANameTakenByAnotherKeyIsNotPublished(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	ra := start(t, m, ga)
	eventually(t, "a published", func() bool { return ra.a.Status().Published })
	// A second gateway with a's name but its own key.
	imp := testGateway(t, "a", `"10.7.0.0/16"`, "")
	ri := start(t, m, imp)
	eventually(t, "the impostor refused", func() bool {
		st := ri.a.Status()
		return !st.Published && strings.Contains(st.PublishError, "is taken by public key "+pub(ga))
	})
	kv, _, _ := m.Get(context.Background(), "/t/sites/a")
	r, _ := DecodeRecord(kv.Key, kv.Value)
	if r.PublicKey.String() != pub(ga) {
		t.Fatal("the impostor replaced the record")
	}
	// The impostor also reports the record under its name as a conflict.
	eventually(t, "conflict shown", func() bool {
		for _, s := range ri.a.Status().Sites {
			if s.Name == "a" && s.State == StateConflict {
				return true
			}
		}
		return false
	})
}

func TestUnreachableStoreKeepsThePeersAndResyncs(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	gb := testGateway(t, "b", `"10.2.0.0/16"`, "")
	ra := start(t, m, ga)
	start(t, m, gb)
	eventually(t, "mesh", func() bool { return ra.dev.peers()[pub(gb)] != "" })
	ra.dev.mu.Lock()
	changes := ra.dev.changes
	ra.dev.mu.Unlock()
	m.SetDown(true)
	eventually(t, "unreachable reported", func() bool { return !ra.a.Status().StoreReachable })
	time.Sleep(300 * time.Millisecond)
	if ra.dev.peers()[pub(gb)] == "" {
		t.Fatal("fail static: b was removed while the store was down")
	}
	m.SetDown(false)
	eventually(t, "reachable again", func() bool { return ra.a.Status().StoreReachable })
	// No change: the resync's full apply changes no peer (no flapping).
	time.Sleep(300 * time.Millisecond)
	ra.dev.mu.Lock()
	again := ra.dev.changes
	ra.dev.mu.Unlock()
	if again != changes {
		t.Fatalf("%d applies changed the peers after a resync without change, want none", again-changes)
	}
	gc := testGateway(t, "c", `"10.3.0.0/16"`, "")
	start(t, m, gc)
	eventually(t, "a change after the store returns converges", func() bool { return ra.dev.peers()[pub(gc)] == "10.3.0.0/16" })
}

func TestStaticSitesStayBesideTheFleet(t *testing.T) {
	m := store.NewMem()
	k, _ := wgquick.GeneratePrivateKey()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "[[site]]\nname = \"s\"\npublic_key = \""+k.PublicKey().String()+"\"\nnetworks = [\"10.50.0.0/16\"]\n")
	ra := start(t, m, ga)
	gb := testGateway(t, "b", `"10.50.1.0/24"`, "") // overlaps the static site
	gc := testGateway(t, "c", `"10.3.0.0/16"`, "")
	start(t, m, gb)
	start(t, m, gc)
	eventually(t, "c beside s, b refused", func() bool {
		p := ra.dev.peers()
		_, hasB := p[pub(gb)]
		return p[k.PublicKey().String()] == "10.50.0.0/16" && p[pub(gc)] == "10.3.0.0/16" && !hasB
	})
}

func TestLocationsGoThroughTheirLeader(t *testing.T) {
	key := func() wgquick.Key { k, _ := wgquick.GeneratePrivateKey(); return k.PublicKey() }
	self := &Self{Name: "e1", PublicKey: key(), Networks: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, Location: "eu"}
	rec := func(name, loc, nets string, rev int64) (store.KV, wgquick.Key) {
		k := key()
		r := Record{Name: name, PublicKey: k, Location: loc, Endpoints: []string{"192.0.2.1:1"}, Networks: []netip.Prefix{netip.MustParsePrefix(nets)}}
		return store.KV{Key: "/t/sites/" + name, Value: r.Encode(), CreateRev: rev}, k
	}
	kvE0, e0 := rec("e0", "eu", "10.0.0.0/16", 1) // eu's leader: older than e1
	kvU0, u0 := rec("u0", "us", "10.10.0.0/16", 2)
	kvU1, _ := rec("u1", "us", "10.11.0.0/16", 3)
	kvSelf := store.KV{Key: "/t/sites/e1", Value: (&Record{Name: "e1", PublicKey: self.PublicKey, Location: "eu", Networks: self.Networks, Endpoints: []string{"192.0.2.9:1"}}).Encode(), CreateRev: 5}
	peers, states := resolve(self, "/t", []store.KV{kvE0, kvU0, kvU1, kvSelf})
	// e1 is not eu's leader: one peer, e0, carrying everything.
	if len(peers) != 1 || peers[0].PublicKey != e0 {
		t.Fatalf("peers %+v, want e0 only", peers)
	}
	got := slices.Sorted(slices.Values(prefixStrings(peers[0].AllowedIPs)))
	if want := []string{"10.0.0.0/16", "10.10.0.0/16", "10.11.0.0/16"}; !slices.Equal(got, want) {
		t.Fatalf("e0 carries %v, want %v", got, want)
	}
	for _, s := range states {
		if (s.Name == "u0" || s.Name == "u1") && s.State != StateVia {
			t.Errorf("%s: %s, want via", s.Name, s.State)
		}
	}
	// From eu's leader: u0 (us's leader) carries u1.
	selfE0 := &Self{Name: "e0", PublicKey: e0, Location: "eu", Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}}
	peers, _ = resolve(selfE0, "/t", []store.KV{kvE0, kvU0, kvU1, kvSelf})
	byKey := map[wgquick.Key][]string{}
	for _, p := range peers {
		byKey[p.PublicKey] = prefixStrings(p.AllowedIPs)
	}
	if len(peers) != 2 || !slices.Equal(byKey[u0], []string{"10.10.0.0/16", "10.11.0.0/16"}) || len(byKey[self.PublicKey]) != 1 {
		t.Fatalf("leader's peers %v", byKey)
	}
	// Without locations: the full mesh.
	flat := &Self{Name: "x", PublicKey: key(), Networks: []netip.Prefix{netip.MustParsePrefix("10.99.0.0/16")}}
	if peers, _ := resolve(flat, "/t", []store.KV{kvE0, kvU0, kvU1, kvSelf}); len(peers) != 2 {
		// x has no location: it reaches each location through its leader.
		t.Fatalf("%d peers from a site without a location, want 2 (the leaders)", len(peers))
	}
}

func prefixStrings(ps []netip.Prefix) []string {
	var s []string
	for _, p := range ps {
		s = append(s, p.String())
	}
	return s
}

func TestADeletedRecordIsPutBack(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	start(t, m, ga)
	eventually(t, "a published", func() bool { _, ok, _ := m.Get(context.Background(), "/t/sites/a"); return ok })
	m.Delete("/t/sites/a") // an operator's etcdctl del
	eventually(t, "a published again", func() bool { _, ok, _ := m.Get(context.Background(), "/t/sites/a"); return ok })
}

func TestRecordsMayNotRouteTheStoreOrAnEndpointIntoTheTunnel(t *testing.T) {
	key := func() wgquick.Key { k, _ := wgquick.GeneratePrivateKey(); return k.PublicKey() }
	self := &Self{Name: "a", PublicKey: key(), Networks: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")},
		Protected: []netip.Addr{netip.MustParseAddr("172.31.0.1")}}
	rec := func(name, nets, ep string, rev int64) store.KV {
		r := Record{Name: name, PublicKey: key(), Endpoints: []string{ep}, Networks: []netip.Prefix{netip.MustParsePrefix(nets)}}
		return store.KV{Key: "/t/sites/" + name, Value: r.Encode(), CreateRev: rev}
	}
	kvs := []store.KV{
		rec("b", "10.2.0.0/16", "192.0.2.2:1", 1),
		rec("store", "172.31.0.0/24", "192.0.2.3:1", 2), // holds the etcd member
		rec("loop", "192.0.2.0/28", "192.0.2.4:1", 3),   // holds b's endpoint
		rec("inside", "10.4.0.0/16", "10.2.9.9:1", 4),   // its endpoint is in b's network
	}
	peers, states := resolve(self, "/t", kvs)
	if len(peers) != 1 {
		t.Fatalf("%d peers, want b only", len(peers))
	}
	want := map[string]string{"store": "holds this gateway's endpoint or store 172.31.0.1", "loop": "holds the endpoint of site b", "inside": "is inside 10.2.0.0/16 of site b"}
	for _, s := range states {
		if w, ok := want[s.Name]; ok && (s.State != StateConflict || !strings.Contains(s.Reason, w)) {
			t.Errorf("%s: %s %q, want a conflict: %s", s.Name, s.State, s.Reason, w)
		}
	}
	if _, err := DecodeRecord("/t/sites/x", []byte(`{"v":1,"name":"x","public_key":"`+testKeyA+`","networks":["::/0"]}`)); err == nil || !strings.Contains(err.Error(), "default route") {
		t.Errorf("a default route in a record: %v", err)
	}
}

func TestAGatewayStartedWhileTheStoreIsDownUsesItsCache(t *testing.T) {
	m := store.NewMem()
	cache := filepath.Join(t.TempDir(), "a.json")
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	gb := testGateway(t, "b", `"10.2.0.0/16"`, "")
	startWith := func(g *gateway.Gateway) *runningAgent {
		dev := &fakeDevice{}
		a, err := New(Config{Gateway: g, Store: m, Apply: dev.apply, ApplyDelay: 10 * time.Millisecond, CacheFile: cache, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &runningAgent{a: a, dev: dev, stop: cancel, done: make(chan struct{})}
		go func() { defer close(r.done); a.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	ra := startWith(ga)
	start(t, m, gb)
	eventually(t, "b", func() bool { return ra.dev.peers()[pub(gb)] != "" })
	m.SetDown(true)
	ra.stop()
	<-ra.done
	again := startWith(ga) // restarted with the store down
	eventually(t, "b from the cache", func() bool { return again.dev.peers()[pub(gb)] == "10.2.0.0/16" })
	if again.a.Status().StoreReachable {
		t.Fatal("reachable while down")
	}
}

// TestAChangeIsSentAsTheChangedPeersOnly: once the fleet is applied, one
// record that changes is sent to the device as that one peer (SetPeers),
// not as a full apply that reads the device.
func TestAChangeIsSentAsTheChangedPeersOnly(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	ra := start(t, m, ga)
	eventually(t, "published", func() bool { return ra.a.Status().Published })
	keys := map[int]wgquick.Key{}
	put := func(i int, network string) {
		k, ok := keys[i]
		if !ok {
			pk, _ := wgquick.GeneratePrivateKey()
			k = pk.PublicKey()
			keys[i] = k
		}
		rec := Record{Name: "s" + string(rune('a'+i)), PublicKey: k, Networks: []netip.Prefix{netip.MustParsePrefix(network)}}
		m.Put(context.Background(), "/t/sites/"+rec.Name, rec.Encode(), 0, store.Always)
	}
	for i := 0; i < 20; i++ {
		put(i, "10.100."+itoa(i)+".0/24")
	}
	eventually(t, "all applied", func() bool { return ra.a.Status().InSync == 21 && len(ra.dev.peers()) == 20 })
	time.Sleep(100 * time.Millisecond)
	ra.dev.mu.Lock()
	full := ra.dev.full
	ra.dev.mu.Unlock()
	put(7, "10.200.0.0/24")
	eventually(t, "the change applied", func() bool { return ra.dev.peers()[keys[7].String()] == "10.200.0.0/24" })
	ra.dev.mu.Lock()
	defer ra.dev.mu.Unlock()
	if ra.dev.full != full {
		t.Errorf("%d full applies for one changed record, want none", ra.dev.full-full)
	}
	if ra.dev.sent != 1 {
		t.Errorf("the change sent %d peers, want 1", ra.dev.sent)
	}
	if len(ra.dev.cfg.Peers) != 20 {
		t.Errorf("the device holds %d peers, want 20", len(ra.dev.cfg.Peers))
	}
}

// TestAPeerChangedBehindTheAgentIsReconciled: the agent sends changes
// from its own record of what it applied, so a peer removed from the
// device by someone else is put back by the next full apply (every
// ReconcileEvery, and at every resync).
func TestAPeerChangedBehindTheAgentIsReconciled(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	gb := testGateway(t, "b", `"10.2.0.0/16"`, "")
	dev := &fakeDevice{}
	a, err := New(Config{Gateway: ga, Store: m, Apply: dev.apply, SetPeers: dev.setPeers, ApplyDelay: 10 * time.Millisecond,
		ReconcileEvery: 300 * time.Millisecond, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	start(t, m, gb)
	eventually(t, "b a peer", func() bool { return dev.peers()[pub(gb)] == "10.2.0.0/16" })
	dev.mu.Lock()
	n := *dev.cfg
	n.Peers = nil // someone else removed it (wg set IF peer KEY remove)
	dev.cfg = &n
	dev.mu.Unlock()
	eventually(t, "b put back", func() bool { return dev.peers()[pub(gb)] == "10.2.0.0/16" })
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestUpdateTakesTheNewFileInPlace: Update with a new reading of the file
// (another network, a static site) applies it by a full apply with the
// fleet's peers kept, and publishes the changed record; a new prefix is
// ErrRestart, and changes nothing.
func TestUpdateTakesTheNewFileInPlace(t *testing.T) {
	m := store.NewMem()
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	gb := testGateway(t, "b", `"10.2.0.0/16"`, "")
	ra := start(t, m, ga)
	rb := start(t, m, gb)
	eventually(t, "mesh", func() bool { return ra.dev.peers()[pub(gb)] != "" && rb.dev.peers()[pub(ga)] == "10.1.0.0/16" })

	// The same file with a second network and a static site.
	sk, _ := wgquick.GeneratePrivateKey()
	src := gatewaySource("a", `"10.1.0.0/16", "10.9.0.0/16"`, "", *ga.PrivateKey) +
		"\n[[site]]\nname = \"static\"\npublic_key = \"" + sk.PublicKey().String() + "\"\nnetworks = [\"10.50.0.0/16\"]\n"
	g2, err := gateway.Parse(ga.Path, []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	ra.dev.mu.Lock()
	full := ra.dev.full
	ra.dev.mu.Unlock()
	if err := ra.a.Update(context.Background(), g2, nil); err != nil {
		t.Fatal(err)
	}
	ra.dev.mu.Lock()
	if ra.dev.full == full {
		t.Error("Update made no full apply")
	}
	ra.dev.mu.Unlock()
	p := ra.dev.peers()
	if p[pub(gb)] != "10.2.0.0/16" || p[sk.PublicKey().String()] != "10.50.0.0/16" {
		t.Errorf("after Update the device holds %v; want b's fleet peer kept and the static site added", p)
	}
	eventually(t, "the new network at b", func() bool { return rb.dev.peers()[pub(ga)] == "10.1.0.0/16,10.9.0.0/16" })

	other := strings.Replace(src, `prefix = "/t"`, `prefix = "/u"`, 1)
	g3, err := gateway.Parse(ga.Path, []byte(other))
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.a.Update(context.Background(), g3, nil); !errors.Is(err, ErrRestart) {
		t.Errorf("Update to another prefix: %v, want ErrRestart", err)
	}
}

// otherClient is a second client of the same store: another value for
// Update, the same records and leases.
type otherClient struct{ *store.Mem }

// TestUpdateMovesOntoANewStoreInPlace: a file whose [fleet] endpoints
// change needs a client of the new store (ErrNewStore without one). A
// client of the same cluster keeps the record as it is, on its lease (the
// others see no change); a client of another cluster gets the record on a
// new lease there, and the agent follows that store's records from then
// on, the old one's no more. The fleet's peers stay throughout.
func TestUpdateMovesOntoANewStoreInPlace(t *testing.T) {
	m1, m2 := store.NewMem(), store.NewMem()
	for range 5 { // lease IDs that m2 does not have
		m1.Grant(context.Background(), time.Minute)
	}
	ga := testGateway(t, "a", `"10.1.0.0/16"`, "")
	gb := testGateway(t, "b", `"10.2.0.0/16"`, "")
	gc := testGateway(t, "c", `"10.3.0.0/16"`, "")
	ra, rb := start(t, m1, ga), start(t, m1, gb)
	rc := start(t, m2, gc)
	eventually(t, "a and b mesh on m1", func() bool { return ra.dev.peers()[pub(gb)] != "" && rb.dev.peers()[pub(ga)] != "" })

	file := func(endpoints string) *gateway.Gateway {
		src := strings.Replace(gatewaySource("a", `"10.1.0.0/16"`, "", *ga.PrivateKey), `endpoints = ["https://127.0.0.1:2379"]`, "endpoints = ["+endpoints+"]", 1)
		g, err := gateway.Parse(ga.Path, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	g2 := file(`"https://127.0.0.1:2379", "https://127.0.0.2:2379"`)
	if err := ra.a.Update(context.Background(), g2, nil); !errors.Is(err, ErrNewStore) {
		t.Fatalf("Update to new endpoints without a store: %v, want ErrNewStore", err)
	}
	before, _, _ := m1.Get(context.Background(), "/t/sites/a")
	if err := ra.a.Update(context.Background(), g2, otherClient{m1}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the resync and the publish ran
	if after, _, _ := m1.Get(context.Background(), "/t/sites/a"); after.ModRev != before.ModRev || after.Lease != before.Lease {
		t.Errorf("the same cluster under new endpoints: record %+v, was %+v (want it untouched)", after, before)
	}
	if ra.dev.peers()[pub(gb)] == "" || !ra.a.Status().StoreReachable {
		t.Errorf("after moving onto the same store: peers %v, status %+v", ra.dev.peers(), ra.a.Status())
	}

	// Another cluster: m2, where c is.
	if err := ra.a.Update(context.Background(), file(`"https://127.0.0.3:2379"`), m2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a published on m2 and meshed with c", func() bool {
		kv, found, _ := m2.Get(context.Background(), "/t/sites/a")
		return found && kv.Lease != 0 && ra.dev.peers()[pub(gc)] == "10.3.0.0/16" && rc.dev.peers()[pub(ga)] == "10.1.0.0/16"
	})
	eventually(t, "b, known only to m1, gone from a", func() bool { _, ok := ra.dev.peers()[pub(gb)]; return !ok })
	// A site put on m1 now is not a's business.
	gd := testGateway(t, "d", `"10.4.0.0/16"`, "")
	start(t, m1, gd)
	eventually(t, "d at b", func() bool { return rb.dev.peers()[pub(gd)] != "" })
	time.Sleep(100 * time.Millisecond)
	if _, ok := ra.dev.peers()[pub(gd)]; ok {
		t.Error("a follows the old store still")
	}
	if st := ra.a.Status(); !st.StoreReachable || !st.Published {
		t.Errorf("status on the new store: %+v", st)
	}
}
