package data

import (
	"bytes"
	"crypto/cipher"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/internal/sys/mono"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// Buffer geometry for Encrypt and Decrypt.
const (
	// Headroom is where Encrypt expects the payload: buf[Headroom:]. It
	// holds the header, the packet-id and either the AEAD tag or the CBC
	// channel's HMAC and IV (cbc.go), and a compression framing prefix
	// (FramingPrefix).
	Headroom = 4 + maxDigest + cbcBlock + 4 + FramingPrefix
	// Tailroom is the spare capacity both directions need past the packet
	// (tag move and nonce scratch, or CBC padding, and the byte
	// FramingSwap moves to the end), so no call allocates.
	Tailroom = 16 + 12 + 1
	// RekeyPacketID is the send packet-id after which a new key should be
	// negotiated.
	RekeyPacketID = 0xFF000000
	tagLen        = 16
)

// PingPayload is the keepalive message carried in a data packet.
var PingPayload = []byte{0x2a, 0x18, 0x7b, 0xf3, 0x64, 0x1e, 0xb4, 0xcb, 0x07, 0xed, 0x2d, 0x0a, 0x98, 0x1f, 0xc7, 0x48}

// occMagic starts every OCC message; OCC exit is the magic followed by 6.
var occMagic = []byte{0x28, 0x7f, 0x34, 0x6b, 0xd4, 0xef, 0x7a, 0x81, 0x2d, 0x56, 0xb8, 0xd3, 0xaf, 0xc5, 0x45, 0x9c}

const occExit = 6

// OCCExitPayload is the OCC exit message.
var OCCExitPayload = append(append([]byte(nil), occMagic...), occExit)

// Kind says what a decrypted packet holds.
type Kind uint8

// Kinds of decrypted packets.
const (
	KindPacket Kind = iota // an IP packet
	KindPing               // keepalive, drop
	KindExit               // OCC exit: the peer is leaving
	KindOCC                // another OCC message, ignore
)

// Errors from the data channel.
var (
	ErrNoKey     = errors.New("data: no key for this key id")
	ErrReplay    = errors.New("data: replayed or too old packet id")
	ErrAuth      = errors.New("data: authentication failed")
	ErrShort     = errors.New("data: packet too short")
	ErrRoom      = errors.New("data: buffer lacks head- or tailroom")
	ErrExhausted = errors.New("data: packet ids exhausted, renegotiate")
)

// Key is one key state's data keys: a send and a receive AEAD with their
// implicit IVs, the send packet counter and the receive replay window.
type Key struct {
	ID      uint8
	Cipher  Cipher
	Created time.Time

	send   cipher.AEAD
	sendIV [8]byte
	recv   cipher.AEAD
	recvIV [8]byte
	// sendCBC and recvCBC replace the AEADs for a CBC cipher (cbc.go).
	sendCBC, recvCBC *cbcDir

	sendPID atomic.Uint32 // last packet-id used
	retired atomic.Int64  // mono stamp of when it stopped being the send key; 0 while it never was replaced

	mu     sync.Mutex   // guards replay and heard
	replay replayWindow // guarded by mu
	heard  bool         // a packet under this key was accepted; guarded by mu
}

// Heard reports whether a packet from the peer under this key was
// accepted: the peer has the key and sends with it. A side that
// renegotiates waits for it before starting the next renegotiation, so
// that renegotiations never overlap a peer that is slow to activate the
// last one.
func (k *Key) Heard() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.heard
}

// NewKey builds a key slot from raw key bytes and implicit IVs.
func NewKey(id uint8, c Cipher, sendKey []byte, sendIV [8]byte, recvKey []byte, recvIV [8]byte) (*Key, error) {
	s, err := c.aead(sendKey)
	if err != nil {
		return nil, err
	}
	r, err := c.aead(recvKey)
	if err != nil {
		return nil, err
	}
	return &Key{ID: id & wire.KeyIDMask, Cipher: c, Created: time.Now(), send: s, sendIV: sendIV, recv: r, recvIV: recvIV}, nil
}

// NeedsRekey reports whether the send packet-id passed RekeyPacketID.
func (k *Key) NeedsRekey() bool { return k.sendPID.Load() >= RekeyPacketID }

// Channel is the data channel of one peer. Encrypt and Decrypt may run
// concurrently with each other and with key changes.
type Channel struct {
	peerID  uint32  // immutable; UndefinedPeerID sends DATA_V1
	framing Framing // immutable: the compression framing of every payload
	// decomp decompresses what the peer compressed (nil: refused);
	// set before the channel is shared (decompress.go).
	decomp *Decompressor
	// mss clamps the MSS of TCP SYNs both ways (0: off); set before the
	// channel is shared (mss.go).
	mss int

	primary   atomic.Pointer[Key] // used to send; written only under mu
	secondary atomic.Pointer[Key] // lame duck, receive only; written only under mu
	// next is a prepared key (receive only) that is not yet the send
	// key; it has a slot of its own so that preparing it never evicts
	// the lame duck, which the peer may still be sending with (a
	// renegotiation that starts before the peer activated the last one).
	// Written only under mu.
	next atomic.Pointer[Key]
	mu   sync.Mutex // serialises key changes
}

// NewChannel returns a channel that sends DATA_V2 with peerID, or DATA_V1
// when peerID is wire.UndefinedPeerID.
func NewChannel(peerID uint32) *Channel { return &Channel{peerID: peerID & 0xFFFFFF} }

// NewFramedChannel is NewChannel with a compression framing applied to
// every payload sent and expected on every payload received (compress.go).
func NewFramedChannel(peerID uint32, f Framing) *Channel {
	return &Channel{peerID: peerID & 0xFFFFFF, framing: f}
}

// Framing returns the channel's compression framing.
func (c *Channel) Framing() Framing { return c.framing }

// PacketOffset is where pkt, a packet Encrypt returned from buf, starts in
// buf.
func PacketOffset(buf, pkt []byte) int { return cap(buf) - cap(pkt) }

// Prepare makes k usable for receiving before it becomes the send key, by
// putting it in the next slot (the lame duck stays). A client prepares a
// renegotiated key, then acknowledges the server's last key-exchange
// message (which is what activates the key on the server), then installs
// it for sending.
func (c *Channel) Prepare(k *Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.primary.Load() == nil {
		c.primary.Store(k)
		return
	}
	c.next.Store(k)
}

// Install makes k the primary (send) key; the old primary becomes the
// secondary (lame duck) and the old secondary is dropped.
func (c *Channel) Install(k *Key) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.primary.Load(); old != nil && old != k {
		old.retired.Store(mono.Now())
		c.secondary.Store(old)
	}
	c.primary.Store(k)
	if c.next.Load() == k {
		c.next.Store(nil)
	}
}

// DropSecondary forgets the lame-duck key once it has been retired for
// window (OpenVPN's transition window). A prepared key that was never the
// send key is kept.
func (c *Channel) DropSecondary(now time.Time, window time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.secondary.Load()
	if s == nil {
		return
	}
	if r := s.retired.Load(); r != 0 && mono.Since(r, now) >= window {
		c.secondary.Store(nil)
	}
}

// Primary returns the current send key, or nil.
func (c *Channel) Primary() *Key { return c.primary.Load() }

// Encrypt seals the payload held at buf[Headroom:Headroom+n] and returns the
// packet, a sub-slice of buf (PacketOffset says where it starts; with a
// compression framing it may end one byte past the payload). len(buf)
// must be at least Headroom+n+Tailroom.
func (c *Channel) Encrypt(buf []byte, n int) ([]byte, error) {
	if len(buf) < Headroom+n+Tailroom || n < 0 {
		return nil, ErrRoom
	}
	k := c.primary.Load()
	if k == nil {
		return nil, ErrNoKey
	}
	pid := k.sendPID.Add(1)
	if pid == 0 {
		k.sendPID.Store(^uint32(0))
		return nil, ErrExhausted
	}
	if c.mss != 0 {
		ClampMSS(buf[Headroom:Headroom+n], c.mss)
	}
	pt, end := Headroom, Headroom+n
	if c.framing != FramingNone {
		pt, end = c.framing.frame(buf, Headroom, n)
	}
	if k.sendCBC != nil {
		start, end, err := c.encryptCBC(k, buf, pt, end, pid)
		if err != nil {
			return nil, err
		}
		return buf[start:end], nil
	}
	pidAt := pt - tagLen - 4
	start := pidAt - 4
	if c.peerID == wire.UndefinedPeerID {
		start = pidAt - 1
	}
	c.putHeader(buf, start, k.ID)
	binary.BigEndian.PutUint32(buf[pidAt:], pid)
	nonce := buf[end+tagLen : end+tagLen+12]
	binary.BigEndian.PutUint32(nonce, pid)
	copy(nonce[4:], k.sendIV[:])
	ad := buf[start : pidAt+4]
	if c.peerID == wire.UndefinedPeerID {
		ad = buf[pidAt : pidAt+4] // DATA_V1: the packet-id only
	}
	k.send.Seal(buf[pt:pt], nonce, buf[pt:end], ad)
	copy(buf[pt-tagLen:pt], buf[end:end+tagLen])
	return buf[start:end], nil
}

// putHeader writes the DATA_V2 header (or DATA_V1's opcode byte) at
// buf[start:].
func (c *Channel) putHeader(buf []byte, start int, keyID uint8) {
	if c.peerID == wire.UndefinedPeerID {
		buf[start] = wire.HeaderByte(wire.DataV1, keyID)
		return
	}
	wire.PutDataV2Header(buf[start:], keyID, c.peerID)
}

// EncryptPayload copies p into buf and encrypts it; for control-plane
// payloads (ping, OCC) where zero copy does not matter.
func (c *Channel) EncryptPayload(buf, p []byte) ([]byte, error) {
	if len(buf) < Headroom+len(p)+Tailroom {
		return nil, ErrRoom
	}
	copy(buf[Headroom:], p)
	return c.Encrypt(buf, len(p))
}

// Decrypt opens a DATA_V1 or DATA_V2 packet in place and returns the
// payload (a sub-slice of pkt, or of its spare capacity when the peer
// compressed it and the channel decompresses) and its kind. cap(pkt)
// must be at least len(pkt)+Tailroom. The packet's peer-id is not checked here (the client
// has one peer; a server demultiplexes before).
func (c *Channel) Decrypt(pkt []byte) ([]byte, Kind, error) {
	op, kid, _, hdr, err := wire.DecodeDataHeader(pkt)
	if err != nil {
		return nil, 0, err
	}
	if len(pkt) < hdr+4+tagLen {
		return nil, 0, fmt.Errorf("%w: %d bytes", ErrShort, len(pkt))
	}
	if cap(pkt) < len(pkt)+Tailroom {
		return nil, 0, ErrRoom
	}
	k := c.primary.Load()
	if k == nil || k.ID != kid {
		k = c.next.Load()
		if k == nil || k.ID != kid {
			k = c.secondary.Load()
			if k == nil || k.ID != kid {
				return nil, 0, fmt.Errorf("%w %d", ErrNoKey, kid)
			}
		}
	}
	var out []byte
	if k.recvCBC != nil {
		if out, err = decryptCBC(k, pkt, hdr); err != nil {
			return nil, 0, err
		}
		return c.payload(out)
	}
	pid := binary.BigEndian.Uint32(pkt[hdr:])
	k.mu.Lock()
	ok := k.replay.check(pid)
	k.mu.Unlock()
	if !ok {
		return nil, 0, ErrReplay
	}
	end := len(pkt)
	full := pkt[:end+Tailroom]
	ctStart := hdr + 4 + tagLen
	// Go's AEAD wants ciphertext||tag; OpenVPN puts the tag first.
	copy(full[end:end+tagLen], pkt[hdr+4:ctStart])
	nonce := full[end+tagLen : end+tagLen+12]
	binary.BigEndian.PutUint32(nonce, pid)
	copy(nonce[4:], k.recvIV[:])
	ad := pkt[:hdr+4]
	if op == wire.DataV1 {
		ad = pkt[hdr : hdr+4]
	}
	out, err = k.recv.Open(full[ctStart:ctStart], nonce, full[ctStart:end+tagLen], ad)
	if err != nil {
		return nil, 0, ErrAuth
	}
	k.mu.Lock()
	ok = k.replay.check(pid)
	if ok {
		k.replay.update(pid)
		k.heard = true
	}
	k.mu.Unlock()
	if !ok {
		return nil, 0, ErrReplay
	}
	return c.payload(out)
}

// payload unframes (and decompresses) a decrypted payload and says what
// it holds.
func (c *Channel) payload(out []byte) ([]byte, Kind, error) {
	if c.framing != FramingNone {
		var alg algorithm
		var err error
		if out, alg, err = c.framing.unframe(out); err != nil {
			return nil, 0, err
		}
		if alg != algNone {
			if out, err = c.decompress(out, alg); err != nil {
				return nil, 0, err
			}
		}
	}
	switch {
	case bytes.Equal(out, PingPayload):
		return out, KindPing, nil
	case len(out) >= len(occMagic)+1 && bytes.Equal(out[:len(occMagic)], occMagic):
		if out[len(occMagic)] == occExit {
			return out, KindExit, nil
		}
		return out, KindOCC, nil
	}
	if c.mss != 0 {
		ClampMSS(out, c.mss)
	}
	return out, KindPacket, nil
}
