package bench

import (
	"bytes"
	"encoding/binary"
	"math"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wirelane/wirelane/device/noise"
)

func TestFairness(t *testing.T) {
	for _, c := range []struct {
		name  string
		bytes []uint64
		want  float64
	}{
		{"every peer got the same", []uint64{10, 10, 10, 10}, 1},
		{"one peer got half its share", []uint64{5, 15, 10, 10}, 0.5},
		{"one peer got nothing", []uint64{0, 20, 20}, 0},
		{"nothing delivered", []uint64{0, 0}, 0},
		{"no peers", nil, 0},
		{"one peer", []uint64{7}, 1},
	} {
		if got := fairness(c.bytes); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: fairness(%v) = %v, want %v", c.name, c.bytes, got, c.want)
		}
	}
}

func TestPeerAddrsAreDistinct(t *testing.T) {
	eps, inners := map[[4]byte]int{}, map[[4]byte]int{}
	for i := range MaxActivePeers {
		ep, inner := peerAddrs(i)
		e, in := ep.As4(), inner.As4()
		if e[0] != 127 || e[1] != 1 || in[0] != 10 || in[1] != 80 || e[3] == 0 || e[3] == 255 || e[2] != in[2] || e[3] != in[3] {
			t.Fatalf("peer %d: endpoint %v, inner %v", i, ep, inner)
		}
		if j, dup := eps[e]; dup {
			t.Fatalf("peers %d and %d share endpoint %v", j, i, ep)
		}
		if j, dup := inners[in]; dup {
			t.Fatalf("peers %d and %d share inner address %v", j, i, inner)
		}
		eps[e], inners[in] = i, i
	}
}

// testClients returns clients with real ChaCha20-Poly1305 sessions but no
// socket, and the keys their gateway would seal with.
func testClients(t testing.TB, n int) (*peerClients, [][]byte) {
	c := &peerClients{n: n, count: newGenTUN("wlbench-test", inprocMTU, nil, nil),
		sess: make([]*noise.Session, n), expect: make([][]byte, n),
		rxBytes: make([]atomic.Uint64, n), checked: make([]bool, n)}
	keys := make([][]byte, n)
	for i := range n {
		keys[i] = bytes.Repeat([]byte{byte(i + 1)}, chacha20poly1305.KeySize)
		aead, err := chacha20poly1305.New(keys[i])
		if err != nil {
			t.Fatal(err)
		}
		c.sess[i] = &noise.Session{Receive: aead, Send: aead, LocalIndex: uint32(i + 1)}
		_, inner := peerAddrs(i)
		if c.expect[i], err = ipv4UDPPacket(100, peersGatewayAddr, inner); err != nil {
			t.Fatal(err)
		}
	}
	return c, keys
}

// sealFor returns a transport message to client i with counter ctr.
func sealFor(t testing.TB, key []byte, i int, ctr uint64, plain []byte) []byte {
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, noise.MessageTransportHeaderSize, noise.MessageTransportOverhead+len(plain))
	noise.PutTransportHeader(msg, uint32(i+1), ctr)
	var nonce [12]byte
	binary.LittleEndian.PutUint64(nonce[4:], ctr)
	return aead.Seal(msg, nonce[:], plain, nil)
}

func TestPeerClientsTake(t *testing.T) {
	c, keys := testClients(t, 3)
	good := sealFor(t, keys[1], 1, 7, c.expect[1])
	if !c.take(good) || c.rxBytes[1].Load() != uint64(len(c.expect[1])) || c.bad.Load() != 0 {
		t.Fatalf("a good packet to client 1: bytes %d, bad %d", c.rxBytes[1].Load(), c.bad.Load())
	}
	// Only the first packet of a client is opened: later ones are counted.
	if !c.take(good) || c.rxBytes[1].Load() != 2*uint64(len(c.expect[1])) {
		t.Fatalf("second packet: bytes %d", c.rxBytes[1].Load())
	}
	// The first packet to client 2 sealed with client 0's key is bad.
	if !c.take(sealFor(t, keys[0], 2, 0, c.expect[2])) || c.bad.Load() != 1 {
		t.Fatalf("a forged packet: bad %d, want 1", c.bad.Load())
	}
	// So is one that opens to something else than was sent.
	c2, keys2 := testClients(t, 1)
	other := bytes.Clone(c2.expect[0])
	other[len(other)-1] ^= 1
	if !c2.take(sealFor(t, keys2[0], 0, 0, other)) || c2.bad.Load() != 1 {
		t.Fatalf("wrong content: bad %d, want 1", c2.bad.Load())
	}
	for name, msg := range map[string][]byte{
		"keepalive":     sealFor(t, keys[0], 0, 1, nil),
		"unknown index": sealFor(t, keys[0], 3, 1, c.expect[0]),
		"index zero":    sealFor(t, keys[0], -1, 1, c.expect[0]),
		"initiation":    append([]byte{noise.MessageInitiationType, 0, 0, 0}, make([]byte, 144)...),
		"empty":         nil,
	} {
		before := c.stray.Load()
		if c.take(msg) || c.stray.Load() != before+1 {
			t.Errorf("%s: counted as data (stray %d -> %d)", name, before, c.stray.Load())
		}
	}
	if c.rxBytes[0].Load() != 0 {
		t.Errorf("client 0 got %d bytes from stray datagrams", c.rxBytes[0].Load())
	}
}

// FuzzPeerClientsTake: no datagram makes the clients panic, and one is
// counted as data for one client at most.
func FuzzPeerClientsTake(f *testing.F) {
	c, keys := testClients(f, 4)
	f.Add(sealFor(f, keys[2], 2, 3, c.expect[2]))
	f.Add(sealFor(f, keys[0], 0, 0, nil))
	f.Add([]byte{4, 0, 0, 0, 9, 0, 0, 0})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, msg []byte) {
		var before uint64
		for i := range c.rxBytes {
			before += c.rxBytes[i].Load()
		}
		data := c.take(msg)
		var after uint64
		for i := range c.rxBytes {
			after += c.rxBytes[i].Load()
		}
		if want := uint64(0); data {
			want = uint64(len(msg) - noise.MessageTransportOverhead)
			if after-before != want {
				t.Fatalf("counted %d bytes for a %d-byte datagram", after-before, len(msg))
			}
		} else if after != before {
			t.Fatalf("a rejected datagram added %d bytes", after-before)
		}
	})
}

func TestPeersTargets(t *testing.T) {
	for _, dir := range peersDirections {
		r := &Report{}
		add := func(n int, metric, engine string, vs ...float64) {
			for _, v := range vs {
				r.Add(SectionPeers, peersCase(n, dir), metric, engine, HigherIsBetter, v)
			}
		}
		add(100, MetricGbps, EngineWireguardGo, 1, 1, 1)
		add(100, MetricGbps, EngineWirelane, 2.5, 2.1, 1.0)
		add(100, MetricFairness, EngineWirelane, 0.9, 0.95, 0.6)
		add(1000, MetricGbps, EngineWireguardGo, 1, 1, 1)
		add(1000, MetricGbps, EngineWirelane, 1.9, 1.9, 3)
		add(1000, MetricFairness, EngineWirelane, 0.99, 0.4, 1) // median fine, one repeat starved a peer
		states := map[string]Target{}
		for _, tg := range r.Targets() {
			states[tg.Name] = tg
		}
		for name, want := range map[string]TargetState{
			"100 active peers, " + dir:      Met,    // median 2.1x
			"slowest of 100 peers, " + dir:  Met,    // worst 0.6 >= 0.5
			"1000 active peers, " + dir:     NotMet, // median 1.9x
			"slowest of 1000 peers, " + dir: NotMet, // worst 0.4 < 0.5
		} {
			if got := states[name]; got.State != want {
				t.Errorf("target %q: %v (%s), want %v", name, got.Status(), got.Measured, want)
			}
		}
		if m := states["slowest of 1000 peers, "+dir].Measured; !strings.HasPrefix(m, "0.4") {
			t.Errorf("fairness target reads %q, want the worst repeat (0.4)", m)
		}
		// The other direction has no figures: its targets are not judged.
		for _, other := range peersDirections {
			if other != dir && states["100 active peers, "+other].State != NotMeasured {
				t.Errorf("%s: target of %s judged without figures: %v", dir, other, states["100 active peers, "+other].Status())
			}
		}
	}
}

// TestSourceCounter checks the per-peer count of the receive direction:
// bytes by inner source address, anything else counted apart.
func TestSourceCounter(t *testing.T) {
	s := &sourceCounter{bytes: make([]atomic.Uint64, 300)}
	for _, i := range []int{0, 249, 250, 299} {
		_, inner := peerAddrs(i)
		if got := inprocPeerIndex(inner.As4()); got != i {
			t.Fatalf("inprocPeerIndex(%v) = %d, want %d", inner, got, i)
		}
		p, err := ipv4UDPPacket(100+i, inner, peersGatewayAddr)
		if err != nil {
			t.Fatal(err)
		}
		s.count(p)
		if got := s.bytes[i].Load(); got != uint64(100+i) {
			t.Errorf("peer %d: %d bytes, want %d", i, got, 100+i)
		}
	}
	_, beyond := peerAddrs(300) // a peer the counter does not know
	p, _ := ipv4UDPPacket(100, beyond, peersGatewayAddr)
	s.count(p)
	s.count([]byte{0x45, 0})                                                       // truncated
	s.count(append([]byte{0x60}, make([]byte, 39)...))                             // IPv6
	q, _ := ipv4UDPPacket(100, netip.MustParseAddr("10.81.0.1"), peersGatewayAddr) // not 10.80/16
	s.count(q)
	if got := s.other.Load(); got != 4 {
		t.Errorf("%d packets from no peer, want 4", got)
	}
	var sum uint64
	for i := range s.bytes {
		sum += s.bytes[i].Load()
	}
	if want := uint64(100 + 349 + 350 + 399); sum != want {
		t.Errorf("%d bytes counted, want %d", sum, want)
	}
}

func TestConfigValidateActivePeers(t *testing.T) {
	for _, n := range []int{0, -1, MaxActivePeers + 1} {
		c := DefaultConfig()
		c.ActivePeers = []int{100, n}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "active peers") {
			t.Errorf("active peers %d: %v, want an error", n, err)
		}
	}
}

// TestPeersQuick runs the many-peers section briefly with real devices of
// both engines, real handshakes and real loopback sockets, and checks that
// every figure exists and is sane. It never judges speed.
func TestPeersQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("opens real loopback sockets and runs for a few seconds")
	}
	cfg := QuickConfig()
	cfg.Sections = []string{SectionPeers}
	cfg.Duration = 100 * time.Millisecond
	steps := 0
	r, err := Run(cfg, "test", func(step, total int, what string) { steps++ })
	if err != nil {
		t.Fatal(err)
	}
	if want := plannedSteps(cfg); steps != want {
		t.Errorf("%d progress steps, planned %d", steps, want)
	}
	for _, dir := range peersDirections {
		for _, n := range cfg.ActivePeers {
			for _, e := range peersEngines(cfg) {
				get := func(metric string) float64 {
					m := r.Find(SectionPeers, peersCase(n, dir), metric, e)
					if m == nil || len(m.Samples) != cfg.Repeats {
						t.Fatalf("%d peers %s %s: no %s", n, dir, e, metric)
					}
					return m.Median()
				}
				if v := get(MetricGbps); !(v > 0) || math.IsInf(v, 0) {
					t.Errorf("%d peers %s %s: %v Gbit/s", n, dir, e, v)
				}
				if v := get(MetricCPUPerGB); !(v > 0) || math.IsInf(v, 0) {
					t.Errorf("%d peers %s %s: %v CPU s/GB", n, dir, e, v)
				}
				// A short window on a busy machine may leave one peer with
				// nothing; the share is still a share.
				if v := get(MetricFairness); !(v >= 0 && v <= 1) {
					t.Errorf("%d peers %s %s: slowest peer's share %v, want 0..1", n, dir, e, v)
				}
				if v := get(MetricLoss); !(v >= 0 && v <= 100) {
					t.Errorf("%d peers %s %s: loss %v%%", n, dir, e, v)
				}
				if v := get(MetricAllocs); !(v >= 0) {
					t.Errorf("%d peers %s %s: %v allocs/packet", n, dir, e, v)
				}
				if dir == DirFromPeers {
					if v := get(MetricHarnessCPU); !(v > 0 && v < 1) {
						t.Errorf("%d peers %s %s: harness CPU share %v, want 0..1", n, dir, e, v)
					}
					if v := get(MetricGatewayCPUPerGB); !(v > 0) || math.IsInf(v, 0) {
						t.Errorf("%d peers %s %s: gateway %v CPU s/GB", n, dir, e, v)
					}
				}
			}
		}
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"20 peers, " + DirToPeers, "200 peers, " + DirFromPeers, MetricFairness, MetricHarnessCPU, "slowest of 100 peers, " + DirFromPeers} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("table lacks %q", want)
		}
	}
}

// FuzzSourceCounter feeds arbitrary packets to the receive direction's
// per-peer count: it never panics, and a packet is counted exactly once,
// either as bytes of the peer its source names or apart.
func FuzzSourceCounter(f *testing.F) {
	_, inner := peerAddrs(7)
	p, _ := ipv4UDPPacket(60, inner, peersGatewayAddr)
	f.Add(p)
	f.Add([]byte{})
	f.Add([]byte{0x45})
	f.Add(append([]byte{0x60}, make([]byte, 39)...))
	f.Fuzz(func(t *testing.T, pkt []byte) {
		s := &sourceCounter{bytes: make([]atomic.Uint64, 300)}
		s.count(pkt)
		var sum uint64
		for i := range s.bytes {
			sum += s.bytes[i].Load()
		}
		switch other := s.other.Load(); {
		case other == 1 && sum == 0:
		case other == 0 && sum == uint64(len(pkt)):
		default:
			t.Fatalf("packet of %d bytes: %d bytes to peers, %d apart", len(pkt), sum, other)
		}
	})
}
