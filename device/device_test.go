package device

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

var (
	ipA4 = netip.MustParseAddr("10.0.0.1")
	ipB4 = netip.MustParseAddr("10.0.0.2")
	ipA6 = netip.MustParseAddr("fd00::1")
	ipB6 = netip.MustParseAddr("fd00::2")
)

// pair is two devices connected by an in-memory network.
type pair struct {
	t        testing.TB
	nw       *conntest.Network
	a, b     *Device
	ta, tb   *memtun.Device
	ba, bb   *conntest.Bind
	ka, kb   noise.PrivateKey
	clk      *fakeClock
	psk      noise.PresharedKey
	aEndOnly bool
}

type pairOpts struct {
	fakeClock bool
	psk       bool
	refMode   bool
	// aOnly: only A knows B's endpoint; B learns A's from the handshake.
	aOnly bool
	// tweak changes the devices before Up.
	tweak func(a, b *Device)
}

func newPair(t testing.TB, o pairOpts) *pair {
	t.Helper()
	p := &pair{t: t}
	p.nw, p.ba, p.bb = conntest.NewPair()
	p.ta, p.tb = memtun.New("a", 1420), memtun.New("b", 1420)
	var clk clock
	if o.fakeClock {
		p.clk = newFakeClock()
		p.clk.afterFire = func() { time.Sleep(5 * time.Millisecond) }
		clk = p.clk
	}
	p.a = newDevice(p.ta, p.ba, Options{}, clk, o.refMode)
	p.b = newDevice(p.tb, p.bb, Options{}, clk, o.refMode)
	t.Cleanup(func() { p.a.Close(); p.b.Close() })
	p.ka, p.kb = mustKey(t), mustKey(t)
	if o.psk {
		var err error
		if p.psk, err = noise.GeneratePresharedKey(); err != nil {
			t.Fatal(err)
		}
	}
	if o.tweak != nil {
		o.tweak(p.a, p.b)
	}
	if err := p.a.Up(); err != nil {
		t.Fatal(err)
	}
	if err := p.b.Up(); err != nil {
		t.Fatal(err)
	}
	psk := p.psk
	epA, epB := p.ba.Addr(), p.bb.Addr()
	reqA := &Config{PrivateKey: ptr(p.ka), Peers: []PeerConfig{{
		PublicKey: p.kb.PublicKey(), PresharedKey: &psk, Endpoint: &epB,
		AllowedIPs: prefixes("10.0.0.2/32", "fd00::2/128"),
	}}}
	reqB := &Config{PrivateKey: ptr(p.kb), Peers: []PeerConfig{{
		PublicKey: p.ka.PublicKey(), PresharedKey: &psk,
		AllowedIPs: prefixes("10.0.0.1/32", "fd00::1/128"),
	}}}
	if !o.aOnly {
		reqB.Peers[0].Endpoint = &epA
	}
	if err := p.a.Configure(reqA); err != nil {
		t.Fatal(err)
	}
	if err := p.b.Configure(reqB); err != nil {
		t.Fatal(err)
	}
	return p
}

// send injects a packet into from's TUN and expects it on to's TUN.
func (p *pair) send(from, to *memtun.Device, src, dst netip.Addr, payload string) {
	p.t.Helper()
	pkt := ipPacket(src, dst, []byte(payload))
	if err := from.Inject(pkt); err != nil {
		p.t.Fatal(err)
	}
	p.expect(to, pkt)
}

// expect waits for pkt on tun, skipping other packets.
func (p *pair) expect(tn *memtun.Device, pkt []byte) {
	p.t.Helper()
	p.expectWithin(tn, pkt, 5*time.Second)
}

// expectWithin waits up to d for pkt on tun, skipping other packets.
func (p *pair) expectWithin(tn *memtun.Device, pkt []byte, d time.Duration) {
	p.t.Helper()
	deadline := time.After(d)
	for {
		select {
		case got := <-tn.Outbound():
			if bytes.Equal(got, pkt) {
				return
			}
		case <-deadline:
			p.t.Fatalf("packet %x... not delivered", pkt[:min(len(pkt), 28)])
		}
	}
}

// expectNone checks that nothing arrives on tun for a while.
func (p *pair) expectNone(tn *memtun.Device, d time.Duration) {
	p.t.Helper()
	select {
	case got := <-tn.Outbound():
		p.t.Fatalf("unexpected packet delivered: %x", got[:min(len(got), 28)])
	case <-time.After(d):
	}
}

func peerOf(d *Device, k noise.PrivateKey) *peer { return d.lookupPeer(k.PublicKey()) }

func TestHandshakeAndDataBothWays(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    pairOpts
	}{
		{"plain", pairOpts{}},
		{"psk", pairOpts{psk: true}},
		{"ref mode", pairOpts{refMode: true}},
		{"responder learns endpoint", pairOpts{aOnly: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, tc.o)
			p.send(p.ta, p.tb, ipA4, ipB4, "hello from a")
			p.send(p.tb, p.ta, ipB4, ipA4, "hello from b")
			p.send(p.ta, p.tb, ipA6, ipB6, "v6 from a")
			p.send(p.tb, p.ta, ipB6, ipA6, "v6 from b")
			for i := 0; i < 300; i++ {
				p.ta.Inject(ipPacket(ipA4, ipB4, []byte{byte(i)}))
			}
			last := ipPacket(ipA4, ipB4, []byte("last"))
			p.ta.Inject(last)
			p.expect(p.tb, last)
			pb := peerOf(p.a, p.kb)
			if pb.txBytes.Load() == 0 || pb.rxBytes.Load() == 0 || pb.lastHandshake.Load() == 0 {
				t.Fatalf("counters not updated: tx %d rx %d hs %d", pb.txBytes.Load(), pb.rxBytes.Load(), pb.lastHandshake.Load())
			}
		})
	}
}

func TestInitiationFromEitherSide(t *testing.T) {
	p := newPair(t, pairOpts{})
	// B initiates this time.
	p.send(p.tb, p.ta, ipB4, ipA4, "b first")
	p.send(p.ta, p.tb, ipA4, ipB4, "a second")
	if kp := peerOf(p.b, p.ka).keypairs.current.Load(); kp == nil || !kp.isInitiator {
		t.Fatal("B should hold an initiator session")
	}
}

func TestCryptoRoutingDropsSpoofedSource(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	// A's allowed IPs for B include 10.0.0.2, so A will encrypt a packet
	// to 10.0.0.2 whatever its source; B must drop it because 10.9.9.9 is
	// not among A's allowed IPs at B.
	spoof := ipPacket(netip.MustParseAddr("10.9.9.9"), ipB4, []byte("spoof"))
	p.ta.Inject(spoof)
	p.expectNone(p.tb, 100*time.Millisecond)
	p.send(p.ta, p.tb, ipA4, ipB4, "still works")
}

func TestMostSpecificPrefixAcrossPeers(t *testing.T) {
	nw := conntest.NewNetwork()
	mk := func(ip string) (*Device, *memtun.Device, *conntest.Bind, noise.PrivateKey) {
		tn := memtun.New("x", 1420)
		b := nw.NewBind(netip.MustParseAddr(ip))
		d := NewDevice(tn, b, Options{})
		t.Cleanup(d.Close)
		if err := d.Up(); err != nil {
			t.Fatal(err)
		}
		return d, tn, b, mustKey(t)
	}
	a, ta, baA, ka := mk("192.0.2.1")
	b, tb, baB, kb := mk("192.0.2.2")
	c, tc, baC, kc := mk("192.0.2.3")
	epA, epB, epC := baA.Addr(), baB.Addr(), baC.Addr()
	// A: B owns 10.1.0.0/16, C owns the more specific 10.1.2.0/24.
	must(t, a.Configure(&Config{PrivateKey: ptr(ka), Peers: []PeerConfig{
		{PublicKey: kb.PublicKey(), Endpoint: &epB, AllowedIPs: prefixes("10.1.0.0/16")},
		{PublicKey: kc.PublicKey(), Endpoint: &epC, AllowedIPs: prefixes("10.1.2.0/24")},
	}}))
	must(t, b.Configure(&Config{PrivateKey: ptr(kb), Peers: []PeerConfig{
		{PublicKey: ka.PublicKey(), Endpoint: &epA, AllowedIPs: prefixes("10.0.0.1/32")},
	}}))
	must(t, c.Configure(&Config{PrivateKey: ptr(kc), Peers: []PeerConfig{
		{PublicKey: ka.PublicKey(), Endpoint: &epA, AllowedIPs: prefixes("10.0.0.1/32")},
	}}))
	toC := ipPacket(ipA4, netip.MustParseAddr("10.1.2.7"), []byte("to c"))
	toB := ipPacket(ipA4, netip.MustParseAddr("10.1.3.7"), []byte("to b"))
	ta.Inject(toC)
	ta.Inject(toB)
	pp := &pair{t: t}
	pp.expect(tc, toC)
	pp.expect(tb, toB)
	pp.expectNone(tc, 50*time.Millisecond)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReplayDuplicateAndReorder(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	n := 0
	p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
		if noise.MessageType(dg.Data) != noise.MessageTransportType || len(dg.Data) <= 32 {
			return conntest.Pass
		}
		n++
		switch n {
		case 1:
			return conntest.Hold // delivered after the others: reordered
		case 2:
			return conntest.Duplicate
		}
		return conntest.Pass
	})
	var pkts [][]byte
	for i := 0; i < 4; i++ {
		pkts = append(pkts, ipPacket(ipA4, ipB4, []byte{'r', byte(i)}))
		p.ta.Inject(pkts[i])
		time.Sleep(5 * time.Millisecond)
	}
	got := map[string]int{}
	collect := func(want int) {
		deadline := time.After(3 * time.Second)
		for len(got) < want {
			select {
			case g := <-p.tb.Outbound():
				got[string(g)]++
			case <-deadline:
				t.Fatalf("only %d distinct packets arrived", len(got))
			}
		}
	}
	collect(3)
	if p.nw.ReleaseHeld() != 1 {
		t.Fatal("nothing held")
	}
	collect(4)
	p.expectNone(p.tb, 50*time.Millisecond)
	for _, pk := range pkts {
		if got[string(pk)] != 1 {
			t.Fatalf("packet delivered %d times, want exactly once", got[string(pk)])
		}
	}
	// A captured transport datagram replayed later is refused.
	var captured []byte
	p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
		if captured == nil && noise.MessageType(dg.Data) == noise.MessageTransportType && len(dg.Data) > 32 {
			captured = append([]byte(nil), dg.Data...)
		}
		return conntest.Pass
	})
	p.send(p.ta, p.tb, ipA4, ipB4, "captured")
	p.nw.SetHook(nil)
	replayer := p.nw.NewBind(netip.MustParseAddr("192.0.2.66"))
	if _, _, err := replayer.Open(0); err != nil {
		t.Fatal(err)
	}
	defer replayer.Close()
	replayer.Send([][]byte{captured}, conn.NewRoute(conn.Endpoint{Dst: p.bb.Addr()}, 0))
	p.expectNone(p.tb, 100*time.Millisecond)
	// A replayed packet must not move the endpoint either.
	if ep, _ := peerOf(p.b, p.ka).routes.Endpoint(); ep.Dst != p.ba.Addr() {
		t.Fatalf("replay moved the endpoint to %v", ep.Dst)
	}
}

func TestRekeyMidTrafficLosesNothing(t *testing.T) {
	p := newPair(t, pairOpts{tweak: func(a, b *Device) {
		for _, d := range []*Device{a, b} {
			d.tm.rekeyAfterTime = 150 * time.Millisecond
			d.tm.rekeyTimeout = 50 * time.Millisecond
		}
	}})
	p.send(p.ta, p.tb, ipA4, ipB4, "start")
	peerB := peerOf(p.a, p.kb)
	sessions := map[*keypair]bool{peerB.keypairs.current.Load(): true}
	const total = 2000
	want := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < total; i++ {
			src, dst := ipA4, ipB4
			if i%2 == 1 {
				src, dst = ipA6, ipB6
			}
			p.ta.Inject(ipPacket(src, dst, []byte(fmt.Sprintf("seq %d", i))))
			if i%4 == 3 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	for i := 0; i < total; i++ {
		src, dst := ipA4, ipB4
		if i%2 == 1 {
			src, dst = ipA6, ipB6
		}
		want[string(ipPacket(src, dst, []byte(fmt.Sprintf("seq %d", i))))] = true
	}
	deadline := time.After(20 * time.Second)
	for len(want) > 0 {
		select {
		case got := <-p.tb.Outbound():
			delete(want, string(got))
			sessions[peerB.keypairs.current.Load()] = true
		case <-deadline:
			t.Fatalf("%d of %d packets lost across rekeys", len(want), total)
		}
	}
	<-done
	if len(sessions) < 3 {
		t.Fatalf("only %d sessions seen; expected several rekeys", len(sessions))
	}
}
