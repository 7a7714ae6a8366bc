package control

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// testSide is a minimal Side: a fixed agreement, a data channel made by
// the first Agree, and the messages Serve hands over.
type testSide struct {
	client  bool
	agree   Agreement
	refused bool // Agree's Refuse was set by the test

	mu    sync.Mutex // guards the fields below
	ch    *data.Channel
	hello []*Agreement
	peers []*KeyMethod2
	msgs  []string
}

func (s *testSide) Hello(local *KeyMethod2, a *Agreement) {
	s.mu.Lock()
	s.hello = append(s.hello, a)
	s.mu.Unlock()
	local.Options = fmt.Sprintf("V4,test,client=%v", s.client)
	if s.client {
		local.PeerInfo = "IV_PROTO=2\n"
	}
}

func (s *testSide) Agree(tc *tls.Conn, mr *MessageReader, peer *KeyMethod2, initial bool) (Agreement, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peers = append(s.peers, &KeyMethod2{Options: peer.Options, PeerInfo: peer.PeerInfo})
	if initial {
		s.ch = data.NewChannel(wire.UndefinedPeerID)
	}
	return s.agree, nil
}

func (s *testSide) Data() *data.Channel {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *testSide) Explain(stage Stage, ctxErr, err error) error {
	return fmt.Errorf("stage %d (context: %v): %w", stage, ctxErr, err)
}

func (s *testSide) Message(a *Active, m string) bool {
	s.mu.Lock()
	s.msgs = append(s.msgs, m)
	s.mu.Unlock()
	return m != "STOP"
}

func (s *testSide) messages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

// exchangePair is a client and a server Exchange over a pair of channels.
type exchangePair struct {
	*pair
	cs, ss   *testSide
	cx, sx   *Exchange
	ck, sk   Keys
	done     chan struct{}
	srvState chan *KeyState
}

func newExchangePair(t *testing.T, a Agreement) *exchangePair {
	return newExchangePairDrop(t, a, nil)
}

func newExchangePairDrop(t *testing.T, a Agreement, drop func(dir, n int) bool) *exchangePair {
	p := newPair(t, nil, drop)
	x := &exchangePair{pair: p, cs: &testSide{client: true, agree: a}, ss: &testSide{agree: a}, done: make(chan struct{})}
	x.cx = &Exchange{Channel: p.cli, TLS: p.cliTLS, Client: true, Timeout: 10 * time.Second, RenegSec: 3600, Done: x.done, Keys: &x.ck, Side: x.cs}
	x.sx = &Exchange{Channel: p.srv, TLS: p.srvTLS, Timeout: 10 * time.Second, Done: x.done, Keys: &x.sk, Side: x.ss}
	t.Cleanup(func() { close(x.done) })
	return x
}

type runResult struct {
	a   *Active
	mr  *MessageReader
	err error
}

// run runs both sides' exchange on the key states and waits for both.
func (x *exchangePair) run(t *testing.T, cks, sks *KeyState, initial bool) (c, s runResult) {
	t.Helper()
	cr, sr := make(chan runResult, 1), make(chan runResult, 1)
	go func() {
		a, mr, err := x.cx.Run(context.Background(), cks, initial)
		cr <- runResult{a, mr, err}
	}()
	go func() {
		a, mr, err := x.sx.Run(context.Background(), sks, initial)
		sr <- runResult{a, mr, err}
	}()
	for i := 0; i < 2; i++ {
		select {
		case c = <-cr:
		case s = <-sr:
		case <-time.After(20 * time.Second):
			t.Fatal("key exchange hung")
		}
	}
	return c, s
}

// roundTrip sends payload from one data channel to the other.
func roundTrip(t *testing.T, from, to *data.Channel, payload string) {
	t.Helper()
	buf := make([]byte, data.Headroom+len(payload)+data.Tailroom)
	pkt, err := from.EncryptPayload(buf, []byte(payload))
	if err != nil {
		t.Fatalf("encrypt: %v", err)
	}
	in := make([]byte, len(pkt), len(pkt)+data.Tailroom)
	copy(in, pkt)
	got, _, err := to.Decrypt(in)
	if err != nil || string(got) != payload {
		t.Fatalf("decrypt: %q, %v", got, err)
	}
}

func TestExchangeBothSidesAgreeOnKeys(t *testing.T) {
	for _, a := range []Agreement{{Cipher: data.AES256GCM, EKM: true}, {Cipher: data.ChaCha20Poly1305}, {Cipher: data.AES128GCM}} {
		t.Run(fmt.Sprintf("%v ekm=%v", a.Cipher, a.EKM), func(t *testing.T) {
			x := newExchangePair(t, a)
			sks, _ := x.srv.Start(0)
			cks, _ := x.cli.Start(0)
			c, s := x.run(t, cks, sks, true)
			if c.err != nil || s.err != nil {
				t.Fatalf("client: %v, server: %v", c.err, s.err)
			}
			if c.a.Agreement != a || s.a.Agreement != a {
				t.Fatalf("agreements %+v / %+v, want %+v", c.a.Agreement, s.a.Agreement, a)
			}
			roundTrip(t, x.cs.Data(), x.ss.Data(), "client to server")
			roundTrip(t, x.ss.Data(), x.cs.Data(), "server to client")
			// The client speaks first (Hello without an agreement), the
			// server after Agree; each saw the other's options.
			if x.cs.hello[0] != nil || x.ss.hello[0] == nil || x.ss.hello[0].Cipher != a.Cipher {
				t.Fatalf("hello agreements: client %v, server %v", x.cs.hello[0], x.ss.hello[0])
			}
			if x.ss.peers[0].Options != "V4,test,client=true" || x.ss.peers[0].PeerInfo != "IV_PROTO=2\n" || x.cs.peers[0].Options != "V4,test,client=false" {
				t.Fatalf("key_method_2 seen: server got %+v, client got %+v", x.ss.peers[0], x.cs.peers[0])
			}
			if x.ck.Primary() != c.a || x.sk.Primary() != s.a {
				t.Fatal("the new key state is not primary")
			}
			if !x.ck.RenegDue(time.Now().Add(3601*time.Second)) || x.ck.RenegDue(time.Now()) || x.sk.RenegDue(time.Now().Add(time.Hour*1000)) {
				t.Fatal("renegotiation deadline: want reneg-sec on the client only")
			}
		})
	}
}

func TestExchangeRenegotiationRotatesKeys(t *testing.T) {
	x := newExchangePair(t, Agreement{Cipher: data.AES256GCM, EKM: true})
	sks, _ := x.srv.Start(0)
	cks, _ := x.cli.Start(0)
	c0, s0 := x.run(t, cks, sks, true)
	if c0.err != nil || s0.err != nil {
		t.Fatalf("client: %v, server: %v", c0.err, s0.err)
	}
	for i, want := range []uint8{1, 2} {
		cks1, err := x.ck.StartNext(x.cli)
		if err != nil {
			t.Fatalf("renegotiation %d: %v", i, err)
		}
		id := cks1.ID
		if id != want {
			t.Fatalf("renegotiation %d takes key id %d, want %d", i, id, want)
		}
		var sks1 *KeyState
		select {
		case sks1 = <-x.softResets:
		case <-time.After(5 * time.Second):
			t.Fatal("server saw no soft reset")
		}
		c1, s1 := x.run(t, cks1, sks1, false)
		if c1.err != nil || s1.err != nil {
			t.Fatalf("renegotiation: client %v, server %v", c1.err, s1.err)
		}
		if k := x.cs.Data().Primary(); k == nil || k.ID != id {
			t.Fatalf("client sends with key %v, want %d", k, id)
		}
		roundTrip(t, x.cs.Data(), x.ss.Data(), "after renegotiation")
		roundTrip(t, x.ss.Data(), x.cs.Data(), "and back")
		if x.ck.Primary() != c1.a || x.sk.Primary() != s1.a {
			t.Fatal("the renegotiated key state is not primary")
		}
	}
	// Key 0 was the lame duck of key 1 and is gone since key 2; key 1 is
	// the lame duck now and expires after its window.
	if x.cli.State(0) != nil || x.srv.State(0) != nil {
		t.Fatal("key state 0 survived two renegotiations")
	}
	x.ck.ExpireLame(x.cli, time.Now(), time.Hour)
	if x.cli.State(1) == nil {
		t.Fatal("lame duck removed before its window ended")
	}
	x.ck.ExpireLame(x.cli, time.Now().Add(2*time.Hour), time.Hour)
	if x.cli.State(1) != nil {
		t.Fatal("lame duck kept after its window")
	}
}

func TestExchangeRefusalSendsAuthFailed(t *testing.T) {
	x := newExchangePair(t, Agreement{Cipher: data.AES256GCM})
	x.ss.agree.Refuse = "no shared data cipher"
	sks, _ := x.srv.Start(0)
	cks, _ := x.cli.Start(0)
	// The refusing server creates no data channel; the client pulls,
	// which this test side stands in for by reading the next message.
	x.cs.agree = Agreement{Cipher: data.AES256GCM}
	cr := make(chan error, 1)
	go func() {
		a, mr, err := x.cx.Run(context.Background(), cks, true)
		if err == nil {
			var m string
			if m, err = mr.Read(); err == nil {
				err = errors.New(m)
			}
			_ = a
		}
		cr <- err
	}()
	_, _, err := x.sx.Run(context.Background(), sks, true)
	if err == nil || err.Error() != "no shared data cipher" {
		t.Fatalf("server: %v, want the refusal", err)
	}
	select {
	case err := <-cr:
		if err == nil || !strings.HasPrefix(err.Error(), "AUTH_FAILED,no shared data cipher") {
			t.Fatalf("client got %v, want AUTH_FAILED", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("client never heard of the refusal")
	}
}

func TestExchangeServeHandsMessagesToSide(t *testing.T) {
	x := newExchangePair(t, Agreement{Cipher: data.AES128GCM, EKM: true})
	sks, _ := x.srv.Start(0)
	cks, _ := x.cli.Start(0)
	c, s := x.run(t, cks, sks, true)
	if c.err != nil || s.err != nil {
		t.Fatalf("client: %v, server: %v", c.err, s.err)
	}
	served := make(chan struct{})
	go func() { x.sx.Serve(s.a, s.mr); close(served) }()
	for _, m := range []string{"PUSH_REQUEST", "EXIT", "STOP", "NOT READ"} {
		if err := WriteMessage(c.a.Conn, m); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-served:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not stop when Message returned false")
	}
	if got := strings.Join(x.ss.messages(), " "); got != "PUSH_REQUEST EXIT STOP" {
		t.Fatalf("messages served: %q", got)
	}
}

func TestExchangeTimesOutWithoutPeer(t *testing.T) {
	x := newExchangePairDrop(t, Agreement{Cipher: data.AES256GCM}, func(int, int) bool { return true })
	x.cx.Timeout = 200 * time.Millisecond
	cks, _ := x.cli.Start(0) // the server never hears of it
	_, _, err := x.cx.Run(context.Background(), cks, true)
	if err == nil || !strings.HasPrefix(err.Error(), "stage 0 (context: context deadline exceeded)") {
		t.Fatalf("got %v, want a timeout while waiting for the peer", err)
	}
}

func TestNextKeyIDSkipsZero(t *testing.T) {
	var got []uint8
	id := uint8(0)
	for i := 0; i < 9; i++ {
		id = NextKeyID(id)
		got = append(got, id)
	}
	if fmt.Sprint(got) != "[1 2 3 4 5 6 7 1 2]" {
		t.Fatalf("key id sequence %v", got)
	}
	var k Keys
	ch, _ := NewChannel(ChannelConfig{Client: true, Send: func([]byte) error { return nil }})
	defer ch.Close()
	if ks, err := k.StartNext(ch); err != nil || ks.ID != 1 {
		t.Fatalf("a fresh session renegotiates with key state %v (%v), want key id 1", ks, err)
	}
}

// When one side's renegotiation timer fires while the peer's SOFT_RESET_V1
// has started a key state (with OpenVPN 2.6 over TCP under load this
// happened within seconds of short reneg-sec on both ends), that side
// must not start a key state of its own: replacing the peer's would
// restart its message ids at 0, the peer drops those as replays, and the
// renegotiation never finishes. The timer waits instead; the peer's new
// key resets it, and the next renegotiation takes the next key id.
func TestStartKeepsTheKeyStateThePeerStarted(t *testing.T) {
	for _, starter := range []string{"server", "client"} {
		t.Run("the "+starter+" starts", func(t *testing.T) {
			x := newExchangePair(t, Agreement{Cipher: data.AES256GCM, EKM: true})
			x.sx.RenegSec = 3600 // both sides have a renegotiation timer
			sks, _ := x.srv.Start(0)
			cks, _ := x.cli.Start(0)
			if c, s := x.run(t, cks, sks, true); c.err != nil || s.err != nil {
				t.Fatalf("client: %v, server: %v", c.err, s.err)
			}
			// Starter and responder: their Keys, channels and the
			// key states the responder learns of from the starter.
			startK, startCh, respK, respCh, learned := &x.sk, x.srv, &x.ck, x.cli, x.cliSoftResets
			if starter == "client" {
				startK, startCh, respK, respCh, learned = &x.ck, x.cli, &x.sk, x.srv, x.softResets
			}
			started, err := startK.StartNext(startCh)
			if err != nil || started.ID != 1 {
				t.Fatalf("%s starts key state %v: %v", starter, started, err)
			}
			var peers *KeyState
			select {
			case peers = <-learned:
			case <-time.After(5 * time.Second):
				t.Fatal("the other side saw no soft reset")
			}
			// The responder's timer fires now.
			late := time.Now().Add(3601 * time.Second)
			if !respK.RenegDue(late) {
				t.Fatal("responder's renegotiation not due in the test")
			}
			if ks, err := respK.StartNext(respCh); !errors.Is(err, ErrKeyStateBusy) {
				t.Fatalf("StartNext during the peer's renegotiation: %v, %v; want ErrKeyStateBusy", ks, err)
			}
			if ks, err := respCh.Start(peers.ID); !errors.Is(err, ErrKeyStateBusy) {
				t.Fatalf("Start(%d) over the peer's key state: %v, %v; want ErrKeyStateBusy", peers.ID, ks, err)
			}
			if respCh.State(peers.ID) != peers || !respK.RenegDue(late) {
				t.Fatal("the refused start replaced the key state or dropped the deadline")
			}
			// The starter's own second attempt is refused too.
			if _, err := startK.StartNext(startCh); !errors.Is(err, ErrKeyStateBusy) {
				t.Fatalf("second StartNext during its own renegotiation: %v", err)
			}
			cks1, sks1 := peers, started
			if starter == "client" {
				cks1, sks1 = started, peers
			}
			c1, s1 := x.run(t, cks1, sks1, false)
			if c1.err != nil || s1.err != nil {
				t.Fatalf("renegotiation: client %v, server %v", c1.err, s1.err)
			}
			if k := x.cs.Data().Primary(); k == nil || k.ID != 1 {
				t.Fatalf("client sends with key %v, want 1", k)
			}
			roundTrip(t, x.cs.Data(), x.ss.Data(), "after renegotiation")
			roundTrip(t, x.ss.Data(), x.cs.Data(), "and back")
			// The new key restarted both timers; the deferred one is not
			// due any more, and the next renegotiation takes key id 2.
			for _, k := range []*Keys{&x.ck, &x.sk} {
				if k.RenegDue(time.Now().Add(3599 * time.Second)) {
					t.Fatal("renegotiation due again right after a new key")
				}
			}
			if ks, err := respK.StartNext(respCh); err != nil || ks.ID != 2 {
				t.Fatalf("next renegotiation: key state %v, %v; want key id 2", ks, err)
			}
		})
	}
}

// A renegotiation whose exchange fails (its key state removed) leaves the
// deadline due, so the next timer tick starts another, with a fresh key
// id; a closed or retired key state never blocks a start.
func TestFailedRenegotiationStaysDue(t *testing.T) {
	x := newExchangePair(t, Agreement{Cipher: data.AES256GCM, EKM: true})
	sks, _ := x.srv.Start(0)
	cks, _ := x.cli.Start(0)
	if c, s := x.run(t, cks, sks, true); c.err != nil || s.err != nil {
		t.Fatalf("client: %v, server: %v", c.err, s.err)
	}
	late := time.Now().Add(3601 * time.Second)
	ks1, err := x.ck.StartNext(x.cli)
	if err != nil || ks1.ID != 1 {
		t.Fatalf("first attempt: %v, %v", ks1, err)
	}
	x.cli.Remove(ks1) // its exchange failed
	if !x.ck.RenegDue(late) {
		t.Fatal("a failed renegotiation dropped the deadline")
	}
	ks2, err := x.ck.StartNext(x.cli)
	if err != nil || ks2.ID != 2 {
		t.Fatalf("second attempt: %v, %v; want key id 2", ks2, err)
	}
	ks2.Conn().Close()
	if ks, err := x.cli.Start(2); err != nil || ks == ks2 {
		t.Fatalf("Start over a closed key state: %v, %v", ks, err)
	}
}
