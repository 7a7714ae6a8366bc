package device

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
)

// traffic counts datagrams by sender and kind, and can drop some.
type traffic struct {
	mu     sync.Mutex
	counts map[trafficKey]int
	drop   func(dg conntest.Datagram) bool
}

type trafficKey struct {
	from netip.AddrPort
	kind string // "init", "resp", "cookie", "keepalive", "data"
}

func kindOf(b []byte) string {
	switch noise.MessageType(b) {
	case noise.MessageInitiationType:
		return "init"
	case noise.MessageResponseType:
		return "resp"
	case noise.MessageCookieReplyType:
		return "cookie"
	case noise.MessageTransportType:
		if len(b) == noise.MessageTransportOverhead {
			return "keepalive"
		}
		return "data"
	}
	return "other"
}

func watch(p *pair) *traffic {
	tr := &traffic{counts: map[trafficKey]int{}}
	p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		tr.counts[trafficKey{dg.From, kindOf(dg.Data)}]++
		if tr.drop != nil && tr.drop(dg) {
			return conntest.Drop
		}
		return conntest.Pass
	})
	return tr
}

func (tr *traffic) count(from netip.AddrPort, kind string) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.counts[trafficKey{from, kind}]
}

func (tr *traffic) setDrop(f func(dg conntest.Datagram) bool) {
	tr.mu.Lock()
	tr.drop = f
	tr.mu.Unlock()
}

// settle lets goroutines woken by an Advance finish their work.
func settle() { time.Sleep(20 * time.Millisecond) }

func TestTimerRetransmitAndGiveUp(t *testing.T) {
	p := newPair(t, pairOpts{fakeClock: true})
	tr := watch(p)
	tr.setDrop(func(conntest.Datagram) bool { return true }) // B never hears A
	a := p.ba.Addr()
	p.ta.Inject(ipPacket(ipA4, ipB4, []byte("lost")))
	waitFor(t, "first initiation", func() bool { return tr.count(a, "init") == 1 })
	peerB := peerOf(p.a, p.kb)
	for i := 2; i <= MaxTimerHandshakes+2; i++ {
		p.clk.Advance(RekeyTimeout + RekeyTimeoutJitterMax)
		settle()
		if got := tr.count(a, "init"); got != i {
			t.Fatalf("after %d retransmit periods: %d initiations, want %d", i-1, got, i)
		}
	}
	// The attempt lasted RekeyAttemptTime; the next expiry gives up.
	p.clk.Advance(RekeyTimeout + RekeyTimeoutJitterMax)
	settle()
	p.clk.Advance(time.Minute)
	settle()
	if got := tr.count(a, "init"); got != MaxTimerHandshakes+2 {
		t.Fatalf("initiations kept going after giving up: %d", got)
	}
	peerB.stageMu.Lock()
	staged := len(peerB.staged)
	peerB.stageMu.Unlock()
	if staged != 0 {
		t.Fatalf("%d packets still staged after giving up", staged)
	}
	if !peerB.timers.zeroKeyMaterial.pending.Load() {
		t.Fatal("giving up should arm the key-zeroing timer")
	}
}

// established runs one packet A->B so that both sides have a session.
func established(t *testing.T) (*pair, *traffic) {
	p := newPair(t, pairOpts{fakeClock: true})
	tr := watch(p)
	p.send(p.ta, p.tb, ipA4, ipB4, "establish")
	settle()
	return p, tr
}

func TestTimerKeepaliveAfterReceivedData(t *testing.T) {
	p, tr := established(t)
	a, b := p.ba.Addr(), p.bb.Addr()
	if tr.count(b, "keepalive") != 0 {
		t.Fatal("keepalive before KeepaliveTimeout")
	}
	p.clk.Advance(KeepaliveTimeout - time.Second)
	settle()
	if tr.count(b, "keepalive") != 0 {
		t.Fatal("keepalive before KeepaliveTimeout")
	}
	p.clk.Advance(time.Second)
	waitFor(t, "B's keepalive", func() bool { return tr.count(b, "keepalive") == 1 })
	// The keepalive counts as a reply: A must not start a new handshake.
	p.clk.Advance(KeepaliveTimeout + RekeyTimeout + RekeyTimeoutJitterMax)
	settle()
	if n := tr.count(a, "init"); n != 1 {
		t.Fatalf("A sent %d initiations, want only the first", n)
	}
	if n := tr.count(b, "keepalive"); n != 1 {
		t.Fatalf("B sent %d keepalives with no data received since, want 1", n)
	}
}

func TestTimerNewHandshakeWhenNoReply(t *testing.T) {
	p, tr := established(t)
	a, b := p.ba.Addr(), p.bb.Addr()
	tr.setDrop(func(dg conntest.Datagram) bool { return dg.From == b })
	p.ta.Inject(ipPacket(ipA4, ipB4, []byte("unanswered")))
	waitFor(t, "data", func() bool { return tr.count(a, "data") == 2 })
	p.clk.Advance(KeepaliveTimeout + RekeyTimeout - time.Second)
	settle()
	if tr.count(a, "init") != 1 {
		t.Fatal("new handshake too early")
	}
	p.clk.Advance(time.Second + RekeyTimeoutJitterMax)
	waitFor(t, "new initiation", func() bool { return tr.count(a, "init") == 2 })
}

func TestTimerPersistentKeepalive(t *testing.T) {
	p, tr := established(t)
	a := p.ba.Addr()
	before := tr.count(a, "keepalive")
	must(t, p.a.Configure(&Config{Peers: []PeerConfig{{
		PublicKey: p.kb.PublicKey(), PersistentKeepalive: ptr(uint16(25)),
	}}}))
	waitFor(t, "immediate keepalive", func() bool { return tr.count(a, "keepalive") == before+1 })
	// B's own keepalive (for the data it received) arrives at
	// KeepaliveTimeout and restarts A's interval: traffic either way does.
	p.clk.Advance(KeepaliveTimeout)
	waitFor(t, "B's keepalive", func() bool { return tr.count(p.bb.Addr(), "keepalive") == 1 })
	p.clk.Advance(25*time.Second - time.Second)
	settle()
	if tr.count(a, "keepalive") != before+1 {
		t.Fatal("persistent keepalive did not restart after received traffic")
	}
	p.clk.Advance(time.Second)
	waitFor(t, "periodic keepalive", func() bool { return tr.count(a, "keepalive") >= before+2 })
	for i := 3; i <= 4; i++ {
		p.clk.Advance(25 * time.Second)
		waitFor(t, "periodic keepalive", func() bool { return tr.count(a, "keepalive") >= before+i })
	}
	must(t, p.a.Configure(&Config{Peers: []PeerConfig{{
		PublicKey: p.kb.PublicKey(), PersistentKeepalive: ptr(uint16(0)),
	}}}))
	n := tr.count(a, "keepalive")
	p.clk.Advance(time.Minute)
	settle()
	if tr.count(a, "keepalive") != n {
		t.Fatal("keepalives continued after turning the interval off")
	}
}

func TestTimerRekeyAfterTime(t *testing.T) {
	p, tr := established(t)
	a := p.ba.Addr()
	peerB := peerOf(p.a, p.kb)
	first := peerB.keypairs.current.Load()
	p.clk.Advance(RekeyAfterTime + time.Second)
	settle()
	p.send(p.ta, p.tb, ipA4, ipB4, "old key still valid")
	waitFor(t, "rekey initiation", func() bool { return tr.count(a, "init") == 2 })
	waitFor(t, "new session", func() bool { return peerB.keypairs.current.Load() != first })
	p.send(p.ta, p.tb, ipA4, ipB4, "new key")
	p.send(p.tb, p.ta, ipB4, ipA4, "new key back")
}

func TestTimerRejectAfterTime(t *testing.T) {
	p, tr := established(t)
	a := p.ba.Addr()
	tr.setDrop(func(dg conntest.Datagram) bool { return kindOf(dg.Data) == "init" })
	p.clk.Advance(RejectAfterTime + time.Second)
	settle()
	dataBefore := tr.count(a, "data")
	p.ta.Inject(ipPacket(ipA4, ipB4, []byte("expired key")))
	waitFor(t, "initiation for expired session", func() bool { return tr.count(a, "init") >= 2 })
	settle()
	if tr.count(a, "data") != dataBefore {
		t.Fatal("data sent with a session older than RejectAfterTime")
	}
	tr.setDrop(nil)
	p.clk.Advance(RekeyTimeout + RekeyTimeoutJitterMax)
	p.expect(p.tb, ipPacket(ipA4, ipB4, []byte("expired key")))
}

func TestTimerRekeyOnReceive(t *testing.T) {
	p, tr := established(t)
	a := p.ba.Addr()
	p.clk.Advance(RekeyOnReceiveAge + time.Second)
	settle()
	n := tr.count(a, "init")
	// B (the responder) sends; A's session is old, so A rekeys on receive.
	p.send(p.tb, p.ta, ipB4, ipA4, "late data")
	waitFor(t, "rekey on receive", func() bool { return tr.count(a, "init") == n+1 })
}

func TestTimerZeroKeyMaterial(t *testing.T) {
	p, tr := established(t)
	tr.setDrop(func(conntest.Datagram) bool { return true })
	peerB := peerOf(p.a, p.kb)
	p.clk.Advance(ZeroKeyMaterialTime - time.Second)
	settle()
	if peerB.keypairs.current.Load() == nil {
		t.Fatal("keys zeroed too early")
	}
	p.clk.Advance(2 * time.Second)
	settle()
	peerB.kpMu.Lock()
	defer peerB.kpMu.Unlock()
	if peerB.keypairs.current.Load() != nil || peerB.keypairs.previous != nil || peerB.keypairs.next != nil {
		t.Fatal("keys not zeroed after 3 x RejectAfterTime")
	}
}

func TestRekeyAfterMessagesAndRejectAfterMessages(t *testing.T) {
	p, tr := established(t)
	a := p.ba.Addr()
	kp := peerOf(p.a, p.kb).keypairs.current.Load()
	// Near RekeyAfterMessages the session still sends but asks for a new
	// one (initiations are at most one per RekeyTimeout).
	p.clk.Advance(RekeyTimeout + time.Second)
	kp.sendNonce.Store(RekeyAfterMessages)
	p.send(p.ta, p.tb, ipA4, ipB4, "past rekey-after-messages")
	waitFor(t, "rekey initiation", func() bool { return tr.count(a, "init") == 2 })
	waitFor(t, "new session", func() bool { return peerOf(p.a, p.kb).keypairs.current.Load() != kp })

	// A spent session sends nothing more and waits for a new handshake.
	p.clk.Advance(RekeyTimeout + time.Second)
	kp2 := peerOf(p.a, p.kb).keypairs.current.Load()
	kp2.sendNonce.Store(RejectAfterMessages)
	data := tr.count(a, "data")
	tr.setDrop(func(dg conntest.Datagram) bool { return kindOf(dg.Data) == "init" })
	p.ta.Inject(ipPacket(ipA4, ipB4, []byte("spent")))
	waitFor(t, "initiation for a spent session", func() bool { return tr.count(a, "init") == 3 })
	settle()
	if tr.count(a, "data") != data {
		t.Fatal("data sent on a session past RejectAfterMessages")
	}
}
