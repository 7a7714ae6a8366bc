package server

// The control channel of one client, server side.
//
//	transport -> ctrlSession.handle -> unwrap (client's own tls-auth/tls-crypt state)
//	          -> decode -> key state by key id -> reliable (acks, order) -> TLS input
//	TLS writes (keyState conn) -> reliable queue -> flush (peer goroutine):
//	          retransmits, acks -> encode -> wrap -> transport
//
// It differs from control.Channel in what a server needs: the local
// session id is the stateless cookie the client already holds, key state 0
// starts with both resets already exchanged (the UDP client proved it got
// ours), and flushing is driven by the peer's goroutine instead of a
// goroutine of its own.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/reliable"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

var (
	errCtrlClosed = errors.New("server: control session closed")
	// errNewSession reports a hard reset with another client session id
	// from the address of an existing client: the client restarted.
	errNewSession = errors.New("server: client started a new session")
)

// ctrlSession is one client's control channel.
type ctrlSession struct {
	wrap   wrap.Wrapper           // this client's wrapper (own replay window); nil-safe via wrap.None
	send   func(pkt []byte) error // transmits one wrapped packet
	local  wire.SessionID         // immutable
	remote wire.SessionID         // immutable
	kick   chan struct{}          // wakes the peer goroutine to flush

	// onSoftReset starts running a key state the client started; it must
	// not block (immutable).
	onSoftReset func(*keyState)

	mu     sync.Mutex   // guards the fields below and every keyState's rel, input, err, retired
	states [8]*keyState // by key id
	closed bool
	now    func() time.Time // immutable
}

// keyState is one key state: its reliability layer and TLS byte stream.
type keyState struct {
	id      uint8
	created time.Time
	cs      *ctrlSession

	rel     *reliable.Layer // guarded by cs.mu
	input   []byte          // TLS bytes received, not yet read; guarded by cs.mu
	err     error           // set when closed; guarded by cs.mu
	retired bool            // replaced by a newer key state; guarded by cs.mu
	cond    sync.Cond       // signals input or err; L is &cs.mu
}

// newCtrlSession returns a session whose key state 0 has exchanged resets:
// ours (id 0) is acknowledged and the client's (id 0) received. With
// resetSent false (TCP, where no cookie is used) our reset is queued
// instead.
func newCtrlSession(local, remote wire.SessionID, w wrap.Wrapper, send func([]byte) error, resetSent bool) *ctrlSession {
	if w == nil {
		w = wrap.None{}
	}
	cs := &ctrlSession{wrap: w, send: send, local: local, remote: remote, kick: make(chan struct{}, 1), now: time.Now}
	ks := cs.newStateLocked(0)
	ks.rel.Queue(wire.HardResetServerV2, nil)
	if resetSent {
		ks.rel.Acked([]uint32{0})
	}
	ks.rel.Receive(0, wire.HardResetClientV2, nil)
	return cs
}

func (cs *ctrlSession) newStateLocked(id uint8) *keyState {
	if old := cs.states[id]; old != nil {
		old.closeLocked(fmt.Errorf("server: key id %d reused", id))
	}
	ks := &keyState{id: id, cs: cs, rel: reliable.New(), created: cs.now()}
	ks.cond.L = &cs.mu
	cs.states[id] = ks
	return ks
}

// state returns key state id, or nil.
func (cs *ctrlSession) state(id uint8) *keyState {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.states[id&wire.KeyIDMask]
}

func (cs *ctrlSession) wake() {
	select {
	case cs.kick <- struct{}{}:
	default:
	}
}

// start begins a server-initiated renegotiation on key id.
func (cs *ctrlSession) start(id uint8) (*keyState, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.closed {
		return nil, errCtrlClosed
	}
	ks := cs.newStateLocked(id)
	ks.rel.Queue(wire.SoftResetV1, nil)
	cs.wake()
	return ks, nil
}

// remove forgets a key state.
func (cs *ctrlSession) remove(ks *keyState) {
	cs.mu.Lock()
	if cs.states[ks.id] == ks {
		cs.states[ks.id] = nil
	}
	ks.closeLocked(errCtrlClosed)
	cs.mu.Unlock()
}

// close ends every key state.
func (cs *ctrlSession) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.closed = true
	for _, ks := range cs.states {
		if ks != nil {
			ks.closeLocked(errCtrlClosed)
		}
	}
}

// handle processes one received (wrapped) control packet. Errors describe
// dropped packets; errNewSession asks the caller to start over.
func (cs *ctrlSession) handle(raw []byte) error {
	plain, err := cs.wrap.Unwrap(nil, raw)
	if err != nil {
		return err
	}
	var p wire.ControlPacket
	if err := wire.DecodeControl(plain, &p); err != nil {
		return err
	}
	if p.Session != cs.remote {
		if p.Op == wire.HardResetClientV2 {
			return errNewSession
		}
		return fmt.Errorf("server: %v from unknown session %x", p.Op, p.Session)
	}
	if p.NumAcks > 0 && p.Remote != cs.local {
		return fmt.Errorf("server: acks for another session %x", p.Remote)
	}
	cs.mu.Lock()
	if cs.closed {
		cs.mu.Unlock()
		return errCtrlClosed
	}
	ks := cs.states[p.KeyID]
	var fresh *keyState
	// A soft reset for a key id in use starts over only when that key state
	// is retired (ids cycle 1..7); for the active one it is a duplicate.
	if p.Op == wire.SoftResetV1 && (ks == nil || (ks.retired && p.ID == 0)) {
		ks = cs.newStateLocked(p.KeyID)
		ks.rel.Queue(wire.SoftResetV1, nil)
		fresh = ks
	}
	if ks == nil {
		cs.mu.Unlock()
		return fmt.Errorf("server: %v for unknown key id %d", p.Op, p.KeyID)
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
	cs.mu.Unlock()
	cs.wake()
	if fresh != nil && cs.onSoftReset != nil {
		cs.onSoftReset(fresh)
	}
	return nil
}

// flush sends what is due now and returns when to flush again (zero:
// nothing scheduled).
func (cs *ctrlSession) flush() time.Time {
	now := cs.now()
	var next time.Time
	var pkts [][]byte
	cs.mu.Lock()
	for _, ks := range cs.states {
		if ks == nil {
			continue
		}
		outs, n := ks.rel.Poll(now)
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
		for i := range outs {
			o := &outs[i]
			p := wire.ControlPacket{Op: o.Op, KeyID: ks.id, Session: cs.local, NumAcks: o.NumAcks, Acks: o.Acks,
				Remote: cs.remote, ID: o.ID, Payload: o.Payload}
			plain, err := wire.AppendControl(nil, &p)
			if err != nil {
				continue
			}
			w, err := cs.wrap.Wrap(nil, plain)
			if err != nil {
				continue
			}
			pkts = append(pkts, w)
		}
	}
	cs.mu.Unlock()
	for _, p := range pkts {
		_ = cs.send(p) // a lost packet is retransmitted
	}
	return next
}

func (ks *keyState) closeLocked(err error) {
	if ks.err == nil {
		ks.err = err
	}
	ks.cond.Broadcast()
}

// retire marks ks as replaced by a newer key state.
func (cs *ctrlSession) retire(ks *keyState) {
	cs.mu.Lock()
	ks.retired = true
	cs.mu.Unlock()
}

// idle reports whether everything sent on the key state was acknowledged.
func (ks *keyState) idle() bool {
	ks.cs.mu.Lock()
	defer ks.cs.mu.Unlock()
	return ks.rel.Unacked() == 0
}

// conn returns the key state's TLS byte stream.
func (ks *keyState) conn() net.Conn { return (*ksConn)(ks) }

// ksConn adapts a keyState to net.Conn for crypto/tls. Deadlines are not
// supported; closing the key state ends a blocked Read.
type ksConn keyState

func (c *ksConn) Read(b []byte) (int, error) {
	ks := (*keyState)(c)
	ks.cs.mu.Lock()
	defer ks.cs.mu.Unlock()
	for len(ks.input) == 0 && ks.err == nil {
		ks.cond.Wait()
	}
	if len(ks.input) == 0 {
		if ks.err == errCtrlClosed {
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

func (c *ksConn) Write(b []byte) (int, error) {
	ks := (*keyState)(c)
	ks.cs.mu.Lock()
	if ks.err != nil {
		ks.cs.mu.Unlock()
		return 0, ks.err
	}
	for off := 0; off < len(b); off += control.MaxPayload {
		chunk := b[off:min(off+control.MaxPayload, len(b))]
		ks.rel.Queue(wire.ControlV1, append([]byte(nil), chunk...))
	}
	ks.cs.mu.Unlock()
	ks.cs.wake()
	return len(b), nil
}

func (c *ksConn) Close() error {
	ks := (*keyState)(c)
	ks.cs.mu.Lock()
	ks.closeLocked(errCtrlClosed)
	ks.cs.mu.Unlock()
	return nil
}

func (c *ksConn) LocalAddr() net.Addr                { return ctrlAddr{} }
func (c *ksConn) RemoteAddr() net.Addr               { return ctrlAddr{} }
func (c *ksConn) SetDeadline(t time.Time) error      { return nil }
func (c *ksConn) SetReadDeadline(t time.Time) error  { return nil }
func (c *ksConn) SetWriteDeadline(t time.Time) error { return nil }

type ctrlAddr struct{}

func (ctrlAddr) Network() string { return "openvpn-control" }
func (ctrlAddr) String() string  { return "openvpn-control" }
