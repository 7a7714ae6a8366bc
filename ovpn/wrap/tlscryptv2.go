package wrap

// The tls-crypt-v2 wrappers: tls-crypt with the client's own key Kc, plus
// the WKc that tells the server which Kc it is.
//
// Client (V2Client):
//
//	HARD_RESET_CLIENT_V2 from the control channel -> op HARD_RESET_CLIENT_V3,
//	    tls-crypt(Kc) with packet ids from EARLY_NEG_START (announcing that
//	    the client can send WKc again), || WKc
//	HARD_RESET_SERVER_V2 received with a TLV payload -> flags; RESEND_WKC
//	    makes the client's message id 1 a CONTROL_WKC_V1 (|| WKc), and the
//	    payload is removed before the control channel sees the reset
//
// Server (V2Session, one per client once its WKc is unwrapped):
//
//	HARD_RESET_CLIENT_V3 || WKc -> HARD_RESET_CLIENT_V2 to the control channel
//	CONTROL_WKC_V1 || WKc       -> CONTROL_V1 (the WKc part is not looked at
//	                               again: the tls-crypt tag under Kc decides)
//	everything else             -> tls-crypt(Kc)

import (
	"encoding/binary"
	"sync/atomic"

	"github.com/wirelane/wirelane/ovpn/wire"
)

// Early negotiation (OpenVPN 2.6 ssl_pkt.h): the client's first tls-crypt
// packet ids count from earlyNegStart; the server's reset then carries
// TLVs, of which the flags TLV may ask for the WKc again.
const (
	earlyNegStart = 0x0f000000
	earlyNegMask  = 0xff000000
	tlvEarlyNeg   = 0x0001
	flagResendWKc = 0x0001
)

// EarlyNegReply returns the payload of the server's HARD_RESET_SERVER_V2
// to a client that announced early negotiation: the flags TLV asking for
// the WKc in the client's next packet (the server keeps no state until
// then).
func EarlyNegReply() []byte { return []byte{0, tlvEarlyNeg, 0, 2, 0, flagResendWKc} }

// V2Client is the client's tls-crypt-v2 wrapper. It is safe for
// concurrent use.
type V2Client struct {
	c      *TLSCrypt
	wkc    []byte // immutable
	resend atomic.Bool
}

// NewV2Client returns the wrapper for client key k.
func NewV2Client(k *V2ClientKey) (*V2Client, error) {
	c, err := NewTLSCrypt(&k.Key, false)
	if err != nil {
		return nil, err
	}
	c.sendID = earlyNegStart // the first packet gets earlyNegStart+1
	return &V2Client{c: c, wkc: append([]byte(nil), k.WKc...)}, nil
}

// ResendWKc reports whether the server asked for the WKc again in the
// client's first message after the reset (message id 1): the client then
// sends an empty one, so that the WKc never makes a TLS packet too large.
func (v *V2Client) ResendWKc() bool { return v.resend.Load() }

// Wrap wraps pkt with Kc, turning the hard reset into
// HARD_RESET_CLIENT_V3 and message 1 into CONTROL_WKC_V1 when asked.
func (v *V2Client) Wrap(dst, pkt []byte) ([]byte, error) {
	if len(pkt) < hdrLen {
		return dst, ErrShort
	}
	op, kid := wire.Header(pkt[0])
	var to wire.Opcode
	switch {
	case op == wire.HardResetClientV2:
		to = wire.HardResetClientV3
	case op == wire.ControlV1 && kid == 0 && v.resend.Load() && messageID(pkt) == 1:
		to = wire.ControlWKCV1
	default:
		return v.c.Wrap(dst, pkt)
	}
	tmp := append([]byte(nil), pkt...)
	tmp[0] = wire.HeaderByte(to, kid)
	dst, err := v.c.Wrap(dst, tmp)
	if err != nil {
		return dst, err
	}
	return append(dst, v.wkc...), nil
}

// Unwrap checks pkt with Kc; a server reset's early-negotiation TLVs are
// read and removed.
func (v *V2Client) Unwrap(dst, pkt []byte) ([]byte, error) {
	start := len(dst)
	dst, err := v.c.Unwrap(dst, pkt)
	if err != nil {
		return dst, err
	}
	plain := dst[start:]
	if op, _ := wire.Header(plain[0]); op != wire.HardResetServerV2 {
		return dst, nil
	}
	var p wire.ControlPacket
	if err := wire.DecodeControl(plain, &p); err != nil || len(p.Payload) == 0 {
		return dst, nil // the control channel reports malformed packets
	}
	for tlv := p.Payload; len(tlv) >= 4; {
		typ, n := binary.BigEndian.Uint16(tlv), int(binary.BigEndian.Uint16(tlv[2:]))
		if len(tlv) < 4+n {
			break
		}
		if typ == tlvEarlyNeg && n == 2 && binary.BigEndian.Uint16(tlv[4:])&flagResendWKc != 0 {
			v.resend.Store(true)
		}
		tlv = tlv[4+n:]
	}
	p.Payload = nil
	out, err := wire.AppendControl(dst[:start], &p)
	return out, err
}

// messageID returns the message id of a plain control packet, or 0.
func messageID(pkt []byte) uint32 {
	var p wire.ControlPacket
	if wire.DecodeControl(pkt, &p) != nil || !p.HasID() {
		return 0
	}
	return p.ID
}

// V2Session is the server's tls-crypt-v2 wrapper for one client, keyed
// with the Kc its WKc held. Its replay state is its own.
type V2Session struct {
	c  *TLSCrypt
	md []byte // immutable
}

// NewV2Session returns the server's wrapper for client key kc, whose WKc
// held metadata md (may be nil).
func NewV2Session(kc *StaticKey, md []byte) (*V2Session, error) {
	c, err := NewTLSCrypt(kc, true)
	if err != nil {
		return nil, err
	}
	return &V2Session{c: c, md: append([]byte(nil), md...)}, nil
}

// SendFrom sets the next packet id and time Wrap sends (see
// replayState.SendFrom).
func (s *V2Session) SendFrom(id, t uint32) { s.c.SendFrom(id, t) }

// Metadata returns the client key's metadata (type byte first).
func (s *V2Session) Metadata() []byte { return s.md }

// Wrap wraps pkt with Kc.
func (s *V2Session) Wrap(dst, pkt []byte) ([]byte, error) { return s.c.Wrap(dst, pkt) }

// Unwrap removes the WKc of HARD_RESET_CLIENT_V3 and CONTROL_WKC_V1
// packets, checks the rest with Kc and hands the control channel the
// V2 opcodes.
func (s *V2Session) Unwrap(dst, pkt []byte) ([]byte, error) {
	if len(pkt) < hdrLen {
		return dst, ErrShort
	}
	op, kid := wire.Header(pkt[0])
	var to wire.Opcode
	switch op {
	case wire.HardResetClientV3:
		to = wire.HardResetClientV2
	case wire.ControlWKCV1:
		to = wire.ControlV1
	default:
		return s.c.Unwrap(dst, pkt)
	}
	head, _, err := SplitWKc(pkt)
	if err != nil {
		return dst, err
	}
	start := len(dst)
	if dst, err = s.c.Unwrap(dst, head); err != nil {
		return dst, err
	}
	dst[start] = wire.HeaderByte(to, kid)
	return dst, nil
}

// EarlyNegotiation reports whether a HARD_RESET_CLIENT_V3 (still wrapped)
// announces early negotiation: its tls-crypt packet id counts from
// EARLY_NEG_START. Clients before OpenVPN 2.6 do not; a stateless server
// cannot serve them.
func EarlyNegotiation(pkt []byte) bool {
	if len(pkt) < hdrLen+4 {
		return false
	}
	return binary.BigEndian.Uint32(pkt[hdrLen:])&earlyNegMask == earlyNegStart
}
