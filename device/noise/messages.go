package noise

// Wire formats of the four WireGuard messages (whitepaper section 5.4). All
// integers are little-endian; the type occupies a 32-bit field whose upper
// three bytes are reserved and must be zero. Marshal and Unmarshal copy
// fixed-size fields and never allocate when the caller's buffer has room.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Message types.
const (
	MessageInitiationType  = 1
	MessageResponseType    = 2
	MessageCookieReplyType = 3
	MessageTransportType   = 4
)

// Message sizes in bytes.
const (
	// MessageInitiationSize is the size of a handshake initiation.
	MessageInitiationSize = 148
	// MessageResponseSize is the size of a handshake response.
	MessageResponseSize = 92
	// MessageCookieReplySize is the size of a cookie reply.
	MessageCookieReplySize = 64
	// MessageTransportHeaderSize is the header of a transport message:
	// type, receiver index, 64-bit counter.
	MessageTransportHeaderSize = 16
	// MessageTransportOverhead is what a transport message adds to its
	// (padded) plaintext: header plus authentication tag. It is also the
	// size of a keepalive, the smallest valid transport message.
	MessageTransportOverhead = MessageTransportHeaderSize + AEADTagSize
)

// Offsets inside a transport message, for the data path, which works on
// packets in place rather than through a struct.
const (
	// MessageTransportOffsetCounter is where the counter starts in a
	// transport header.
	MessageTransportOffsetCounter = 8
	// MessageTransportOffsetContent is where the ciphertext starts.
	MessageTransportOffsetContent = MessageTransportHeaderSize
)

// ErrMessageSize and ErrMessageType are wrapped by every Unmarshal error so
// callers can classify malformed packets with errors.Is.
var (
	ErrMessageSize = errors.New("wrong message size")
	ErrMessageType = errors.New("wrong message type")
)

// MessageInitiation is the first handshake message, initiator to responder.
type MessageInitiation struct {
	Sender    uint32                            // initiator's index for this handshake
	Ephemeral [KeySize]byte                     // initiator's ephemeral public key
	Static    [KeySize + AEADTagSize]byte       // encrypted initiator static public key
	Timestamp [TimestampSize + AEADTagSize]byte // encrypted TAI64N timestamp
	MAC1      [MACSize]byte
	MAC2      [MACSize]byte
}

// MessageResponse is the second handshake message, responder to initiator.
type MessageResponse struct {
	Sender    uint32 // responder's index for this session
	Receiver  uint32 // the initiator's Sender
	Ephemeral [KeySize]byte
	Empty     [AEADTagSize]byte // encryption of the empty string
	MAC1      [MACSize]byte
	MAC2      [MACSize]byte
}

// MessageCookieReply answers a handshake message with a cookie when the
// responder is under load.
type MessageCookieReply struct {
	Receiver uint32 // the Sender of the message being answered
	Nonce    [CookieNonceSize]byte
	Cookie   [MACSize + AEADTagSize]byte // encrypted cookie
}

// grow extends b by n bytes and returns the whole slice and the new tail; it
// allocates only when b lacks the capacity.
func grow(b []byte, n int) (whole, tail []byte) {
	whole = slices.Grow(b, n)[:len(b)+n]
	return whole, whole[len(b):]
}

func checkHeader(b []byte, size int, typ uint32, name string) error {
	if len(b) != size {
		return fmt.Errorf("noise: %s: %w: got %d bytes, want %d", name, ErrMessageSize, len(b), size)
	}
	if t := binary.LittleEndian.Uint32(b); t != typ {
		return fmt.Errorf("noise: %s: %w: type field 0x%08x at offset 0, want %d", name, ErrMessageType, t, typ)
	}
	return nil
}

// MarshalTo appends the 148-byte wire form of m to b and returns the result.
// Pass b[:0] to write into an existing buffer; no allocation happens when
// cap(b)-len(b) >= MessageInitiationSize.
func (m *MessageInitiation) MarshalTo(b []byte) []byte {
	b, w := grow(b, MessageInitiationSize)
	w = w[:MessageInitiationSize]
	binary.LittleEndian.PutUint32(w[0:], MessageInitiationType)
	binary.LittleEndian.PutUint32(w[4:], m.Sender)
	copy(w[8:40], m.Ephemeral[:])
	copy(w[40:88], m.Static[:])
	copy(w[88:116], m.Timestamp[:])
	copy(w[116:132], m.MAC1[:])
	copy(w[132:148], m.MAC2[:])
	return b
}

// Unmarshal fills m from exactly MessageInitiationSize bytes of type 1.
func (m *MessageInitiation) Unmarshal(b []byte) error {
	if err := checkHeader(b, MessageInitiationSize, MessageInitiationType, "initiation"); err != nil {
		return err
	}
	b = b[:MessageInitiationSize]
	m.Sender = binary.LittleEndian.Uint32(b[4:])
	copy(m.Ephemeral[:], b[8:40])
	copy(m.Static[:], b[40:88])
	copy(m.Timestamp[:], b[88:116])
	copy(m.MAC1[:], b[116:132])
	copy(m.MAC2[:], b[132:148])
	return nil
}

// MarshalTo appends the 92-byte wire form of m to b and returns the result;
// no allocation happens when cap(b)-len(b) >= MessageResponseSize.
func (m *MessageResponse) MarshalTo(b []byte) []byte {
	b, w := grow(b, MessageResponseSize)
	w = w[:MessageResponseSize]
	binary.LittleEndian.PutUint32(w[0:], MessageResponseType)
	binary.LittleEndian.PutUint32(w[4:], m.Sender)
	binary.LittleEndian.PutUint32(w[8:], m.Receiver)
	copy(w[12:44], m.Ephemeral[:])
	copy(w[44:60], m.Empty[:])
	copy(w[60:76], m.MAC1[:])
	copy(w[76:92], m.MAC2[:])
	return b
}

// Unmarshal fills m from exactly MessageResponseSize bytes of type 2.
func (m *MessageResponse) Unmarshal(b []byte) error {
	if err := checkHeader(b, MessageResponseSize, MessageResponseType, "response"); err != nil {
		return err
	}
	b = b[:MessageResponseSize]
	m.Sender = binary.LittleEndian.Uint32(b[4:])
	m.Receiver = binary.LittleEndian.Uint32(b[8:])
	copy(m.Ephemeral[:], b[12:44])
	copy(m.Empty[:], b[44:60])
	copy(m.MAC1[:], b[60:76])
	copy(m.MAC2[:], b[76:92])
	return nil
}

// MarshalTo appends the 64-byte wire form of m to b and returns the result;
// no allocation happens when cap(b)-len(b) >= MessageCookieReplySize.
func (m *MessageCookieReply) MarshalTo(b []byte) []byte {
	b, w := grow(b, MessageCookieReplySize)
	w = w[:MessageCookieReplySize]
	binary.LittleEndian.PutUint32(w[0:], MessageCookieReplyType)
	binary.LittleEndian.PutUint32(w[4:], m.Receiver)
	copy(w[8:32], m.Nonce[:])
	copy(w[32:64], m.Cookie[:])
	return b
}

// Unmarshal fills m from exactly MessageCookieReplySize bytes of type 3.
func (m *MessageCookieReply) Unmarshal(b []byte) error {
	if err := checkHeader(b, MessageCookieReplySize, MessageCookieReplyType, "cookie reply"); err != nil {
		return err
	}
	b = b[:MessageCookieReplySize]
	m.Receiver = binary.LittleEndian.Uint32(b[4:])
	copy(m.Nonce[:], b[8:32])
	copy(m.Cookie[:], b[32:64])
	return nil
}

// PutTransportHeader writes a transport header (type 4, receiver index,
// counter) into b[:16]. b must hold at least MessageTransportHeaderSize bytes.
func PutTransportHeader(b []byte, receiver uint32, counter uint64) {
	_ = b[MessageTransportHeaderSize-1]
	binary.LittleEndian.PutUint32(b[0:], MessageTransportType)
	binary.LittleEndian.PutUint32(b[4:], receiver)
	binary.LittleEndian.PutUint64(b[8:], counter)
}

// ParseTransportHeader reads the header of a whole transport message b. ok is
// false when b is not of type 4 or is shorter than MessageTransportOverhead
// (a header plus a tag: no valid transport message is shorter).
func ParseTransportHeader(b []byte) (receiver uint32, counter uint64, ok bool) {
	if len(b) < MessageTransportOverhead || binary.LittleEndian.Uint32(b) != MessageTransportType {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint64(b[8:]), true
}

// MessageType returns the type field of a packet, or 0 when it is shorter
// than 4 bytes or its reserved bytes are not zero.
func MessageType(b []byte) uint32 {
	if len(b) < 4 {
		return 0
	}
	t := binary.LittleEndian.Uint32(b)
	if t > 0xff {
		return 0
	}
	return t
}
