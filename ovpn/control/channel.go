package control

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/wirelane/wirelane/ovpn/reliable"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// MaxPayload is the most TLS bytes put in one CONTROL_V1 packet, so that
// wrapped control packets stay under about 1250 bytes.
const MaxPayload = 1150

// Errors reported by the channel.
var (
	ErrClosed     = errors.New("control: channel closed")
	ErrNoKeyState = errors.New("control: no such key state")
	// ErrNewSession reports, on a server channel, a hard reset carrying
	// another client session id: the client restarted and the caller
	// should start over with a new channel.
	ErrNewSession = errors.New("control: peer started a new session")
	// ErrOtherSession reports a packet naming a session other than the
	// channel's (a new session's packets, or a forgery).
	ErrOtherSession = errors.New("control: packet of another session")
	// ErrKeyStateBusy reports a Start refused because the key id is
	// taken by a live key state (one the peer started, or the primary),
	// or, for Keys.StartNext, because a key exchange is still in progress.
	// Replacing it would restart its message ids at 0, which the peer
	// drops as replays, and the exchange in progress would never finish.
	ErrKeyStateBusy = errors.New("control: a key exchange is in progress")
)

// Channel is the control channel of one session (one pair of session ids).
// All key states share its session ids, wrapper and transport.
type Channel struct {
	// Immutable after NewChannel.
	client    bool
	wrap      wrap.Wrapper
	send      func(pkt []byte) error // transmits one wrapped control packet
	log       *slog.Logger
	local     wire.SessionID
	onNew     func(*KeyState) // called without mu for a key state the peer started
	peerKnown chan struct{}   // closed (under mu) when haveRemote becomes true
	kick      chan struct{}   // wakes the flusher
	done      chan struct{}   // closed by Close
	flushDone chan struct{}   // closed when the flusher has returned
	now       func() time.Time

	mu         sync.Mutex     // guards the fields below and every KeyState's rel, input and err
	remote     wire.SessionID // learned from the peer's first packet
	haveRemote bool
	states     [8]*KeyState // by key id
	closed     bool
}

// ChannelConfig configures NewChannel.
type ChannelConfig struct {
	Client  bool
	Wrapper wrap.Wrapper           // nil = no wrapping
	Send    func(pkt []byte) error // required
	Logger  *slog.Logger           // failures to send control packets; optional
	// OnSoftReset is called for a key state the peer started: with
	// SOFT_RESET_V1, or on a server with the client's hard reset for key 0.
	// It is called from HandlePacket without locks held and must not block:
	// it starts the key exchange in a goroutine of its own. Optional.
	OnSoftReset func(*KeyState)
}

func newChannel(c ChannelConfig) *Channel {
	ch := &Channel{client: c.Client, wrap: c.Wrapper, send: c.Send, log: c.Logger, onNew: c.OnSoftReset,
		kick: make(chan struct{}, 1), peerKnown: make(chan struct{}), done: make(chan struct{}), flushDone: make(chan struct{}), now: time.Now}
	if ch.wrap == nil {
		ch.wrap = wrap.None{}
	}
	if ch.log == nil {
		ch.log = slog.New(slog.DiscardHandler)
	}
	return ch
}

// NewChannel starts a control channel with a fresh random session id and
// its flusher goroutine.
func NewChannel(c ChannelConfig) (*Channel, error) {
	ch := newChannel(c)
	if _, err := rand.Read(ch.local[:]); err != nil {
		return nil, err
	}
	go ch.flusher()
	return ch, nil
}

// NewServerChannel starts the server side of a control channel whose
// session ids are already settled: local is the id the server sent in its
// reset (a UDP server derives it statelessly), remote the client's. Key
// state 0 starts with the client's hard reset (id 0) received and ours
// (id 0) queued; resetAcked marks ours as already acknowledged, as when a
// UDP client proved it received the stateless reply. c.Client is ignored.
func NewServerChannel(c ChannelConfig, local, remote wire.SessionID, resetAcked bool) (*Channel, *KeyState) {
	c.Client = false
	ch := newChannel(c)
	ch.local, ch.remote, ch.haveRemote = local, remote, true
	close(ch.peerKnown)
	ks, _ := ch.newStateLocked(0) // not yet shared: no lock needed
	ks.rel.Queue(wire.HardResetServerV2, nil)
	if resetAcked {
		ks.rel.Acked([]uint32{0})
	}
	ks.rel.Receive(0, wire.HardResetClientV2, nil)
	go ch.flusher()
	return ch, ks
}

// LocalSession returns this side's session id.
func (ch *Channel) LocalSession() wire.SessionID { return ch.local }

// RemoteSession returns the peer's session id once known.
func (ch *Channel) RemoteSession() (wire.SessionID, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.remote, ch.haveRemote
}

// PeerKnown is closed once the peer's reset (and so its session id) has
// arrived. A client starts TLS only then: OpenVPN 2.6 servers keep no state
// for a client until it acknowledges their reset, and drop earlier
// CONTROL_V1 packets.
func (ch *Channel) PeerKnown() <-chan struct{} { return ch.peerKnown }

// Start creates key state keyID and queues its reset message: the client
// hard reset for key 0 of a client, else SOFT_RESET_V1. It never replaces
// a live key state (one neither retired nor closed, such as one the peer
// started with its SOFT_RESET_V1): it returns ErrKeyStateBusy instead,
// and the caller joins or waits for that exchange.
func (ch *Channel) Start(keyID uint8) (*KeyState, error) {
	ch.mu.Lock()
	ks, err := ch.startLocked(keyID)
	ch.mu.Unlock()
	ch.Kick()
	return ks, err
}

// startLocked is Start with ch.mu held.
func (ch *Channel) startLocked(keyID uint8) (*KeyState, error) {
	keyID &= wire.KeyIDMask
	if old := ch.states[keyID]; old != nil && !ch.closed && old.liveLocked() {
		return nil, fmt.Errorf("%w: key id %d is live", ErrKeyStateBusy, keyID)
	}
	op := wire.SoftResetV1
	if keyID == 0 {
		op = wire.HardResetClientV2
		if !ch.client {
			op = wire.HardResetServerV2
		}
	}
	ks, err := ch.newStateLocked(keyID)
	if err == nil {
		ks.rel.Queue(op, nil)
	}
	return ks, err
}

// startUnlessPending starts key state keyID unless a key state other than
// the established ones (primary and lame duck, either may be nil) is live:
// an exchange is in progress, ours or one the peer started.
func (ch *Channel) startUnlessPending(keyID uint8, primary, lame *KeyState) (*KeyState, error) {
	ch.mu.Lock()
	for _, ks := range ch.states {
		if ks != nil && ks != primary && ks != lame && !ch.closed && ks.liveLocked() {
			ch.mu.Unlock()
			return nil, fmt.Errorf("%w: key id %d is negotiating", ErrKeyStateBusy, ks.ID)
		}
	}
	ks, err := ch.startLocked(keyID)
	ch.mu.Unlock()
	ch.Kick()
	return ks, err
}

func (ch *Channel) newStateLocked(keyID uint8) (*KeyState, error) {
	if ch.closed {
		return nil, ErrClosed
	}
	if old := ch.states[keyID]; old != nil {
		old.closeLocked(fmt.Errorf("control: key id %d reused", keyID))
	}
	ks := &KeyState{ID: keyID, ch: ch, rel: reliable.New(), Created: ch.now()}
	ks.cond.L = &ch.mu
	ch.states[keyID] = ks
	return ks, nil
}

// State returns key state keyID, or nil.
func (ch *Channel) State(keyID uint8) *KeyState {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	return ch.states[keyID&wire.KeyIDMask]
}

// Retire marks ks as replaced by a newer key state: a later SOFT_RESET_V1
// from the peer for its key id (ids cycle 1..7) starts a fresh key state
// instead of being taken for a duplicate.
func (ch *Channel) Retire(ks *KeyState) {
	ch.mu.Lock()
	ks.retired = true
	ch.mu.Unlock()
}

// Remove forgets a key state (a lame duck past its transition window).
func (ch *Channel) Remove(ks *KeyState) {
	ch.mu.Lock()
	if ch.states[ks.ID] == ks {
		ch.states[ks.ID] = nil
	}
	ks.closeLocked(ErrClosed)
	ch.mu.Unlock()
}

// Kick wakes the flusher to send what is due.
func (ch *Channel) Kick() {
	select {
	case ch.kick <- struct{}{}:
	default:
	}
}

// Close stops the flusher and wakes every blocked reader.
func (ch *Channel) Close() {
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return
	}
	ch.closed = true
	for _, ks := range ch.states {
		if ks != nil {
			ks.closeLocked(ErrClosed)
		}
	}
	ch.mu.Unlock()
	close(ch.done)
	<-ch.flushDone
}

// Flush sends everything due now; the flusher calls it, tests may too.
func (ch *Channel) Flush() time.Time {
	now := ch.now()
	var next time.Time
	var pkts [][]byte
	ch.mu.Lock()
	for _, ks := range ch.states {
		if ks == nil {
			continue
		}
		outs, n := ks.rel.Poll(now)
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
		for i := range outs {
			o := &outs[i]
			p := wire.ControlPacket{Op: o.Op, KeyID: ks.ID, Session: ch.local, NumAcks: o.NumAcks, Acks: o.Acks,
				Remote: ch.remote, ID: o.ID, Payload: o.Payload}
			if o.NumAcks > 0 && !ch.haveRemote {
				continue // cannot ack before knowing the peer
			}
			plain, err := wire.AppendControl(nil, &p)
			if err != nil {
				ch.log.Warn("control: encode", "err", err)
				continue
			}
			w, err := ch.wrap.Wrap(nil, plain)
			if err != nil {
				ch.log.Warn("control: wrap", "err", err)
				continue
			}
			pkts = append(pkts, w)
		}
	}
	ch.mu.Unlock()
	for _, p := range pkts {
		if err := ch.send(p); err != nil {
			ch.log.Warn("control: send", "err", err)
		}
	}
	return next
}

func (ch *Channel) flusher() {
	defer close(ch.flushDone)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		next := ch.Flush()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		t.Reset(wait)
		select {
		case <-ch.done:
			return
		case <-ch.kick:
		case <-t.C:
		}
	}
}

// HandlePacket processes one received control packet (still wrapped).
// Errors describe packets that were dropped; the channel keeps running.
func (ch *Channel) HandlePacket(raw []byte) error {
	plain, err := ch.wrap.Unwrap(nil, raw)
	if err != nil {
		return err
	}
	var p wire.ControlPacket
	if err := wire.DecodeControl(plain, &p); err != nil {
		return err
	}
	ch.mu.Lock()
	if ch.closed {
		ch.mu.Unlock()
		return ErrClosed
	}
	if !ch.haveRemote {
		if p.Op != wire.HardResetServerV2 && p.Op != wire.HardResetClientV2 {
			ch.mu.Unlock()
			return fmt.Errorf("control: %v before the peer's reset", p.Op)
		}
		ch.remote, ch.haveRemote = p.Session, true
		close(ch.peerKnown)
		if ks := ch.states[0]; ch.client && ks != nil && p.KeyID == 0 {
			ks.carryWKcLocked()
		}
	} else if p.Session != ch.remote {
		ch.mu.Unlock()
		if !ch.client && p.Op == wire.HardResetClientV2 {
			return ErrNewSession
		}
		return fmt.Errorf("%w: %v from %x", ErrOtherSession, p.Op, p.Session)
	}
	if p.NumAcks > 0 && p.Remote != ch.local {
		ch.mu.Unlock()
		return fmt.Errorf("control: acks for another session %x", p.Remote)
	}
	ks := ch.states[p.KeyID]
	var fresh *KeyState
	if ks != nil && ks.retired && p.Op == wire.SoftResetV1 && p.ID == 0 {
		ks = nil // the peer reuses a retired key id: start over
	}
	if ks == nil {
		reply := wire.SoftResetV1
		if !ch.client && p.Op == wire.HardResetClientV2 && p.KeyID == 0 {
			reply = wire.HardResetServerV2
		} else if p.Op != wire.SoftResetV1 {
			ch.mu.Unlock()
			return fmt.Errorf("%w %d (%v)", ErrNoKeyState, p.KeyID, p.Op)
		}
		if ch.onNew == nil {
			ch.mu.Unlock()
			return fmt.Errorf("%w %d (%v): no handler for new key states", ErrNoKeyState, p.KeyID, p.Op)
		}
		ks, _ = ch.newStateLocked(p.KeyID)
		ks.rel.Queue(reply, nil)
		fresh = ks
	}
	ks.rel.Acked(p.AckList())
	if p.HasID() {
		for _, m := range ks.rel.Receive(p.ID, p.Op, p.Payload) {
			if m.Op == wire.ControlV1 {
				ks.input = append(ks.input, m.Payload...)
				ks.cond.Broadcast()
			}
		}
	}
	ch.mu.Unlock()
	ch.Kick()
	if fresh != nil {
		ch.onNew(fresh)
	}
	return nil
}

// KeyState is one key state of the control channel: its reliability layer
// and the TLS byte stream over it.
type KeyState struct {
	ID      uint8
	Created time.Time
	ch      *Channel

	rel     *reliable.Layer // guarded by ch.mu
	input   []byte          // received TLS bytes not yet read; guarded by ch.mu
	err     error           // set when closed; guarded by ch.mu
	retired bool            // replaced by a newer key state; guarded by ch.mu
	cond    sync.Cond       // signals input or err; L is ch.mu
}

// liveLocked reports whether ks still counts: neither closed nor retired.
// ch.mu is held.
func (ks *KeyState) liveLocked() bool { return ks.err == nil && !ks.retired }

func (ks *KeyState) closeLocked(err error) {
	if ks.err == nil {
		ks.err = err
	}
	ks.cond.Broadcast()
}

// HoldAcks holds back (on) or releases (off) the acks of this key state's
// received messages (reliable.Layer.SetHoldAcks); releasing sends them.
func (ks *KeyState) HoldAcks(on bool) {
	ks.ch.mu.Lock()
	ks.rel.SetHoldAcks(on)
	ks.ch.mu.Unlock()
	if !on {
		ks.ch.Kick()
	}
}

// Idle reports whether every message sent on this key state was acked.
func (ks *KeyState) Idle() bool {
	ks.ch.mu.Lock()
	defer ks.ch.mu.Unlock()
	return ks.rel.Unacked() == 0
}

// Conn returns the key state's byte stream as a net.Conn for crypto/tls.
func (ks *KeyState) Conn() net.Conn { return (*ksConn)(ks) }

// ksConn adapts a KeyState to net.Conn. Deadlines are not supported; the
// handshake is bounded by closing the channel or key state.
type ksConn KeyState

// Read returns received TLS bytes in order, blocking until some arrive.
func (c *ksConn) Read(b []byte) (int, error) {
	ks := (*KeyState)(c)
	ks.ch.mu.Lock()
	defer ks.ch.mu.Unlock()
	for len(ks.input) == 0 && ks.err == nil {
		ks.cond.Wait()
	}
	if len(ks.input) == 0 {
		if ks.err == ErrClosed {
			return 0, io.EOF
		}
		return 0, ks.err
	}
	n := copy(b, ks.input)
	ks.input = ks.input[n:]
	if len(ks.input) == 0 {
		ks.input = nil
	}
	return n, nil
}

// Write queues b on the reliability layer in chunks of MaxPayload.
func (c *ksConn) Write(b []byte) (int, error) {
	ks := (*KeyState)(c)
	ks.ch.mu.Lock()
	if ks.err != nil {
		ks.ch.mu.Unlock()
		return 0, ks.err
	}
	for off := 0; off < len(b); off += MaxPayload {
		chunk := b[off:min(off+MaxPayload, len(b))]
		ks.rel.Queue(wire.ControlV1, append([]byte(nil), chunk...))
	}
	ks.ch.mu.Unlock()
	ks.ch.Kick()
	return len(b), nil
}

// wkcResender is a tls-crypt-v2 client wrapper (wrap.V2Client).
type wkcResender interface{ ResendWKc() bool }

// carryWKcLocked queues an empty message ahead of the TLS handshake when
// the channel's tls-crypt-v2 wrapper was asked by the server's reset to
// send its wrapped key again: that message (id 1) goes out as
// CONTROL_WKC_V1 with the ack of the server's reset, and keeps the
// wrapped key out of the packets that carry TLS, as OpenVPN 2.6 clients
// do. ch.mu is held.
func (ks *KeyState) carryWKcLocked() {
	if w, ok := ks.ch.wrap.(wkcResender); ok && w.ResendWKc() {
		ks.rel.Queue(wire.ControlV1, nil)
	}
}

// Close ends the key state's stream; blocked reads return.
func (c *ksConn) Close() error {
	ks := (*KeyState)(c)
	ks.ch.mu.Lock()
	ks.closeLocked(ErrClosed)
	ks.ch.mu.Unlock()
	return nil
}

// LocalAddr, RemoteAddr and the deadline setters complete net.Conn.
func (c *ksConn) LocalAddr() net.Addr                { return ctrlAddr{} }
func (c *ksConn) RemoteAddr() net.Addr               { return ctrlAddr{} }
func (c *ksConn) SetDeadline(t time.Time) error      { return nil }
func (c *ksConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *ksConn) SetWriteDeadline(t time.Time) error { return nil }

// ctrlAddr names the control channel where net.Conn wants an address.
type ctrlAddr struct{}

func (ctrlAddr) Network() string { return "openvpn-control" }
func (ctrlAddr) String() string  { return "openvpn-control" }
