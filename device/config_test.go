package device

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

func newSolo(t *testing.T) (*Device, *conntest.Network, *conntest.Bind) {
	t.Helper()
	nw := conntest.NewNetwork()
	b := nw.NewBind(netip.MustParseAddr("192.0.2.1"))
	d := NewDevice(memtun.New("solo", 1420), b, Options{})
	t.Cleanup(d.Close)
	return d, nw, b
}

func TestSetPrivateKeySemantics(t *testing.T) {
	d, _, _ := newSolo(t)
	raw := mustKey(t)
	raw[0] |= 7 // unclamp
	raw[31] |= 128
	must(t, d.Configure(&Config{PrivateKey: ptr(raw)}))
	clamped := raw
	clamped.Clamp()
	if got := d.ident.Load().local.PrivateKey(); got != clamped {
		t.Fatal("private key not clamped")
	}
	// A peer with our own public key is ignored.
	must(t, d.Configure(&Config{Peers: []PeerConfig{{PublicKey: clamped.PublicKey()}}}))
	if d.lookupPeer(clamped.PublicKey()) != nil {
		t.Fatal("peer with our own public key was added")
	}
	// Setting a private key whose public key is a peer's removes the peer.
	other := mustKey(t)
	must(t, d.Configure(&Config{Peers: []PeerConfig{{PublicKey: other.PublicKey()}}}))
	if d.lookupPeer(other.PublicKey()) == nil {
		t.Fatal("peer not added")
	}
	must(t, d.Configure(&Config{PrivateKey: ptr(other)}))
	if d.lookupPeer(other.PublicKey()) != nil {
		t.Fatal("peer with the new public key survived")
	}
	// All zeros clears the key; Get then omits it.
	must(t, d.Configure(&Config{PrivateKey: ptr(noise.Key{})}))
	if d.ident.Load() != nil {
		t.Fatal("zero key did not clear the identity")
	}
	if st := status(t, d); !st.dev.PrivateKey.IsZero() {
		t.Fatal("cleared key still reported")
	}
}

func TestSetPeerSemantics(t *testing.T) {
	d, _, _ := newSolo(t)
	must(t, d.Configure(&Config{PrivateKey: ptr(mustKey(t))}))
	k1, k2, k3 := mustKey(t).PublicKey(), mustKey(t).PublicKey(), mustKey(t).PublicKey()
	count := func(pub noise.PublicKey) int {
		p := d.lookupPeer(pub)
		if p == nil {
			return -1
		}
		d.allowedMu.RLock()
		defer d.allowedMu.RUnlock()
		return d.allowed.Count(p)
	}
	// update_only does not create.
	must(t, d.Configure(&Config{Peers: []PeerConfig{{PublicKey: k1, UpdateOnly: true}}}))
	if d.lookupPeer(k1) != nil {
		t.Fatal("update_only created a peer")
	}
	must(t, d.Configure(&Config{Peers: []PeerConfig{
		{PublicKey: k1, AllowedIPs: prefixes("10.0.0.0/24", "10.0.1.0/24")},
		{PublicKey: k2, AllowedIPs: prefixes("10.0.2.0/24")},
	}}))
	// update_only changes an existing peer; allowed_ip=- removes one.
	must(t, d.Configure(&Config{Peers: []PeerConfig{{
		PublicKey: k1, UpdateOnly: true,
		AllowedIPs: []AllowedIPChange{{Prefix: netip.MustParsePrefix("10.0.0.0/24"), Remove: true}},
	}}}))
	if count(k1) != 1 {
		t.Fatalf("k1 has %d prefixes, want 1", count(k1))
	}
	// A prefix moves to the peer that inserts it last.
	must(t, d.Configure(&Config{Peers: []PeerConfig{{PublicKey: k2, AllowedIPs: prefixes("10.0.1.0/24")}}}))
	if count(k1) != 0 || count(k2) != 2 {
		t.Fatalf("after takeover k1 %d k2 %d", count(k1), count(k2))
	}
	// replace_allowed_ips.
	must(t, d.Configure(&Config{Peers: []PeerConfig{{PublicKey: k2, ReplaceAllowedIPs: true, AllowedIPs: prefixes("192.168.0.0/16")}}}))
	if count(k2) != 1 {
		t.Fatalf("replace_allowed_ips left %d prefixes", count(k2))
	}
	// remove.
	must(t, d.Configure(&Config{Peers: []PeerConfig{{PublicKey: k1, Remove: true}}}))
	if d.lookupPeer(k1) != nil {
		t.Fatal("peer not removed")
	}
	// replace_peers leaves only the peers of the request.
	must(t, d.Configure(&Config{ReplacePeers: true, Peers: []PeerConfig{{PublicKey: k3}}}))
	if d.lookupPeer(k2) != nil || d.lookupPeer(k3) == nil {
		t.Fatal("replace_peers did not replace")
	}
	d.allowedMu.RLock()
	_, routed := d.allowed.Lookup(netip.MustParseAddr("192.168.1.1"))
	d.allowedMu.RUnlock()
	if routed {
		t.Fatal("a removed peer's prefix still routes after replace_peers")
	}
}

func TestSetListenPortAndFwmark(t *testing.T) {
	d, nw, b := newSolo(t)
	must(t, d.Configure(&Config{ListenPort: ptr(uint16(5000))}))
	must(t, d.Up())
	if b.Addr().Port() != 5000 {
		t.Fatalf("bound to %v, want port 5000", b.Addr())
	}
	must(t, d.Configure(&Config{ListenPort: ptr(uint16(5001)), FwMark: ptr(uint32(51820))}))
	if b.Addr().Port() != 5001 {
		t.Fatalf("rebound to %v, want port 5001", b.Addr())
	}
	if b.Mark() != 51820 {
		t.Fatalf("mark %d, want 51820", b.Mark())
	}
	squat := nw.NewBind(netip.MustParseAddr("192.0.2.1"))
	if _, _, err := squat.Open(6000); err != nil {
		t.Fatal(err)
	}
	err := d.Configure(&Config{ListenPort: ptr(uint16(6000))})
	var be *BindError
	if !errors.As(err, &be) || be.What != "listen port" || be.Port != 6000 {
		t.Fatalf("port in use: got %v, want a *BindError for port 6000", err)
	}
	if b.Addr().Port() != 5001 {
		t.Fatalf("after a failed rebind bound to %v, want the old port", b.Addr())
	}
	if st := status(t, d); st.dev.ListenPort != 5001 {
		t.Fatalf("status after failed rebind reports port %d, want 5001", st.dev.ListenPort)
	}
}

// streamTraffic injects packets A->B until stop is closed.
func streamTraffic(p *pair, stop chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	pkt := ipPacket(ipA4, ipB4, []byte("stream"))
	for {
		select {
		case <-stop:
			return
		default:
		}
		p.ta.Inject(pkt)
		time.Sleep(100 * time.Microsecond)
	}
}

func TestEndpointReplacedNoLatePackets(t *testing.T) {
	for _, ref := range []bool{false, true} {
		t.Run(fmt.Sprintf("refmode=%v", ref), func(t *testing.T) {
			p := newPair(t, pairOpts{refMode: ref})
			p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
			old := p.bb.Addr()
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go streamTraffic(p, stop, &wg)
			defer func() { close(stop); wg.Wait() }()
			waitFor(t, "traffic", func() bool { return p.nw.SentTo(old) > 20 })
			elsewhere := netip.MustParseAddrPort("192.0.2.200:9")
			must(t, p.a.Configure(&Config{Peers: []PeerConfig{{
				PublicKey: p.kb.PublicKey(), Endpoint: &elsewhere,
			}}}))
			after := p.nw.SentTo(old)
			waitFor(t, "traffic to the new endpoint", func() bool { return p.nw.SentTo(elsewhere) > 20 })
			if n := p.nw.SentTo(old); n != after {
				t.Fatalf("%d packets went to the old endpoint after Set returned", n-after)
			}
		})
	}
}

func TestRemovePeerNoLatePackets(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	old := p.bb.Addr()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go streamTraffic(p, stop, &wg)
	defer func() { close(stop); wg.Wait() }()
	waitFor(t, "traffic", func() bool { return p.nw.SentTo(old) > 20 })
	must(t, p.a.Configure(&Config{Peers: []PeerConfig{{PublicKey: p.kb.PublicKey(), Remove: true}}}))
	after := p.nw.SentTo(old)
	time.Sleep(50 * time.Millisecond)
	if n := p.nw.SentTo(old); n != after {
		t.Fatalf("%d packets went to a removed peer after Set returned", n-after)
	}
}

func TestRoamingOnAuthenticatedPacketsOnly(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	peerA := peerOf(p.b, p.ka)
	gen := peerA.routes.Borrow().Gen
	// Capture A's next data datagrams instead of delivering them.
	var mu sync.Mutex
	var captured [][]byte
	p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
		if kindOf(dg.Data) == "data" {
			mu.Lock()
			captured = append(captured, append([]byte(nil), dg.Data...))
			mu.Unlock()
			return conntest.Drop
		}
		return conntest.Pass
	})
	var pkts [][]byte
	for i := 0; i < 8; i++ {
		pkts = append(pkts, ipPacket(ipA4, ipB4, []byte{'m', byte(i)}))
		p.ta.Inject(pkts[i])
	}
	waitFor(t, "captured datagrams", func() bool { mu.Lock(); defer mu.Unlock(); return len(captured) == 8 })
	// A forged datagram from elsewhere (right index, bad tag) moves nothing.
	forger := netip.MustParseAddrPort("198.51.100.1:666")
	forged := append([]byte(nil), captured[0]...)
	forged[len(forged)-1] ^= 1
	p.nw.Inject(forger, p.bb.Addr(), forged)
	time.Sleep(20 * time.Millisecond)
	if ep, _ := peerA.routes.Endpoint(); ep.Dst != p.ba.Addr() || peerA.routes.Borrow().Gen != gen {
		t.Fatalf("forged packet moved the endpoint to %v", ep.Dst)
	}
	// The genuine datagrams arriving from a new address move the endpoint,
	// with one route publish for all of them.
	moved := netip.MustParseAddrPort("203.0.113.5:7777")
	for _, c := range captured {
		p.nw.Inject(moved, p.bb.Addr(), c)
	}
	for _, pk := range pkts {
		p.expect(p.tb, pk)
	}
	ep, _ := peerA.routes.Endpoint()
	if ep.Dst != moved {
		t.Fatalf("endpoint %v, want %v", ep.Dst, moved)
	}
	if g := peerA.routes.Borrow().Gen; g != gen+1 {
		t.Fatalf("route generation went from %d to %d, want one publish", gen, g)
	}
}

func TestSourceInvalidationRebuildsRoutesOnce(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "a")
	p.send(p.tb, p.ta, ipB4, ipA4, "b")
	peerB := peerOf(p.a, p.kb)
	r := peerB.routes.Borrow()
	if !r.Endpoint.Src.IsValid() {
		t.Fatal("no sticky source learned from received packets")
	}
	p.ba.InvalidateSources()
	r2 := peerB.routes.Borrow()
	if r2.Endpoint.Src.IsValid() || r2.Gen != r.Gen+1 || r2.Endpoint.Dst != r.Endpoint.Dst {
		t.Fatalf("after invalidation: %+v (gen %d, was %d)", r2.Endpoint, r2.Gen, r.Gen)
	}
	p.ba.InvalidateSources()
	if peerB.routes.Borrow().Gen != r2.Gen {
		t.Fatal("a second event rebuilt a route that had no source")
	}
	p.send(p.ta, p.tb, ipA4, ipB4, "still delivered")
}

// TestRefModeTakesTheLockedPath holds the locks the conventional path
// takes per batch: in ref mode a send waits for the peer's endpoint mutex
// and for the device lock, while the noref path goes through with both
// held.
func TestRefModeTakesTheLockedPath(t *testing.T) {
	for _, ref := range []bool{false, true} {
		for _, hold := range []string{"endpoint", "device"} {
			t.Run(fmt.Sprintf("ref=%v/%s", ref, hold), func(t *testing.T) {
				p := newPair(t, pairOpts{refMode: ref})
				p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
				p.send(p.tb, p.ta, ipB4, ipA4, "warm up back")
				var unlock func()
				if hold == "endpoint" {
					unlock = peerOf(p.a, p.kb).refEP.lockWriter()
				} else {
					p.a.mu.Lock()
					unlock = p.a.mu.Unlock
				}
				pkt := ipPacket(ipA4, ipB4, []byte("while the lock is held"))
				must(t, p.ta.Inject(pkt))
				if !ref {
					p.expect(p.tb, pkt)
					unlock()
					return
				}
				p.expectNone(p.tb, 100*time.Millisecond)
				unlock()
				p.expect(p.tb, pkt)
			})
		}
	}
}

// TestRefModePeerRemovalClearsEndpoint: once a ref-mode peer is removed,
// its locked endpoint is gone too.
func TestRefModePeerRemovalClearsEndpoint(t *testing.T) {
	p := newPair(t, pairOpts{refMode: true})
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	pr := peerOf(p.a, p.kb)
	if _, ok := pr.refEP.endpoint(); !ok {
		t.Fatal("ref-mode peer has no endpoint after traffic")
	}
	must(t, p.a.Configure(&Config{Peers: []PeerConfig{{PublicKey: p.kb.PublicKey(), Remove: true}}}))
	if _, ok := pr.refEP.endpoint(); ok {
		t.Fatal("removed ref-mode peer still has an endpoint")
	}
}

// stallingWriter is a StatusWriter whose reader stops reading: its first
// AllowedIP call blocks until release is closed.
type stallingWriter struct {
	statusRecorder
	stalled chan struct{} // closed when the first AllowedIP call blocks
	release chan struct{}
	once    sync.Once
}

func (w *stallingWriter) AllowedIP(p netip.Prefix) error {
	w.once.Do(func() {
		close(w.stalled)
		<-w.release
	})
	return w.statusRecorder.AllowedIP(p)
}

// TestStalledStatusDoesNotStallTraffic: a status reader that stops in the
// middle of a large answer (wg show piped into a pager, say) must not stop
// packets from flowing, alone or while a Configure changes allowed IPs,
// and must not block that Configure.
func TestStalledStatusDoesNotStallTraffic(t *testing.T) {
	for _, concurrentSet := range []bool{false, true} {
		t.Run(fmt.Sprintf("concurrent configure=%v", concurrentSet), func(t *testing.T) {
			p := newPair(t, pairOpts{})
			p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
			// Give A's peer many prefixes, so the answer spans many chunks.
			must(t, p.a.Configure(&Config{Peers: []PeerConfig{{
				PublicKey: p.kb.PublicKey(), AllowedIPs: bigPrefixes(20000),
			}}}))
			w := &stallingWriter{stalled: make(chan struct{}), release: make(chan struct{})}
			statusDone := make(chan error, 1)
			go func() { statusDone <- p.a.WriteStatus(w) }()
			<-w.stalled
			var wg sync.WaitGroup
			defer func() { close(w.release); wg.Wait(); must(t, <-statusDone) }()
			setDone := make(chan struct{})
			if concurrentSet {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer close(setDone)
					must(t, p.a.Configure(&Config{Peers: []PeerConfig{{
						PublicKey: p.kb.PublicKey(), AllowedIPs: prefixes("10.77.0.0/16"),
					}}}))
				}()
				time.Sleep(50 * time.Millisecond)
			} else {
				close(setDone)
			}
			for i := 0; i < 5; i++ {
				pkt := ipPacket(ipA4, ipB4, []byte(fmt.Sprintf("during a stalled status %d", i)))
				must(t, p.ta.Inject(pkt))
				p.expectWithin(p.tb, pkt, 3*time.Second)
				pkt = ipPacket(ipB4, ipA4, []byte(fmt.Sprintf("back during a stalled status %d", i)))
				must(t, p.tb.Inject(pkt))
				p.expectWithin(p.ta, pkt, 3*time.Second)
			}
			select {
			case <-setDone:
			case <-time.After(3 * time.Second):
				t.Fatal("a Configure changing allowed IPs waited for a stalled status reader")
			}
		})
	}
}
