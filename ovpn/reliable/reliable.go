// Package reliable is OpenVPN's reliability layer for control messages: it
// numbers outgoing messages, retransmits them until acknowledged, and
// delivers incoming ones in order exactly once.
//
// Pipeline (one instance per key state; the caller serialises all calls):
//
//	Queue(op, payload) -> send queue -> window (6 in flight) --Poll(now)--> Out packets
//	Receive(id, op, payload) -> receive buffer (12 ahead) -> in-order Msgs
//	                         \-> pending acks -> piggy-backed (4) or ACK_V1 (8)
//	Acked(ids) frees window slots
//
// Acknowledgements are per packet, not cumulative. Every outgoing packet
// also repeats recently sent acks when it has room, as OpenVPN does, because
// a lost ACK_V1 would otherwise cost a retransmission. Time is passed in by
// the caller, so tests can drive the layer with a fake clock.
package reliable

import (
	"time"

	"github.com/wirelane/wirelane/ovpn/wire"
)

// Parameters of OpenVPN 2.6's reliability layer.
const (
	SendWindow      = 6               // messages in flight
	RecvBuffer      = 12              // messages accepted ahead of the next in-order id
	MaxPiggyAcks    = 4               // acks carried by a message packet
	MaxAckOnly      = 8               // acks carried by one ACK_V1
	InitialTimeout  = 2 * time.Second // first retransmission delay
	MaxTimeout      = 16 * time.Second
	recentAcksLimit = 8
)

// Msg is a message delivered in order.
type Msg struct {
	Op      wire.Opcode
	Payload []byte
}

// Out is one packet to transmit. ID is valid when HasID; an Out without ID
// is a standalone ACK_V1.
type Out struct {
	Op      wire.Opcode
	HasID   bool
	ID      uint32
	Payload []byte
	NumAcks int
	Acks    [wire.MaxAcks]uint32
}

type outMsg struct {
	id      uint32
	op      wire.Opcode
	payload []byte
	due     time.Time // zero: not yet sent
	timeout time.Duration
	acked   bool
}

// Layer is one reliability instance. It is not safe for concurrent use.
type Layer struct {
	nextID   uint32    // id for the next queued message
	queue    []*outMsg // queued, not yet in the window
	inflight []*outMsg // sent or sendable, ordered by id

	nextRecv uint32         // next id to deliver
	recvBuf  map[uint32]Msg // received ahead of nextRecv
	pending  []uint32       // acks not yet sent
	recent   []uint32       // acks sent recently, most recent first
	stats    Stats
	// holdAcks keeps acks pending (none piggybacked, no ack-only
	// packet) while set; see SetHoldAcks.
	holdAcks bool
}

// Stats counts events, for tests and diagnostics.
type Stats struct {
	Retransmits, Duplicates, OutOfWindow, AckOnly int
}

// New returns an empty layer whose first outgoing and incoming ids are 0.
func New() *Layer { return &Layer{recvBuf: make(map[uint32]Msg)} }

// Stats returns the counters.
func (l *Layer) Stats() Stats { return l.stats }

// SetHoldAcks holds back the acks of received messages while on: Poll
// still sends (and retransmits) queued messages, without acks, and the
// acks go out once it is off again. A client holds them while it derives
// a renegotiated data key, because a peer such as OpenVPN 2.6 starts
// sending with the new key as soon as its last key-exchange message is
// acknowledged.
func (l *Layer) SetHoldAcks(on bool) { l.holdAcks = on }

// Queue adds a message to send and returns its id. payload is kept, not
// copied.
func (l *Layer) Queue(op wire.Opcode, payload []byte) uint32 {
	m := &outMsg{id: l.nextID, op: op, payload: payload}
	l.nextID++
	l.queue = append(l.queue, m)
	l.fill()
	return m.id
}

// fill moves queued messages into the window while it has room. The window
// spans ids, so one lost message stops the sender after SendWindow more.
func (l *Layer) fill() {
	for len(l.queue) > 0 {
		if len(l.inflight) > 0 && l.queue[0].id-l.inflight[0].id >= SendWindow {
			return
		}
		l.inflight = append(l.inflight, l.queue[0])
		l.queue = l.queue[1:]
	}
}

// Unacked reports how many queued or in-flight messages still wait for an
// ack.
func (l *Layer) Unacked() int { return len(l.queue) + len(l.inflight) }

// Acked processes acknowledgements received from the peer.
func (l *Layer) Acked(ids []uint32) {
	for _, id := range ids {
		for _, m := range l.inflight {
			if m.id == id {
				m.acked = true
			}
		}
	}
	i := 0
	for _, m := range l.inflight {
		if !m.acked {
			l.inflight[i] = m
			i++
		}
	}
	clear(l.inflight[i:])
	l.inflight = l.inflight[:i]
	l.fill()
}

// Receive handles an incoming message with id. It returns the messages that
// became deliverable in order (possibly none). Duplicates are acknowledged
// again and dropped; messages too far ahead are dropped unacknowledged so
// the peer retransmits them later.
func (l *Layer) Receive(id uint32, op wire.Opcode, payload []byte) []Msg {
	if int32(id-l.nextRecv) < 0 {
		l.stats.Duplicates++
		l.ack(id)
		return nil
	}
	if id-l.nextRecv >= RecvBuffer {
		l.stats.OutOfWindow++
		return nil
	}
	l.ack(id)
	if _, dup := l.recvBuf[id]; dup {
		l.stats.Duplicates++
		return nil
	}
	l.recvBuf[id] = Msg{Op: op, Payload: append([]byte(nil), payload...)}
	var out []Msg
	for {
		m, ok := l.recvBuf[l.nextRecv]
		if !ok {
			return out
		}
		delete(l.recvBuf, l.nextRecv)
		l.nextRecv++
		out = append(out, m)
	}
}

func (l *Layer) ack(id uint32) {
	for _, p := range l.pending {
		if p == id {
			return
		}
	}
	l.pending = append(l.pending, id)
}

// takeAcks fills acks with up to max ids: pending ones first, then recent
// ones as padding. Pending acks taken move to the recent list.
func (l *Layer) takeAcks(acks *[wire.MaxAcks]uint32, max int) int {
	n := 0
	for n < max && len(l.pending) > 0 {
		id := l.pending[0]
		l.pending = l.pending[1:]
		acks[n] = id
		n++
		l.remember(id)
	}
	for _, id := range l.recent {
		if n >= max {
			break
		}
		if !contains(acks[:n], id) {
			acks[n] = id
			n++
		}
	}
	return n
}

func (l *Layer) remember(id uint32) {
	for i, r := range l.recent {
		if r == id {
			l.recent = append(l.recent[:i], l.recent[i+1:]...)
			break
		}
	}
	l.recent = append([]uint32{id}, l.recent...)
	if len(l.recent) > recentAcksLimit {
		l.recent = l.recent[:recentAcksLimit]
	}
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Poll returns the packets due at now: first transmissions, retransmissions
// (timeout doubling from InitialTimeout up to MaxTimeout) and ACK_V1
// packets for acks no message could carry. next is when Poll should be
// called again (zero when nothing is scheduled).
func (l *Layer) Poll(now time.Time) (out []Out, next time.Time) {
	for _, m := range l.inflight {
		if !m.due.IsZero() && now.Before(m.due) {
			continue
		}
		if m.due.IsZero() {
			m.timeout = InitialTimeout
		} else {
			l.stats.Retransmits++
			m.timeout = min(2*m.timeout, MaxTimeout)
		}
		m.due = now.Add(m.timeout)
		o := Out{Op: m.op, HasID: true, ID: m.id, Payload: m.payload}
		if !l.holdAcks {
			o.NumAcks = l.takeAcks(&o.Acks, MaxPiggyAcks)
		}
		out = append(out, o)
	}
	for len(l.pending) > 0 && !l.holdAcks {
		o := Out{Op: wire.AckV1}
		o.NumAcks = l.takeAcks(&o.Acks, MaxAckOnly)
		l.stats.AckOnly++
		out = append(out, o)
	}
	for _, m := range l.inflight {
		if next.IsZero() || m.due.Before(next) {
			next = m.due
		}
	}
	return out, next
}
