package control

// The key exchange of one key state, one loop for the client and the
// server; a Side supplies what differs between them.
//
//	Exchange.Run: [client: wait for the peer's reset] -> TLS handshake
//	    -> client: our key_method_2, then the server's
//	       server: the client's key_method_2
//	    -> Side.Agree: the data cipher and how keys are derived (client, first
//	       key: PUSH_REQUEST/PUSH_REPLY; server, first key: from peer-info)
//	    -> data key (tls-ekm or the PRF) -> receive with it
//	    -> server: our key_method_2 (or AUTH_FAILED after it, when refusing)
//	    -> the peer catches up (client: our ack of the server's key_method_2
//	       goes out; server, renegotiating: the client acks ours)
//	    -> send with it -> Keys: the new key state primary, the old one the
//	       lame duck, the next key id
//	Exchange.Serve: every later control message of the key state to Side.Message

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"errors"
	"fmt"
	"hash"
	"sync"
	"time"

	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/keys"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// Agreement is what the two sides settled on for a key state.
type Agreement struct {
	// Cipher is the data-channel cipher.
	Cipher data.Cipher
	// EKM derives the data keys with TLS keying-material export instead of
	// the PRF.
	EKM bool
	// Refuse, when set, ends the exchange once our key_method_2 is out
	// with AUTH_FAILED,Refuse (a server turning a client away; the client
	// expects the key_method_2 before it reads why).
	Refuse string
}

// KeyDerivation names how the data keys are derived: "tls-ekm" or "PRF".
func (a Agreement) KeyDerivation() string {
	if a.EKM {
		return "tls-ekm"
	}
	return "PRF"
}

// Stage names a step of the key exchange in errors handed to
// Side.Explain.
type Stage int

// Stages of the key exchange that fail with a network or peer error.
const (
	// StagePeer is the wait for the peer's reset (client only).
	StagePeer Stage = iota
	// StageTLS is the TLS handshake.
	StageTLS
	// StageHello is reading the peer's key_method_2.
	StageHello
)

// Side is what differs between a client's and a server's key exchange.
// Its methods are called from the goroutine running Exchange.Run or
// Exchange.Serve.
type Side interface {
	// Hello fills the options (and on a client the peer-info and
	// credentials) of our key_method_2 before it is sent. On a client,
	// which speaks first, a is nil; on a server it is Agree's result.
	Hello(local *KeyMethod2, a *Agreement)
	// Agree settles the cipher and the key derivation once the peer's
	// key_method_2 is read. initial marks key id 0: the client pulls the
	// configuration through mr, the server negotiates from peer.PeerInfo;
	// afterwards the session's agreement stands. Agree makes the data
	// channel Data returns.
	Agree(tc *tls.Conn, mr *MessageReader, peer *KeyMethod2, initial bool) (Agreement, error)
	// Data returns the session's data channel (nil before the first Agree).
	Data() *data.Channel
	// Explain turns a failure at stage into the error Run returns;
	// ctxErr is the exchange's context error (nil unless its deadline
	// passed or the caller cancelled it).
	Explain(stage Stage, ctxErr, err error) error
	// Message handles a control message that arrives on an established
	// key state; it returns false to stop serving the key state.
	Message(a *Active, msg string) bool
}

// Exchange runs the key exchanges of one session. Its fields are set
// before the first Run and not changed; Run and Serve may run for several
// key states at once.
type Exchange struct {
	// Channel is the session's control channel.
	Channel *Channel
	// TLS configures the handshake (as a client when Client is set).
	TLS *tls.Config
	// Client is the side of the session.
	Client bool
	// Timeout bounds each TLS handshake and key exchange (hand-window).
	Timeout time.Duration
	// RenegSec is the data-key lifetime before this side renegotiates (0:
	// never); Keys.RenegDue reports it.
	RenegSec int
	// RenegEvery, when set, replaces RenegSec with a shorter interval
	// (the rekey soak's shortened timers, ovpn/internal/testtimers; no
	// configuration sets it).
	RenegEvery time.Duration
	// Done is closed when the session ends; waits give up then.
	Done <-chan struct{}
	// Keys tracks the session's key states.
	Keys *Keys
	// Side supplies the steps that differ between client and server.
	Side Side
	// Auth is the data channel's HMAC digest for a CBC cipher (`auth`,
	// nil: SHA1); AEAD ciphers do not use it.
	Auth func() hash.Hash
}

// Active is a key state whose exchange finished: its TLS session carries
// the control messages.
type Active struct {
	// KS is the control channel's key state.
	KS *KeyState
	// Conn is the TLS session over KS.
	Conn *tls.Conn
	// Agreement is the cipher and key derivation of its data key.
	Agreement Agreement
	// retired is when a newer key state replaced this one (zero while
	// primary); guarded by Keys.mu.
	retired time.Time
}

// Run runs the TLS handshake and key exchange on ks and installs the new
// data key. initial marks key id 0. The returned reader carries the key
// state's later control messages (see Serve).
func (x *Exchange) Run(ctx context.Context, ks *KeyState, initial bool) (*Active, *MessageReader, error) {
	ctx, cancel := context.WithTimeout(ctx, x.Timeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ks.Conn().Close() })
	defer stop()
	fail := func(stage Stage, err error) error { return x.Side.Explain(stage, ctx.Err(), err) }
	var tc *tls.Conn
	if x.Client {
		select {
		case <-x.Channel.PeerKnown():
		case <-ctx.Done():
			return nil, nil, fail(StagePeer, ctx.Err())
		case <-x.Done:
			return nil, nil, fail(StagePeer, ErrClosed)
		}
		tc = tls.Client(ks.Conn(), x.TLS)
	} else {
		tc = tls.Server(ks.Conn(), x.TLS)
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, nil, fail(StageTLS, err)
	}
	local, err := NewKeyMethod2(x.Client)
	if err != nil {
		return nil, nil, err
	}
	defer local.Wipe()
	if x.Client {
		x.Side.Hello(local, nil)
		if !initial {
			// In a renegotiation the server's key_method_2 is
			// acknowledged only once its data key is ready here:
			// OpenVPN's server sends with the new key as soon as that
			// ack arrives (ovpn/client TestE2ERekeySoak lost packets
			// when the ack went out first). Nothing else is read in
			// between; the acks due so far go out first, so the
			// server's send window is free for its key_method_2.
			x.Channel.Flush()
			ks.HoldAcks(true)
			defer ks.HoldAcks(false)
		}
		if _, err := tc.Write(local.Marshal(true)); err != nil {
			return nil, nil, fmt.Errorf("sending key_method_2: %w", err)
		}
		local.Password = ""
	}
	peer, err := ReadKeyMethod2(tc, !x.Client)
	if err != nil {
		return nil, nil, fail(StageHello, err)
	}
	defer peer.Wipe()
	mr := NewMessageReader(tc)
	a, err := x.Side.Agree(tc, mr, peer, initial)
	if err != nil {
		return nil, nil, err
	}
	k, err := x.dataKey(tc, ks.ID, a, local, peer)
	if err != nil {
		return nil, nil, err
	}
	ch := x.Side.Data()
	if !x.Client {
		x.Side.Hello(local, &a)
		if a.Refuse != "" {
			if _, err := tc.Write(local.Marshal(false)); err == nil {
				if err := WriteMessage(tc, "AUTH_FAILED,"+a.Refuse); err == nil {
					x.waitAcked(ks, 2*time.Second)
				}
			}
			return nil, nil, errors.New(a.Refuse)
		}
	}
	// Receive with the new key at once: the peer may send with it as
	// soon as it has both key_method_2 messages.
	ch.Prepare(k)
	if !x.Client {
		if _, err := tc.Write(local.Marshal(false)); err != nil {
			return nil, nil, fmt.Errorf("sending key_method_2: %w", err)
		}
	}
	// Send with it once the peer can decrypt: the server activates its
	// key when the client acknowledges the server's key_method_2, and the
	// client has the key once it has the server's key_method_2.
	if x.Client {
		ks.HoldAcks(false)
		x.Channel.Flush()
	} else if !initial {
		x.waitAcked(ks, 5*time.Second)
	}
	ch.Install(k)
	act := &Active{KS: ks, Conn: tc, Agreement: a}
	reneg := time.Duration(x.RenegSec) * time.Second
	if x.RenegEvery > 0 {
		reneg = x.RenegEvery
	}
	x.Keys.rotate(x.Channel, act, reneg)
	return act, mr, nil
}

// dataKey derives the data-channel key of key state id.
func (x *Exchange) dataKey(tc *tls.Conn, id uint8, a Agreement, local, peer *KeyMethod2) (*data.Key, error) {
	var m keys.Material
	if a.EKM {
		cs := tc.ConnectionState()
		var err error
		if m, err = keys.FromEKM(cs.ExportKeyingMaterial); err != nil {
			return nil, fmt.Errorf("tls-ekm: %w", err)
		}
	} else {
		cli, srv := local, peer
		cliSID := x.Channel.LocalSession()
		srvSID, _ := x.Channel.RemoteSession()
		if !x.Client {
			cli, srv = peer, local
			cliSID, srvSID = srvSID, cliSID
		}
		src := keys.Sources{PreMaster: cli.PreMaster, ClientRandom1: cli.Random1, ClientRandom2: cli.Random2,
			ServerRandom1: srv.Random1, ServerRandom2: srv.Random2, ClientSession: cliSID, ServerSession: srvSID}
		m = keys.FromPRF(&src)
		clear(src.PreMaster[:])
	}
	send, recv := m.Split(a.Cipher.KeyLen(), x.Client)
	m.Wipe()
	var k *data.Key
	var err error
	if a.Cipher.AEAD() {
		k, err = data.NewKey(id, a.Cipher, send.Key, send.ImplicitIV, recv.Key, recv.ImplicitIV)
	} else {
		digest := x.Auth
		if digest == nil {
			digest = sha1.New
		}
		k, err = data.NewCBCKey(id, a.Cipher, digest, send.Key, send.MAC, recv.Key, recv.MAC)
	}
	clear(send.Key)
	clear(recv.Key)
	clear(send.MAC)
	clear(recv.MAC)
	return k, err
}

// waitAcked waits up to d until everything sent on ks was acknowledged.
func (x *Exchange) waitAcked(ks *KeyState, d time.Duration) {
	deadline := time.Now().Add(d)
	for !ks.Idle() && time.Now().Before(deadline) {
		select {
		case <-x.Done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// Serve hands the control messages of an established key state to
// Side.Message until the key state ends or Message returns false.
func (x *Exchange) Serve(a *Active, mr *MessageReader) {
	for {
		m, err := mr.Read()
		if err != nil {
			return // key state removed or session closed
		}
		if !x.Side.Message(a, m) {
			return
		}
	}
}

// NextKeyID returns the key id that follows id: as in OpenVPN, 0 is only
// the first key, then ids cycle through 1..7.
func NextKeyID(id uint8) uint8 {
	id = (id + 1) & wire.KeyIDMask
	if id == 0 {
		id = 1
	}
	return id
}

// Keys tracks a session's key states: the newest (primary), the one it
// replaced (the lame duck, until its transition window ends), the key id
// a renegotiation takes next and when this side renegotiates.
type Keys struct {
	mu      sync.Mutex // guards the fields below
	primary *Active
	lame    *Active
	next    uint8     // starts at 0 meaning 1 (key 0 is the first exchange's)
	renegAt time.Time // zero: no renegotiation due
}

// rotate makes a the primary key state and the old primary the lame
// duck (retired on ch); the lame duck before it is removed from ch.
func (k *Keys) rotate(ch *Channel, a *Active, reneg time.Duration) {
	k.mu.Lock()
	old := k.lame
	k.lame, k.primary = k.primary, a
	if k.lame != nil {
		k.lame.retired = time.Now()
		ch.Retire(k.lame.KS)
	}
	k.next = NextKeyID(a.KS.ID)
	k.renegAt = time.Time{}
	if reneg > 0 {
		k.renegAt = time.Now().Add(reneg)
	}
	k.mu.Unlock()
	if old != nil {
		ch.Remove(old.KS)
	}
}

// Primary returns the newest established key state, or nil.
func (k *Keys) Primary() *Active {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.primary
}

// StartNext starts this side's renegotiation on ch: a key state with the
// next key id, its SOFT_RESET_V1 queued. It returns ErrKeyStateBusy, and
// changes nothing, while a key exchange is in progress (one the peer
// started, or ours): the caller tries again later, and the renegotiation
// deadline stays as it was, so a timer that fired meanwhile is deferred,
// not lost. An exchange that finishes sets a new deadline (Run); one that
// fails leaves the old one due.
func (k *Keys) StartNext(ch *Channel) (*KeyState, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	id := k.next
	if id == 0 {
		id = 1
	}
	var primary, lame *KeyState
	if k.primary != nil {
		primary = k.primary.KS
	}
	if k.lame != nil {
		lame = k.lame.KS
	}
	ks, err := ch.startUnlessPending(id, primary, lame)
	if err != nil {
		return nil, err
	}
	k.next = NextKeyID(id)
	return ks, nil
}

// RenegDue reports whether this side's reneg-sec has passed for the
// primary key.
func (k *Keys) RenegDue(now time.Time) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return !k.renegAt.IsZero() && now.After(k.renegAt)
}

// ExpireLame removes the lame-duck key state from ch once it has been
// retired for longer than window.
func (k *Keys) ExpireLame(ch *Channel, now time.Time, window time.Duration) {
	k.mu.Lock()
	lame := k.lame
	if lame == nil || now.Sub(lame.retired) <= window {
		k.mu.Unlock()
		return
	}
	k.lame = nil
	k.mu.Unlock()
	ch.Remove(lame.KS)
}
