package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Control packet layout (no tls-auth / tls-crypt):
//
//	op|kid (1) | session id (8) | ack count (1) | acked ids (4 each) |
//	remote session id (8, only when ack count > 0) | message id (4, not in ACK_V1) | payload

// SessionID identifies one end of a control session.
type SessionID [8]byte

// MaxAcks is the largest ack count a packet may carry. OpenVPN itself sends
// at most 8 (ACK_V1) or 4 (piggy-backed) but accepts up to this many.
const MaxAcks = 8

// ControlPacket is a decoded control-channel packet. Payload aliases the
// buffer it was decoded from.
type ControlPacket struct {
	Op      Opcode
	KeyID   uint8
	Session SessionID // sender's session id
	NumAcks int
	Acks    [MaxAcks]uint32
	Remote  SessionID // receiver's session id; meaningful when NumAcks > 0
	ID      uint32    // message id; absent for ACK_V1
	Payload []byte
}

// AckList returns the acknowledged ids.
func (p *ControlPacket) AckList() []uint32 { return p.Acks[:p.NumAcks] }

// HasID reports whether the packet carries a message id (all but ACK_V1).
func (p *ControlPacket) HasID() bool { return p.Op != AckV1 }

// Errors returned by the decoders.
var (
	ErrShort     = errors.New("wire: packet too short")
	ErrNotCtrl   = errors.New("wire: not a control packet")
	ErrTooMany   = errors.New("wire: too many acks")
	ErrBadLength = errors.New("wire: bad TCP length")
)

// EncodedLen is the encoded size of p.
func (p *ControlPacket) EncodedLen() int {
	n := 1 + 8 + 1 + 4*p.NumAcks
	if p.NumAcks > 0 {
		n += 8
	}
	if p.HasID() {
		n += 4 + len(p.Payload)
	}
	return n
}

// AppendControl appends the encoding of p to b.
func AppendControl(b []byte, p *ControlPacket) ([]byte, error) {
	if !p.Op.IsControl() {
		return b, fmt.Errorf("%w: %v", ErrNotCtrl, p.Op)
	}
	if p.NumAcks < 0 || p.NumAcks > MaxAcks {
		return b, ErrTooMany
	}
	b = append(b, HeaderByte(p.Op, p.KeyID))
	b = append(b, p.Session[:]...)
	b = append(b, byte(p.NumAcks))
	for _, a := range p.Acks[:p.NumAcks] {
		b = binary.BigEndian.AppendUint32(b, a)
	}
	if p.NumAcks > 0 {
		b = append(b, p.Remote[:]...)
	}
	if p.HasID() {
		b = binary.BigEndian.AppendUint32(b, p.ID)
		b = append(b, p.Payload...)
	}
	return b, nil
}

// DecodeControl decodes a control packet. The opcode byte and session id
// must already be in b (b is the whole packet).
func DecodeControl(b []byte, p *ControlPacket) error {
	if len(b) < 10 {
		return fmt.Errorf("%w: %d bytes", ErrShort, len(b))
	}
	p.Op, p.KeyID = Header(b[0])
	if !p.Op.IsControl() {
		return fmt.Errorf("%w: %v", ErrNotCtrl, p.Op)
	}
	copy(p.Session[:], b[1:9])
	n := int(b[9])
	if n > MaxAcks {
		return fmt.Errorf("%w: %d", ErrTooMany, n)
	}
	p.NumAcks = n
	b = b[10:]
	if len(b) < 4*n {
		return fmt.Errorf("%w: ack list", ErrShort)
	}
	for i := 0; i < n; i++ {
		p.Acks[i] = binary.BigEndian.Uint32(b[4*i:])
	}
	b = b[4*n:]
	p.Remote = SessionID{}
	if n > 0 {
		if len(b) < 8 {
			return fmt.Errorf("%w: remote session id", ErrShort)
		}
		copy(p.Remote[:], b[:8])
		b = b[8:]
	}
	p.ID, p.Payload = 0, nil
	if p.HasID() {
		if len(b) < 4 {
			return fmt.Errorf("%w: message id", ErrShort)
		}
		p.ID = binary.BigEndian.Uint32(b)
		p.Payload = b[4:]
	} else if len(b) != 0 {
		return fmt.Errorf("wire: %d trailing bytes after ACK_V1", len(b))
	}
	return nil
}
