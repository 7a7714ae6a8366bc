package device

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/tun/memtun"
)

func TestWaitClosesWhenTUNGoesAway(t *testing.T) {
	tn := memtun.New("gone", 1420)
	_, b, _ := conntest.NewPair()
	d := NewDevice(tn, b, Options{})
	must(t, d.Up())
	tn.Close()
	select {
	case <-d.Wait():
	case <-time.After(5 * time.Second):
		t.Fatal("device did not close after its TUN went away")
	}
	if b.Addr().IsValid() {
		t.Fatal("bind still open after close")
	}
	d.Close() // idempotent
}

func TestCloseStopsGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "x")
	p.a.Close()
	p.b.Close()
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= before+2 })
}

func TestDownUpKeepsWorking(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "before")
	must(t, p.a.Down())
	p.ta.Inject(ipPacket(ipA4, ipB4, []byte("while down")))
	p.expectNone(p.tb, 30*time.Millisecond)
	must(t, p.a.Up())
	p.send(p.ta, p.tb, ipA4, ipB4, "after")
	p.send(p.tb, p.ta, ipB4, ipA4, "after back")
}

func TestJumboMTU(t *testing.T) {
	// wg-quick picks MTU 65456 for a loopback endpoint.
	const mtu = 65456
	p := &pair{t: t}
	p.nw, p.ba, p.bb = conntest.NewPair()
	p.ta, p.tb = memtun.New("a", mtu), memtun.New("b", mtu)
	p.a = NewDevice(p.ta, p.ba, Options{})
	p.b = NewDevice(p.tb, p.bb, Options{})
	t.Cleanup(func() { p.a.Close(); p.b.Close() })
	p.ka, p.kb = mustKey(t), mustKey(t)
	must(t, p.a.Up())
	must(t, p.b.Up())
	connectPair(t, p)
	big := make([]byte, mtu-28)
	for i := range big {
		big[i] = byte(i)
	}
	pkt := ipPacket(ipA4, ipB4, big)
	if len(pkt) != mtu {
		t.Fatalf("test packet is %d bytes", len(pkt))
	}
	must(t, p.ta.Inject(pkt))
	p.expect(p.tb, pkt)
	if size := int(p.a.pool.size.Load()); size > 65535 || size < mtu {
		t.Fatalf("buffers of %d bytes for MTU %d", size, mtu)
	}
}

// connectPair configures p.a and p.b as each other's peers.
func connectPair(t *testing.T, p *pair) {
	t.Helper()
	epA, epB := p.ba.Addr(), p.bb.Addr()
	must(t, p.a.Configure(connectConfig(p.ka, p.kb.PublicKey(), epB, "10.0.0.2/32")))
	must(t, p.b.Configure(connectConfig(p.kb, p.ka.PublicKey(), epA, "10.0.0.1/32")))
}

func TestGarbageDatagramsAreIgnored(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "warm up")
	from := netip.MustParseAddrPort("198.51.100.9:9")
	for _, g := range [][]byte{
		nil, {1}, {4, 0, 0, 0}, make([]byte, 32), make([]byte, 148), make([]byte, 92), make([]byte, 64),
		append([]byte{4, 0, 0, 0}, make([]byte, 100)...), {1, 0, 0, 1, 2, 3},
	} {
		p.nw.Inject(from, p.bb.Addr(), g)
	}
	p.send(p.ta, p.tb, ipA4, ipB4, "still fine")
	if ep, _ := peerOf(p.b, p.ka).routes.Endpoint(); ep.Dst != p.ba.Addr() {
		t.Fatal("garbage moved the endpoint")
	}
}

func TestMTUChangeResizesBuffers(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "small mtu")
	before := p.a.pool.size.Load()
	p.ta.SetMTU(9000)
	p.tb.SetMTU(9000)
	waitFor(t, "buffers resized", func() bool { return p.a.pool.size.Load() == int64(bufferSize(9000)) })
	if before >= p.a.pool.size.Load() {
		t.Fatalf("buffer size %d -> %d", before, p.a.pool.size.Load())
	}
	waitFor(t, "peer resized", func() bool { return p.b.pool.size.Load() == int64(bufferSize(9000)) })
	pkt := ipPacket(ipA4, ipB4, make([]byte, 8000))
	// The TUN reader's read in progress still uses the old buffers: the
	// first packet after the change only wakes it up.
	p.send(p.ta, p.tb, ipA4, ipB4, "wake up")
	p.ta.Inject(pkt)
	p.expect(p.tb, pkt)
}
