package device

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/tun/memtun"
)

// gatherBind is the production bind, whose Senders record how many routes
// each SendEach carried and, once armed, hold the first data send until
// released, so that a test can queue a TUN read's worth of packets behind
// it. It wraps real sockets; only the bookkeeping is the test's.
type gatherBind struct {
	*conn.StdBind
	mu        sync.Mutex
	maxRoutes int           // most distinct routes in one SendEach
	each      int           // SendEach calls
	hold      chan struct{} // armed: the next data send waits for it
	held      chan struct{} // closed when that send is waiting
}

func (b *gatherBind) NewSender() (conn.Sender, func()) {
	s, release := b.StdBind.NewSender()
	return &gatherSender{b: b, s: s}, release
}

type gatherSender struct {
	b *gatherBind
	s conn.Sender
}

// wait holds a data send while the bind is armed.
func (s *gatherSender) wait(bufs [][]byte) {
	s.b.mu.Lock()
	hold, held := s.b.hold, s.b.held
	if hold != nil && len(bufs) > 0 && len(bufs[0]) > 32 {
		s.b.hold = nil
	} else {
		hold = nil
	}
	s.b.mu.Unlock()
	if hold != nil {
		close(held)
		<-hold
	}
}

func (s *gatherSender) Send(bufs [][]byte, r *conn.Route) error {
	s.wait(bufs)
	return s.s.Send(bufs, r)
}

func (s *gatherSender) SendEach(bufs [][]byte, routes []*conn.Route) error {
	s.wait(bufs)
	distinct := map[*conn.Route]bool{}
	for _, r := range routes {
		distinct[r] = true
	}
	s.b.mu.Lock()
	s.b.each++
	s.b.maxRoutes = max(s.b.maxRoutes, len(distinct))
	s.b.mu.Unlock()
	return s.s.(interface {
		SendEach([][]byte, []*conn.Route) error
	}).SendEach(bufs, routes)
}

// TestTUNReadSpanningPeersLeavesInOneSend: one TUN read whose packets go
// to several peers is sealed inline and sent in one SendEach carrying all
// their routes, and every peer still gets its packets complete and in
// order. Real devices on real loopback sockets.
func TestTUNReadSpanningPeersLeavesInOneSend(t *testing.T) {
	if testing.Short() {
		t.Skip("uses real loopback sockets")
	}
	const peers, each = 6, 5
	gb := &gatherBind{StdBind: conn.NewStdBind()}
	gtun := memtun.New("gw", 1420)
	gw := NewDevice(gtun, gb, Options{})
	t.Cleanup(gw.Close)
	must(t, gw.Up())
	gkey := mustKey(t)
	gwAddr := netip.MustParseAddr("10.9.0.1")
	gwEP := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(gw.boundPort.Load()))
	cfg := &Config{PrivateKey: ptr(gkey)}
	tuns := make([]*memtun.Device, peers)
	addrs := make([]netip.Addr, peers)
	for i := range peers {
		k := mustKey(t)
		tuns[i] = memtun.New(fmt.Sprintf("p%d", i), 1420)
		d := NewDevice(tuns[i], conn.NewStdBind(), Options{})
		t.Cleanup(d.Close)
		must(t, d.Up())
		addrs[i] = netip.AddrFrom4([4]byte{10, 9, 1, byte(i + 1)})
		must(t, d.Configure(connectConfig(k, gkey.PublicKey(), gwEP, "10.9.0.1/32")))
		ep := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(d.boundPort.Load()))
		cfg.Peers = append(cfg.Peers, PeerConfig{PublicKey: k.PublicKey(), Endpoint: &ep, AllowedIPs: prefixes(addrs[i].String() + "/32")})
	}
	must(t, gw.Configure(cfg))
	p := &pair{t: t}
	for i := range peers { // handshakes
		pkt := ipPacket(gwAddr, addrs[i], []byte("hello"))
		must(t, gtun.Inject(pkt))
		p.expect(tuns[i], pkt)
	}

	// The handshakes' staged packets went through the peers' senders:
	// wait until those are done with them, so that the TUN reader may
	// seal and send the next batches itself.
	waitFor(t, "senders idle", func() bool {
		gw.mu.RLock()
		defer gw.mu.RUnlock()
		for _, pr := range gw.peerList {
			if r := pr.current(); r == nil || r.pending.Load() != 0 {
				return false
			}
		}
		return true
	})
	gb.mu.Lock()
	gb.hold, gb.held = make(chan struct{}), make(chan struct{})
	hold, held := gb.hold, gb.held
	gb.mu.Unlock()
	must(t, gtun.Inject(ipPacket(gwAddr, addrs[0], []byte("first"))))
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the first data send never came")
	}
	// Queued behind the held send: the next TUN read takes them all.
	for j := range each {
		for i := range peers {
			must(t, gtun.Inject(ipPacket(gwAddr, addrs[i], []byte(fmt.Sprintf("peer %d packet %d", i, j)))))
		}
	}
	close(hold)
	p.expect(tuns[0], ipPacket(gwAddr, addrs[0], []byte("first")))
	for i := range peers {
		for j := range each {
			want := ipPacket(gwAddr, addrs[i], []byte(fmt.Sprintf("peer %d packet %d", i, j)))
			select {
			case got := <-tuns[i].Outbound():
				if string(got) != string(want) {
					t.Fatalf("peer %d: packet %d is %q, want %q (lost or out of order)", i, j, got[28:], want[28:])
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("peer %d: packet %d not delivered", i, j)
			}
		}
	}
	gb.mu.Lock()
	defer gb.mu.Unlock()
	if gb.maxRoutes < peers {
		t.Errorf("at most %d routes in one SendEach (%d calls), want all %d peers of the read in one", gb.maxRoutes, gb.each, peers)
	}
}
