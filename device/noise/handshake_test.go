package noise

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

// pair is two endpoints that know each other: a (initiator in most tests)
// and b.
type pair struct {
	a, b     *Local
	ab, ba   *Handshake // a's state for b, b's state for a
	t0       time.Time
	findAtB  func(PublicKey) *Handshake
	findAtAr func(uint32) *Handshake
}

func newPair(t testing.TB, pskA, pskB PresharedKey) *pair {
	t.Helper()
	ka, _ := GeneratePrivateKey()
	kb, _ := GeneratePrivateKey()
	p := &pair{a: NewLocal(ka), b: NewLocal(kb), t0: time.Now()}
	p.ab = NewHandshake(p.a, p.b.PublicKey(), pskA)
	p.ba = NewHandshake(p.b, p.a.PublicKey(), pskB)
	p.findAtB = func(k PublicKey) *Handshake {
		if k == p.a.PublicKey() {
			return p.ba
		}
		return nil
	}
	p.findAtAr = func(i uint32) *Handshake {
		if i == p.ab.LocalIndex() {
			return p.ab
		}
		return nil
	}
	return p
}

// handshake runs a full exchange with a as initiator at time now and
// returns both sessions.
func (p *pair) handshake(t testing.TB, now time.Time) (initiator, responder *Session) {
	t.Helper()
	ini, err := p.ab.CreateInitiation(7, now)
	if err != nil {
		t.Fatalf("CreateInitiation: %v", err)
	}
	h, err := ConsumeInitiation(p.b, &ini, now, p.findAtB)
	if err != nil {
		t.Fatalf("ConsumeInitiation: %v", err)
	}
	if h != p.ba {
		t.Fatal("ConsumeInitiation returned the wrong handshake")
	}
	res, err := h.CreateResponse(9)
	if err != nil {
		t.Fatalf("CreateResponse: %v", err)
	}
	if res.Receiver != 7 || res.Sender != 9 {
		t.Fatalf("response indices %d->%d", res.Sender, res.Receiver)
	}
	rs, err := h.DeriveSession(now)
	if err != nil {
		t.Fatalf("responder DeriveSession: %v", err)
	}
	h2, err := ConsumeResponse(p.a, &res, p.findAtAr)
	if err != nil {
		t.Fatalf("ConsumeResponse: %v", err)
	}
	is, err := h2.DeriveSession(now)
	if err != nil {
		t.Fatalf("initiator DeriveSession: %v", err)
	}
	return is, rs
}

// checkSessionsMatch proves the keys pair up by encrypting both ways.
func checkSessionsMatch(t *testing.T, is, rs *Session) {
	t.Helper()
	var nonce [12]byte
	nonce[4] = 1
	msg := []byte("ping over the tunnel")
	ct := is.Send.Seal(nil, nonce[:], msg, nil)
	pt, err := rs.Receive.Open(nil, nonce[:], ct, nil)
	if err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("initiator->responder: %v", err)
	}
	ct = rs.Send.Seal(nil, nonce[:], msg, nil)
	pt, err = is.Receive.Open(nil, nonce[:], ct, nil)
	if err != nil || !bytes.Equal(pt, msg) {
		t.Fatalf("responder->initiator: %v", err)
	}
	// The two directions use different keys.
	if _, err := is.Receive.Open(nil, nonce[:], is.Send.Seal(nil, nonce[:], msg, nil), nil); err == nil {
		t.Fatal("send and receive keys are equal")
	}
	if !is.IsInitiator || rs.IsInitiator {
		t.Error("IsInitiator flags")
	}
	if is.LocalIndex != rs.RemoteIndex || is.RemoteIndex != rs.LocalIndex {
		t.Errorf("indices: initiator %d/%d responder %d/%d", is.LocalIndex, is.RemoteIndex, rs.LocalIndex, rs.RemoteIndex)
	}
}

func TestHandshakeDerivesMatchingKeys(t *testing.T) {
	psk, _ := GeneratePresharedKey()
	for _, tt := range []struct {
		name string
		psk  PresharedKey
	}{{"without preshared key", PresharedKey{}}, {"with preshared key", psk}} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPair(t, tt.psk, tt.psk)
			is, rs := p.handshake(t, p.t0)
			checkSessionsMatch(t, is, rs)
			if is.LocalIndex != 7 || is.RemoteIndex != 9 || !is.Created.Equal(p.t0) {
				t.Errorf("initiator session %+v", is)
			}
			// A second handshake gives fresh, different keys.
			is2, rs2 := p.handshake(t, p.t0.Add(time.Second))
			checkSessionsMatch(t, is2, rs2)
			var nonce [12]byte
			if _, err := rs2.Receive.Open(nil, nonce[:], is.Send.Seal(nil, nonce[:], nil, nil), nil); err == nil {
				t.Error("second handshake reused the first keys")
			}
		})
	}
}

func TestHandshakeBothDirections(t *testing.T) {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	// b initiates to a over the same Handshake objects.
	ini, err := p.ba.CreateInitiation(100, p.t0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ConsumeInitiation(p.a, &ini, p.t0, func(k PublicKey) *Handshake {
		if k == p.b.PublicKey() {
			return p.ab
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := h.CreateResponse(200)
	rs, _ := h.DeriveSession(p.t0)
	h2, err := ConsumeResponse(p.b, &res, func(i uint32) *Handshake {
		if i == 100 {
			return p.ba
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	is, _ := h2.DeriveSession(p.t0)
	checkSessionsMatch(t, is, rs)
}

func TestWrongPresharedKeyFails(t *testing.T) {
	psk1, _ := GeneratePresharedKey()
	psk2, _ := GeneratePresharedKey()
	for _, tt := range []struct {
		name   string
		pa, pb PresharedKey
	}{{"different keys", psk1, psk2}, {"only initiator has one", psk1, PresharedKey{}}, {"only responder has one", PresharedKey{}, psk2}} {
		t.Run(tt.name, func(t *testing.T) {
			p := newPair(t, tt.pa, tt.pb)
			ini, _ := p.ab.CreateInitiation(1, p.t0)
			h, err := ConsumeInitiation(p.b, &ini, p.t0, p.findAtB)
			if err != nil {
				t.Fatalf("initiation does not depend on the psk, yet: %v", err)
			}
			res, _ := h.CreateResponse(2)
			if _, err := ConsumeResponse(p.a, &res, p.findAtAr); !errors.Is(err, ErrAuthentication) {
				t.Fatalf("ConsumeResponse error = %v, want ErrAuthentication", err)
			}
			if _, err := p.ab.DeriveSession(p.t0); !errors.Is(err, ErrHandshakeState) {
				t.Errorf("DeriveSession after failed response: %v", err)
			}
		})
	}
	// SetPresharedKey repairs it.
	p := newPair(t, psk1, psk2)
	p.ba.SetPresharedKey(psk1)
	is, rs := p.handshake(t, p.t0)
	checkSessionsMatch(t, is, rs)
}

func TestTamperedInitiationFails(t *testing.T) {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	ini, _ := p.ab.CreateInitiation(1, p.t0)
	wire := ini.MarshalTo(nil)
	// Flip one bit in each byte from the ephemeral key to the end of the
	// timestamp; every such change must be detected. (Sender and the MACs
	// are not covered by the handshake; the cookie checker covers MACs.)
	for i := 8; i < 116; i++ {
		bad := append([]byte(nil), wire...)
		bad[i] ^= 0x10
		var m MessageInitiation
		if err := m.Unmarshal(bad); err != nil {
			t.Fatal(err)
		}
		if _, err := ConsumeInitiation(p.b, &m, p.t0, p.findAtB); err == nil {
			t.Fatalf("initiation with byte %d flipped accepted", i)
		}
	}
	// The untouched message is still good: failures left no state behind.
	if _, err := ConsumeInitiation(p.b, &ini, p.t0, p.findAtB); err != nil {
		t.Fatalf("original initiation rejected after tampered ones: %v", err)
	}
}

func TestTamperedResponseFails(t *testing.T) {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	ini, _ := p.ab.CreateInitiation(1, p.t0)
	h, _ := ConsumeInitiation(p.b, &ini, p.t0, p.findAtB)
	res, _ := h.CreateResponse(2)
	wire := res.MarshalTo(nil)
	for i := 12; i < 60; i++ {
		bad := append([]byte(nil), wire...)
		bad[i] ^= 0x01
		var m MessageResponse
		_ = m.Unmarshal(bad)
		if _, err := ConsumeResponse(p.a, &m, p.findAtAr); err == nil {
			t.Fatalf("response with byte %d flipped accepted", i)
		}
	}
	if _, err := ConsumeResponse(p.a, &res, p.findAtAr); err != nil {
		t.Fatalf("original response rejected after tampered ones: %v", err)
	}
	// A response can be consumed only once.
	if _, err := ConsumeResponse(p.a, &res, p.findAtAr); !errors.Is(err, ErrHandshakeState) {
		t.Fatalf("second ConsumeResponse: %v", err)
	}
}

func TestReplayedInitiationRejected(t *testing.T) {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	ini, _ := p.ab.CreateInitiation(1, p.t0)
	if _, err := ConsumeInitiation(p.b, &ini, p.t0, p.findAtB); err != nil {
		t.Fatal(err)
	}
	// Same message a second later: timestamp not newer.
	if _, err := ConsumeInitiation(p.b, &ini, p.t0.Add(time.Second), p.findAtB); !errors.Is(err, ErrReplayedInitiation) {
		t.Fatalf("replay error = %v", err)
	}
	// An initiation created earlier than the accepted one is also old.
	old, _ := NewHandshake(p.a, p.b.PublicKey(), PresharedKey{}).CreateInitiation(2, p.t0.Add(-time.Minute))
	if _, err := ConsumeInitiation(p.b, &old, p.t0.Add(2*time.Second), p.findAtB); !errors.Is(err, ErrReplayedInitiation) {
		t.Fatalf("older initiation error = %v", err)
	}
	// A newer one passes.
	fresh, _ := p.ab.CreateInitiation(3, p.t0.Add(3*time.Second))
	if _, err := ConsumeInitiation(p.b, &fresh, p.t0.Add(3*time.Second), p.findAtB); err != nil {
		t.Fatalf("fresh initiation: %v", err)
	}
}

func TestInitiationFloodRejected(t *testing.T) {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	t1 := p.t0
	ini1, _ := p.ab.CreateInitiation(1, t1)
	if _, err := ConsumeInitiation(p.b, &ini1, t1, p.findAtB); err != nil {
		t.Fatal(err)
	}
	// A genuinely newer initiation (timestamp a second later) arriving 19 ms
	// after the last accepted one is refused; at 20 ms it is accepted.
	ini2, _ := p.ab.CreateInitiation(2, t1.Add(time.Second))
	if _, err := ConsumeInitiation(p.b, &ini2, t1.Add(19*time.Millisecond), p.findAtB); !errors.Is(err, ErrInitiationFlood) {
		t.Fatalf("initiation after 19 ms: %v", err)
	}
	if _, err := ConsumeInitiation(p.b, &ini2, t1.Add(HandshakeInitiationRate), p.findAtB); err != nil {
		t.Fatalf("initiation after 20 ms: %v", err)
	}
	if got := p.ba.LastInitiationConsumed(); !got.Equal(t1.Add(HandshakeInitiationRate)) {
		t.Errorf("LastInitiationConsumed = %v", got)
	}
}

func TestUnknownPeerRejected(t *testing.T) {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	ini, _ := p.ab.CreateInitiation(1, p.t0)
	var asked PublicKey
	_, err := ConsumeInitiation(p.b, &ini, p.t0, func(k PublicKey) *Handshake { asked = k; return nil })
	if !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("error = %v", err)
	}
	if asked != p.a.PublicKey() {
		t.Error("find was not asked for the initiator's static key")
	}
	// An initiation for someone else cannot even be decrypted.
	other, _ := GeneratePrivateKey()
	if _, err := ConsumeInitiation(NewLocal(other), &ini, p.t0, p.findAtB); !errors.Is(err, ErrAuthentication) {
		t.Fatalf("initiation to another key: %v", err)
	}
	// A response to an unknown index.
	ini, _ = p.ab.CreateInitiation(1, p.t0.Add(time.Second))
	h, _ := ConsumeInitiation(p.b, &ini, p.t0.Add(time.Second), p.findAtB)
	res, _ := h.CreateResponse(2)
	if _, err := ConsumeResponse(p.a, &res, func(uint32) *Handshake { return nil }); !errors.Is(err, ErrUnknownReceiver) {
		t.Fatalf("response to unknown index: %v", err)
	}
	// A Local rebuilt from the same key is the same identity.
	ini, _ = p.ab.CreateInitiation(1, p.t0.Add(2*time.Second))
	if _, err := ConsumeInitiation(NewLocal(p.b.PrivateKey()), &ini, p.t0.Add(2*time.Second), p.findAtB); err != nil {
		t.Fatalf("initiation to a rebuilt Local: %v", err)
	}
	// A handshake built for another Local is refused.
	if _, err := ConsumeResponse(NewLocal(other), &res, p.findAtAr); !errors.Is(err, ErrLocalMismatch) {
		t.Fatalf("response with mismatched local: %v", err)
	}
}

func TestStateMachine(t *testing.T) {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	if _, err := p.ab.CreateResponse(1); !errors.Is(err, ErrHandshakeState) {
		t.Errorf("CreateResponse without initiation: %v", err)
	}
	if _, err := p.ab.DeriveSession(p.t0); !errors.Is(err, ErrHandshakeState) {
		t.Errorf("DeriveSession of a fresh handshake: %v", err)
	}
	ini, _ := p.ab.CreateInitiation(5, p.t0)
	if p.ab.LocalIndex() != 5 {
		t.Error("LocalIndex")
	}
	if _, err := p.ab.DeriveSession(p.t0); !errors.Is(err, ErrHandshakeState) {
		t.Errorf("DeriveSession after only an initiation: %v", err)
	}
	h, _ := ConsumeInitiation(p.b, &ini, p.t0, p.findAtB)
	if h.RemoteIndex() != 5 {
		t.Error("RemoteIndex")
	}
	res, _ := h.CreateResponse(6)
	// Clear abandons the initiator's attempt: the response no longer fits.
	p.ab.Clear()
	if p.ab.LocalIndex() != 0 {
		t.Error("Clear kept the index")
	}
	if _, err := ConsumeResponse(p.a, &res, func(uint32) *Handshake { return p.ab }); !errors.Is(err, ErrHandshakeState) {
		t.Errorf("ConsumeResponse after Clear: %v", err)
	}
	// A response whose Receiver is not the index of the pending initiation.
	_, _ = p.ab.CreateInitiation(8, p.t0)
	if _, err := ConsumeResponse(p.a, &res, func(uint32) *Handshake { return p.ab }); !errors.Is(err, ErrHandshakeState) {
		t.Errorf("ConsumeResponse for a different index: %v", err)
	}
	// DeriveSession erases the handshake secrets.
	s, err := h.DeriveSession(p.t0)
	if err != nil || s.IsInitiator {
		t.Fatal(err)
	}
	h.mu.Lock()
	if h.hash != ([32]byte{}) || h.chainKey != ([32]byte{}) || h.remoteEphemeral != (PublicKey{}) || h.localEphemeral != nil {
		t.Error("DeriveSession left handshake secrets behind")
	}
	h.mu.Unlock()
	if _, err := h.DeriveSession(p.t0); !errors.Is(err, ErrHandshakeState) {
		t.Error("a handshake derived two sessions")
	}
	// Wipe disables the handshake entirely.
	p.ab.Wipe()
	if _, err := p.ab.CreateInitiation(1, p.t0); !errors.Is(err, ErrInvalidPublicKey) {
		t.Errorf("CreateInitiation after Wipe: %v", err)
	}
}

func TestLowOrderKeysRejected(t *testing.T) {
	p := newPair(t, PresharedKey{}, PresharedKey{})
	bad := NewHandshake(p.a, PublicKey{}, PresharedKey{})
	if _, err := bad.CreateInitiation(1, p.t0); !errors.Is(err, ErrInvalidPublicKey) {
		t.Errorf("initiation to the zero key: %v", err)
	}
	ini, _ := p.ab.CreateInitiation(1, p.t0)
	ini.Ephemeral = [32]byte{1}
	if _, err := ConsumeInitiation(p.b, &ini, p.t0, p.findAtB); !errors.Is(err, ErrInvalidPublicKey) {
		t.Errorf("initiation with a low-order ephemeral: %v", err)
	}
	ini, _ = p.ab.CreateInitiation(1, p.t0)
	h, _ := ConsumeInitiation(p.b, &ini, p.t0, p.findAtB)
	res, _ := h.CreateResponse(2)
	res.Ephemeral = [32]byte{}
	if _, err := ConsumeResponse(p.a, &res, p.findAtAr); !errors.Is(err, ErrInvalidPublicKey) {
		t.Errorf("response with a zero ephemeral: %v", err)
	}
}

func TestConcurrentHandshakes(t *testing.T) {
	// Both sides initiate at once, repeatedly, from several goroutines; run
	// with -race. Every completed exchange must yield matching keys.
	p := newPair(t, PresharedKey{}, PresharedKey{})
	var mu sync.Mutex // serialises the clock so timestamps stay increasing
	clock := p.t0
	tick := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				now := tick()
				ini, err := p.ab.CreateInitiation(uint32(g*100+i+1), now)
				if err != nil {
					t.Error(err)
					return
				}
				h, err := ConsumeInitiation(p.b, &ini, now, p.findAtB)
				if err != nil {
					continue // overtaken by a newer initiation: fine
				}
				res, err := h.CreateResponse(uint32(i))
				if err != nil {
					continue
				}
				_, _ = h.DeriveSession(now)
				if h2, err := ConsumeResponse(p.a, &res, func(uint32) *Handshake { return p.ab }); err == nil {
					_, _ = h2.DeriveSession(now)
				}
				_ = p.ab.LocalIndex()
				p.ba.SetPresharedKey(PresharedKey{})
			}
		}(g)
	}
	wg.Wait()
	is, rs := p.handshake(t, tick())
	checkSessionsMatch(t, is, rs)
}

func TestForLocalKeepsReplayRecords(t *testing.T) {
	psk, _ := GeneratePresharedKey()
	p := newPair(t, psk, psk)
	ini, _ := p.ab.CreateInitiation(1, p.t0)
	if _, err := ConsumeInitiation(p.b, &ini, p.t0, p.findAtB); err != nil {
		t.Fatal(err)
	}
	// b changes its key, then back: the old initiation is still a replay.
	kb2, _ := GeneratePrivateKey()
	b2 := NewLocal(kb2)
	via2 := p.ba.ForLocal(b2)
	back := via2.ForLocal(NewLocal(p.b.PrivateKey()))
	find := func(PublicKey) *Handshake { return back }
	if _, err := ConsumeInitiation(p.b, &ini, p.t0.Add(time.Second), find); !errors.Is(err, ErrReplayedInitiation) {
		t.Fatalf("replay after key changes: %v", err)
	}
	// The carried-over handshake works, with the preshared key intact.
	a2 := NewHandshake(p.a, b2.PublicKey(), psk)
	now := p.t0.Add(2 * time.Second)
	ini2, _ := a2.CreateInitiation(3, now)
	h, err := ConsumeInitiation(b2, &ini2, now, func(PublicKey) *Handshake { return via2 })
	if err != nil {
		t.Fatal(err)
	}
	res, _ := h.CreateResponse(4)
	rs, _ := h.DeriveSession(now)
	if _, err := ConsumeResponse(p.a, &res, func(uint32) *Handshake { return a2 }); err != nil {
		t.Fatalf("response under the new key: %v", err)
	}
	is, _ := a2.DeriveSession(now)
	checkSessionsMatch(t, is, rs)
}
