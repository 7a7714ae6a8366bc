package device

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"testing"

	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/sys/procs"
)

// TestCountersMove: a handshake counts an initiation sent and a
// completion on each side, the route learnt counts publications, and
// datagrams that are not for any session, of the wrong size, or with a bad
// mac1 count as drops and rejects by reason; a packet from the TUN device
// for no peer is a no_peer drop.
func TestCountersMove(t *testing.T) {
	p := newPair(t, pairOpts{})
	p.send(p.ta, p.tb, ipA4, ipB4, "hello")
	waitFor(t, "the counters", func() bool {
		a, b := p.a.Counters(), p.b.Counters()
		return a.InitiationsSent >= 1 && a.CompletedInitiator == 1 && b.CompletedResponder == 1
	})
	if c := p.a.Counters(); c.RoutePublications == 0 {
		t.Errorf("A published no route: %+v", c)
	}

	// A transport message for an index B never gave out.
	stray := make([]byte, noise.MessageTransportOverhead+16)
	binary.LittleEndian.PutUint32(stray[0:4], uint32(noise.MessageTransportType))
	binary.LittleEndian.PutUint32(stray[4:8], 0xdeadbeef)
	from := netip.MustParseAddrPort("192.0.2.99:1234")
	p.nw.Inject(from, p.bb.Addr(), stray)
	// A handshake initiation of the wrong size.
	short := make([]byte, noise.MessageInitiationSize-1)
	short[0] = byte(noise.MessageInitiationType)
	p.nw.Inject(from, p.bb.Addr(), short)
	// A well-sized initiation with a mac1 for another key.
	bad := make([]byte, noise.MessageInitiationSize)
	bad[0] = byte(noise.MessageInitiationType)
	p.nw.Inject(from, p.bb.Addr(), bad)
	waitFor(t, "B's drop and reject counters", func() bool {
		c := p.b.Counters()
		return c.Dropped[DropUnknownIndex] == 1 && c.Dropped[DropMalformed] == 1 && c.Rejected[RejectMAC1] == 1
	})
	// A packet for an address no peer has.
	if err := p.ta.Inject(ipPacket(ipA4, netip.MustParseAddr("10.9.9.9"), []byte("x"))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "A's no_peer drop", func() bool { return p.a.Counters().Dropped[DropNoPeer] == 1 })

	// Each names every counter once, with the reasons' labels.
	c := p.b.Counters()
	keys := map[string]uint64{}
	c.Each(func(k string, v uint64) {
		if _, dup := keys[k]; dup {
			t.Errorf("key %s twice", k)
		}
		keys[k] = v
	})
	if keys["handshakes_completed_responder"] != 1 || keys["dropped_unknown_index"] != 1 || keys["handshakes_rejected_mac1"] != 1 {
		t.Errorf("Each: %v", keys)
	}
	// The plan's gauges: what this process and device run with.
	plan := procs.Current()
	if keys["engine_gomaxprocs"] != uint64(runtime.GOMAXPROCS(0)) || keys["engine_crypto_workers"] != uint64(plan.CryptoWorkers) ||
		keys["engine_inline_crypto_batch"] != uint64(plan.InlineCrypto) || keys["engine_crypto_workers"] == 0 {
		t.Errorf("Each: engine gauges %d %d %d, want %d %d %d", keys["engine_gomaxprocs"], keys["engine_crypto_workers"], keys["engine_inline_crypto_batch"],
			runtime.GOMAXPROCS(0), plan.CryptoWorkers, plan.InlineCrypto)
	}
	// The process's memory: a live heap and stacks, and collections.
	if runtime.GC(); p.b.Counters().GCCycles == 0 || keys["engine_go_heap_live_bytes"] == 0 || keys["engine_go_stack_bytes"] == 0 || keys["engine_go_goroutines"] == 0 {
		t.Errorf("Each: memory gauges heap %d stacks %d goroutines %d", keys["engine_go_heap_live_bytes"], keys["engine_go_stack_bytes"], keys["engine_go_goroutines"])
	}
	if want := 3 + len(RejectReasons()) + 2 + len(DropReasons()) + 4 + 3 + 4; len(keys) != want {
		t.Errorf("Each gave %d keys, want %d", len(keys), want)
	}
}

// TestStatusWriterGetsCounters: WriteStatus hands the counters to a
// StatusWriter that takes them, between Device and the first Peer, and
// not to one that does not.
func TestStatusWriterGetsCounters(t *testing.T) {
	p := newPair(t, pairOpts{})
	var cw counterRecorder
	if err := p.a.WriteStatus(&cw); err != nil {
		t.Fatal(err)
	}
	if got := cw.order; got != "DCP" {
		t.Errorf("calls %q, want Device, Counters, Peer", got)
	}
	status(t, p.a) // a plain StatusWriter still works
}

type counterRecorder struct{ order string }

func (r *counterRecorder) Device(Status) error          { r.order += "D"; return nil }
func (r *counterRecorder) Counters(Counters) error      { r.order += "C"; return nil }
func (r *counterRecorder) Peer(PeerStatus) error        { r.order += "P"; return nil }
func (r *counterRecorder) AllowedIP(netip.Prefix) error { return nil }
