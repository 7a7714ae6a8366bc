package wrap

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
	"time"
)

// Wrapper protects and checks whole control packets.
type Wrapper interface {
	// Wrap returns the protected form of the plain packet pkt appended to dst.
	Wrap(dst, pkt []byte) ([]byte, error)
	// Unwrap checks and removes the protection, appending the plain packet
	// to dst.
	Unwrap(dst, pkt []byte) ([]byte, error)
}

// Errors from Unwrap.
var (
	ErrShort  = errors.New("wrap: packet too short")
	ErrAuth   = errors.New("wrap: control packet authentication failed (wrong tls-auth/tls-crypt key?)")
	ErrReplay = errors.New("wrap: replayed control packet")
)

// None passes packets through unchanged.
type None struct{}

// Wrap appends pkt.
func (None) Wrap(dst, pkt []byte) ([]byte, error) { return append(dst, pkt...), nil }

// Unwrap appends pkt.
func (None) Unwrap(dst, pkt []byte) ([]byte, error) { return append(dst, pkt...), nil }

const hdrLen = 1 + 8 // op|kid, session id

// replayState is the sending counter and the receive replay window shared
// by tls-auth and tls-crypt (OpenVPN's long-form packet id: id and time).
type replayState struct {
	mu      sync.Mutex // guards all fields
	sendID  uint32
	sendT   uint32
	rcvT    uint32
	rcvHigh uint32
	rcvBits uint64
	now     func() time.Time
}

func (r *replayState) next() (uint32, uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sendT == 0 {
		r.sendT = uint32(r.now().Unix())
	}
	r.sendID++
	if r.sendID == 0 { // wrapped: new time base
		r.sendT = uint32(r.now().Unix())
		r.sendID = 1
	}
	return r.sendID, r.sendT
}

// SendFrom makes the next packet sent carry packet id id and time t
// (OpenVPN's long-form replay id), counting on from there. A stateless
// server uses it to give its replies ids that never repeat and a time
// older than the session's, since the client keeps one replay window for
// both.
func (r *replayState) SendFrom(id, t uint32) {
	r.mu.Lock()
	r.sendID, r.sendT = id-1, t
	r.mu.Unlock()
}

func (r *replayState) accept(id, t uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id == 0 || t < r.rcvT {
		return false
	}
	if t > r.rcvT {
		r.rcvT, r.rcvHigh, r.rcvBits = t, 0, 0
	}
	if id > r.rcvHigh {
		d := id - r.rcvHigh
		if d >= 64 {
			r.rcvBits = 0
		} else {
			r.rcvBits <<= d
		}
		r.rcvHigh = id
		r.rcvBits |= 1
		return true
	}
	d := r.rcvHigh - id
	if d >= 64 || r.rcvBits&(1<<d) != 0 {
		return false
	}
	r.rcvBits |= 1 << d
	return true
}

// Direction selects which static key half sends.
type Direction int

// Key directions.
const (
	Bidirectional Direction = -1 // tls-auth without key-direction
	Direction0    Direction = 0  // server side
	Direction1    Direction = 1  // client side
)

func (d Direction) halves() (send, recv int) {
	switch d {
	case Direction0:
		return 0, 1
	case Direction1:
		return 1, 0
	}
	return 0, 0
}

// TLSAuth is the tls-auth wrapper.
type TLSAuth struct {
	newHash func() hash.Hash
	size    int
	sendKey []byte
	recvKey []byte
	replayState
}

// DigestByName maps an OpenVPN `auth` digest name to a hash constructor.
func DigestByName(name string) (func() hash.Hash, error) {
	switch strings.ToUpper(strings.ReplaceAll(name, "-", "")) {
	case "SHA1", "":
		return sha1.New, nil
	case "SHA256":
		return sha256.New, nil
	case "SHA384":
		return sha512.New384, nil
	case "SHA512":
		return sha512.New, nil
	}
	return nil, fmt.Errorf("wrap: unsupported auth digest %q", name)
}

// NewTLSAuth returns a tls-auth wrapper with digest (e.g. sha1.New, the
// default of `auth`) and key direction d.
func NewTLSAuth(k *StaticKey, d Direction, digest func() hash.Hash) *TLSAuth {
	s, r := d.halves()
	size := digest().Size()
	_, sh := k.half(s)
	_, rh := k.half(r)
	return &TLSAuth{newHash: digest, size: size,
		sendKey: append([]byte(nil), sh[:size]...), recvKey: append([]byte(nil), rh[:size]...),
		replayState: replayState{now: time.Now}}
}

func (a *TLSAuth) mac(key []byte, pidTime, head, rest []byte) []byte {
	m := hmac.New(a.newHash, key)
	m.Write(pidTime)
	m.Write(head)
	m.Write(rest)
	return m.Sum(nil)
}

// Wrap adds the HMAC and replay id.
func (a *TLSAuth) Wrap(dst, pkt []byte) ([]byte, error) {
	if len(pkt) < hdrLen {
		return dst, ErrShort
	}
	id, t := a.next()
	var pt [8]byte
	binary.BigEndian.PutUint32(pt[:], id)
	binary.BigEndian.PutUint32(pt[4:], t)
	dst = append(dst, pkt[:hdrLen]...)
	dst = append(dst, a.mac(a.sendKey, pt[:], pkt[:hdrLen], pkt[hdrLen:])...)
	dst = append(dst, pt[:]...)
	return append(dst, pkt[hdrLen:]...), nil
}

// Unwrap checks the HMAC and replay id.
func (a *TLSAuth) Unwrap(dst, pkt []byte) ([]byte, error) {
	if len(pkt) < hdrLen+a.size+8 {
		return dst, ErrShort
	}
	tag := pkt[hdrLen : hdrLen+a.size]
	pt := pkt[hdrLen+a.size : hdrLen+a.size+8]
	rest := pkt[hdrLen+a.size+8:]
	if !hmac.Equal(tag, a.mac(a.recvKey, pt, pkt[:hdrLen], rest)) {
		return dst, ErrAuth
	}
	if !a.accept(binary.BigEndian.Uint32(pt), binary.BigEndian.Uint32(pt[4:])) {
		return dst, ErrReplay
	}
	dst = append(dst, pkt[:hdrLen]...)
	return append(dst, rest...), nil
}

// TLSCrypt is the tls-crypt wrapper.
type TLSCrypt struct {
	sendBlock, recvBlock cipher.Block
	sendMAC, recvMAC     []byte
	replayState
}

const cryptTag = 32

// NewTLSCrypt returns a tls-crypt wrapper; server selects direction 0.
func NewTLSCrypt(k *StaticKey, server bool) (*TLSCrypt, error) {
	d := Direction1
	if server {
		d = Direction0
	}
	s, r := d.halves()
	sc, sh := k.half(s)
	rc, rh := k.half(r)
	sb, err := aes.NewCipher(sc[:32])
	if err != nil {
		return nil, err
	}
	rb, err := aes.NewCipher(rc[:32])
	if err != nil {
		return nil, err
	}
	return &TLSCrypt{sendBlock: sb, recvBlock: rb,
		sendMAC: append([]byte(nil), sh[:32]...), recvMAC: append([]byte(nil), rh[:32]...),
		replayState: replayState{now: time.Now}}, nil
}

// Wrap encrypts and authenticates pkt.
func (c *TLSCrypt) Wrap(dst, pkt []byte) ([]byte, error) {
	if len(pkt) < hdrLen {
		return dst, ErrShort
	}
	id, t := c.next()
	start := len(dst)
	dst = append(dst, pkt[:hdrLen]...)
	dst = binary.BigEndian.AppendUint32(dst, id)
	dst = binary.BigEndian.AppendUint32(dst, t)
	m := hmac.New(sha256.New, c.sendMAC)
	m.Write(dst[start:])
	m.Write(pkt[hdrLen:])
	dst = m.Sum(dst)
	tag := dst[len(dst)-cryptTag:]
	out := len(dst)
	dst = append(dst, pkt[hdrLen:]...)
	cipher.NewCTR(c.sendBlock, tag[:16]).XORKeyStream(dst[out:], dst[out:])
	return dst, nil
}

// Unwrap decrypts and checks pkt.
func (c *TLSCrypt) Unwrap(dst, pkt []byte) ([]byte, error) {
	const head = hdrLen + 8
	if len(pkt) < head+cryptTag {
		return dst, ErrShort
	}
	tag := pkt[head : head+cryptTag]
	start := len(dst)
	dst = append(dst, pkt[:hdrLen]...)
	dst = append(dst, pkt[head+cryptTag:]...)
	plain := dst[start+hdrLen:]
	cipher.NewCTR(c.recvBlock, tag[:16]).XORKeyStream(plain, plain)
	m := hmac.New(sha256.New, c.recvMAC)
	m.Write(pkt[:head])
	m.Write(plain)
	if !hmac.Equal(tag, m.Sum(nil)) {
		return dst[:start], ErrAuth
	}
	if !c.accept(binary.BigEndian.Uint32(pkt[hdrLen:]), binary.BigEndian.Uint32(pkt[hdrLen+4:])) {
		return dst[:start], ErrReplay
	}
	return dst, nil
}
