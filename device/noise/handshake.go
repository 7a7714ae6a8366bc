package noise

// The Noise_IKpsk2 handshake (whitepaper section 5.4.2-5.4.4), as four steps
// on a per-peer Handshake:
//
//	initiator                                 responder
//	CreateInitiation  --- MessageInitiation -->  ConsumeInitiation
//	ConsumeResponse   <--- MessageResponse ----  CreateResponse
//	DeriveSession                                DeriveSession
//
// Each step runs under the Handshake's mutex and moves its state:
// zeroed -> initiationCreated -> responseConsumed (initiator) or
// zeroed -> initiationConsumed -> responseCreated (responder); DeriveSession
// returns to zeroed. A step that fails leaves the state as it was, so a forged
// or replayed packet cannot disturb a handshake in progress. MACs and cookies
// are not checked here: that is CookieChecker's job, before any of this work.

import (
	"crypto/ecdh"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wirelane/wirelane/internal/crypto/chachapoly"

	"golang.org/x/crypto/chacha20poly1305"
)

// Errors returned by the handshake steps; they are wrapped with context, so
// compare with errors.Is.
var (
	ErrUnknownPeer        = errors.New("initiation from an unknown peer")
	ErrUnknownReceiver    = errors.New("response to an unknown index")
	ErrAuthentication     = errors.New("message failed authentication")
	ErrReplayedInitiation = errors.New("initiation timestamp not newer than the last one")
	ErrInitiationFlood    = errors.New("initiation less than 20 ms after the previous one")
	ErrHandshakeState     = errors.New("handshake in the wrong state for this step")
	ErrInvalidPublicKey   = errors.New("public key is a low-order point")
	ErrLocalMismatch      = errors.New("handshake was built for a different local private key")
)

type handshakeState uint8

const (
	stateZeroed handshakeState = iota
	stateInitiationCreated
	stateInitiationConsumed
	stateResponseCreated
	stateResponseConsumed
)

func (s handshakeState) String() string {
	switch s {
	case stateZeroed:
		return "zeroed"
	case stateInitiationCreated:
		return "initiation created"
	case stateInitiationConsumed:
		return "initiation consumed"
	case stateResponseCreated:
		return "response created"
	case stateResponseConsumed:
		return "response consumed"
	}
	return "invalid"
}

// Handshake is the handshake state with one remote peer. It is safe for
// concurrent use: every method takes its mutex. It is bound to the private
// key of the Local it was built with; after a key change, build new ones
// (steps given a Local with another key fail with ErrLocalMismatch).
type Handshake struct {
	// Immutable after NewHandshake.
	local      *Local
	remote     PublicKey
	remoteHash [HashSize]byte // HASH(initialHash || remote): initiator's start

	mu sync.Mutex
	// Guarded by mu.
	ss              [KeySize]byte // DH(local, remote), precomputed; erased by Wipe
	ssOK            bool          // false when remote is low-order or after Wipe
	psk             PresharedKey
	state           handshakeState
	hash            [HashSize]byte
	chainKey        [KeySize]byte
	localEphemeral  *ecdh.PrivateKey // initiator: set by CreateInitiation
	remoteEphemeral PublicKey        // responder: set by ConsumeInitiation
	localIndex      uint32
	remoteIndex     uint32
	lastTimestamp   Timestamp // greatest initiation timestamp consumed
	lastInitiation  time.Time // when the last initiation was consumed
}

// NewHandshake prepares the state for talking to remote as local, with an
// optional preshared key (zero = none). It precomputes the static-static
// Diffie-Hellman (one scalar multiplication), which every later initiation in
// both directions reuses. A remote key that is a low-order point is accepted
// here but makes every handshake step fail with ErrInvalidPublicKey.
func NewHandshake(local *Local, remote PublicKey, psk PresharedKey) *Handshake {
	h := &Handshake{local: local, remote: remote, psk: psk}
	h.remoteHash = mixedHash(&initialHash, remote[:])
	ss, err := dh(local.static, (*[KeySize]byte)(&remote))
	h.ss, h.ssOK = ss, err == nil
	return h
}

// ForLocal returns a new Handshake with the same peer for another identity
// (after a private key change), carrying over the preshared key and the
// replay and flood records of the peer's initiations, as the other WireGuard
// implementations keep them across key changes. Any handshake in progress
// is not carried over. Cost: one scalar multiplication.
func (h *Handshake) ForLocal(local *Local) *Handshake {
	h.mu.Lock()
	psk, ts, last := h.psk, h.lastTimestamp, h.lastInitiation
	h.mu.Unlock()
	n := NewHandshake(local, h.remote, psk)
	n.lastTimestamp, n.lastInitiation = ts, last
	return n
}

// Remote returns the peer's static public key.
func (h *Handshake) Remote() PublicKey { return h.remote }

// Local returns the identity the handshake was built for.
func (h *Handshake) Local() *Local { return h.local }

// SetPresharedKey replaces the preshared key (zero = none); it applies from
// the next handshake step.
func (h *Handshake) SetPresharedKey(psk PresharedKey) {
	h.mu.Lock()
	h.psk = psk
	h.mu.Unlock()
}

// LocalIndex returns the index we chose for the current or last handshake
// (the Sender of our initiation or response).
func (h *Handshake) LocalIndex() uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.localIndex
}

// RemoteIndex returns the peer's index for the current or last handshake.
func (h *Handshake) RemoteIndex() uint32 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.remoteIndex
}

// seal encrypts plaintext with key and the zero nonce, authenticating ad,
// into dst (which must have room for plaintext plus the tag).
func seal(dst []byte, key *[KeySize]byte, plaintext, ad []byte) {
	aead, _ := chacha20poly1305.New(key[:])
	aead.Seal(dst[:0], zeroNonce[:], plaintext, ad)
}

// open decrypts ciphertext with key and the zero nonce into dst.
func open(dst []byte, key *[KeySize]byte, ciphertext, ad []byte) error {
	aead, _ := chacha20poly1305.New(key[:])
	if _, err := aead.Open(dst[:0], zeroNonce[:], ciphertext, ad); err != nil {
		return ErrAuthentication
	}
	return nil
}

// CreateInitiation starts a handshake as initiator: a fresh ephemeral key,
// our static key encrypted to the peer and a TAI64N timestamp of now
// (rounded down to TimestampGranularity). MAC1 and MAC2 are left zero for a
// CookieGenerator to fill in after marshalling. Any handshake in progress is
// abandoned. Cost: two scalar multiplications.
func (h *Handshake) CreateInitiation(senderIndex uint32, now time.Time) (MessageInitiation, error) {
	eph, err := newEphemeral()
	if err != nil {
		return MessageInitiation{}, err
	}
	return h.createInitiation(senderIndex, now, eph)
}

// createInitiation is CreateInitiation with a given ephemeral key (tests
// use fixed ones for reproducible messages).
func (h *Handshake) createInitiation(senderIndex uint32, now time.Time, eph *ecdh.PrivateKey) (MessageInitiation, error) {
	var m MessageInitiation
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ssOK {
		return m, fmt.Errorf("noise: create initiation to %s: %w", h.remote, ErrInvalidPublicKey)
	}

	hash := h.remoteHash
	ck := initialChainKey
	var key [KeySize]byte
	defer clear(key[:])
	defer clear(ck[:])

	m.Sender = senderIndex
	copy(m.Ephemeral[:], eph.PublicKey().Bytes())
	mixHash(&hash, m.Ephemeral[:])
	kdf1(&ck, m.Ephemeral[:])

	es, err := dh(eph, (*[KeySize]byte)(&h.remote))
	if err != nil {
		return MessageInitiation{}, fmt.Errorf("noise: create initiation to %s: %w", h.remote, ErrInvalidPublicKey)
	}
	kdf2(&ck, &key, es[:])
	clear(es[:])
	seal(m.Static[:], &key, h.local.pub[:], hash[:])
	mixHash(&hash, m.Static[:])

	kdf2(&ck, &key, h.ss[:])
	ts := TAI64N(whitened(now))
	seal(m.Timestamp[:], &key, ts[:], hash[:])
	mixHash(&hash, m.Timestamp[:])

	h.hash, h.chainKey = hash, ck
	h.localEphemeral = eph
	h.remoteEphemeral = PublicKey{}
	h.localIndex = senderIndex
	h.remoteIndex = 0
	h.state = stateInitiationCreated
	return m, nil
}

// ConsumeInitiation processes an initiation as responder: it decrypts the
// initiator's static key, finds that peer's Handshake with find (nil means
// an unknown peer: ErrUnknownPeer), decrypts the timestamp, and rejects the
// message unless its timestamp is newer than the last accepted one
// (ErrReplayedInitiation) and at least HandshakeInitiationRate has passed
// since the last accepted initiation (ErrInitiationFlood). On success the
// Handshake is ready for CreateResponse; an initiation of our own still
// waiting for its response is abandoned (that response will then fail), as
// in the other WireGuard implementations. A failure leaves the Handshake
// untouched. MACs are not checked here.
// Cost: one scalar multiplication (the static-static one is precomputed).
func ConsumeInitiation(local *Local, m *MessageInitiation, now time.Time, find func(PublicKey) *Handshake) (*Handshake, error) {
	hash := local.initialHash
	ck := initialChainKey
	var key [KeySize]byte
	defer clear(key[:])
	defer clear(ck[:])

	mixHash(&hash, m.Ephemeral[:])
	kdf1(&ck, m.Ephemeral[:])
	es, err := dh(local.static, &m.Ephemeral)
	if err != nil {
		return nil, fmt.Errorf("noise: consume initiation: ephemeral key: %w", ErrInvalidPublicKey)
	}
	kdf2(&ck, &key, es[:])
	clear(es[:])
	var remote PublicKey
	if err := open(remote[:], &key, m.Static[:], hash[:]); err != nil {
		return nil, fmt.Errorf("noise: consume initiation: static key: %w", err)
	}
	mixHash(&hash, m.Static[:])

	h := find(remote)
	if h == nil {
		return nil, fmt.Errorf("noise: consume initiation from %s: %w", remote, ErrUnknownPeer)
	}
	if h.local.pub != local.pub {
		return nil, fmt.Errorf("noise: consume initiation from %s: %w", remote, ErrLocalMismatch)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ssOK {
		return nil, fmt.Errorf("noise: consume initiation from %s: %w", remote, ErrInvalidPublicKey)
	}

	kdf2(&ck, &key, h.ss[:])
	var ts Timestamp
	if err := open(ts[:], &key, m.Timestamp[:], hash[:]); err != nil {
		return nil, fmt.Errorf("noise: consume initiation from %s: timestamp: %w", remote, err)
	}
	mixHash(&hash, m.Timestamp[:])

	if !ts.After(h.lastTimestamp) {
		return nil, fmt.Errorf("noise: consume initiation from %s: %w", remote, ErrReplayedInitiation)
	}
	if !h.lastInitiation.IsZero() && now.Sub(h.lastInitiation) < HandshakeInitiationRate {
		return nil, fmt.Errorf("noise: consume initiation from %s: %w", remote, ErrInitiationFlood)
	}

	h.hash, h.chainKey = hash, ck
	h.remoteEphemeral = m.Ephemeral
	h.localEphemeral = nil
	h.remoteIndex = m.Sender
	h.localIndex = 0
	h.lastTimestamp = ts
	h.lastInitiation = now
	h.state = stateInitiationConsumed
	return h, nil
}

// CreateResponse answers the initiation consumed last, using senderIndex as
// our index for the session. MAC1 and MAC2 are left zero. After it, call
// DeriveSession. Cost: three scalar multiplications (ephemeral key and two
// Diffie-Hellman).
func (h *Handshake) CreateResponse(senderIndex uint32) (MessageResponse, error) {
	eph, err := newEphemeral()
	if err != nil {
		return MessageResponse{}, err
	}
	return h.createResponse(senderIndex, eph)
}

// createResponse is CreateResponse with a given ephemeral key.
func (h *Handshake) createResponse(senderIndex uint32, eph *ecdh.PrivateKey) (MessageResponse, error) {
	var m MessageResponse
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != stateInitiationConsumed {
		return m, fmt.Errorf("noise: create response to %s: %w (%s)", h.remote, ErrHandshakeState, h.state)
	}

	hash, ck := h.hash, h.chainKey
	var key, tau [KeySize]byte
	defer clear(key[:])
	defer clear(tau[:])
	defer clear(ck[:])

	m.Sender = senderIndex
	m.Receiver = h.remoteIndex
	copy(m.Ephemeral[:], eph.PublicKey().Bytes())
	mixHash(&hash, m.Ephemeral[:])
	kdf1(&ck, m.Ephemeral[:])

	ee, err := dh(eph, (*[KeySize]byte)(&h.remoteEphemeral))
	if err != nil {
		return MessageResponse{}, fmt.Errorf("noise: create response to %s: ephemeral key: %w", h.remote, ErrInvalidPublicKey)
	}
	kdf1(&ck, ee[:])
	clear(ee[:])
	se, err := dh(eph, (*[KeySize]byte)(&h.remote))
	if err != nil {
		return MessageResponse{}, fmt.Errorf("noise: create response to %s: %w", h.remote, ErrInvalidPublicKey)
	}
	kdf1(&ck, se[:])
	clear(se[:])

	kdf3(&ck, &tau, &key, h.psk[:])
	mixHash(&hash, tau[:])
	seal(m.Empty[:], &key, nil, hash[:])
	mixHash(&hash, m.Empty[:])

	h.hash, h.chainKey = hash, ck
	h.remoteEphemeral = PublicKey{}
	h.localIndex = senderIndex
	h.state = stateResponseCreated
	return m, nil
}

// ConsumeResponse processes a response as initiator. find maps m.Receiver
// (the index we sent in our initiation) to its Handshake; nil means no such
// handshake (ErrUnknownReceiver). On success, call DeriveSession.
// Cost: two scalar multiplications.
func ConsumeResponse(local *Local, m *MessageResponse, find func(receiverIndex uint32) *Handshake) (*Handshake, error) {
	h := find(m.Receiver)
	if h == nil {
		return nil, fmt.Errorf("noise: consume response for index %d: %w", m.Receiver, ErrUnknownReceiver)
	}
	if h.local.pub != local.pub {
		return nil, fmt.Errorf("noise: consume response from %s: %w", h.remote, ErrLocalMismatch)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state != stateInitiationCreated || h.localIndex != m.Receiver {
		return nil, fmt.Errorf("noise: consume response from %s: %w (%s)", h.remote, ErrHandshakeState, h.state)
	}

	hash, ck := h.hash, h.chainKey
	var key, tau [KeySize]byte
	defer clear(key[:])
	defer clear(tau[:])
	defer clear(ck[:])

	mixHash(&hash, m.Ephemeral[:])
	kdf1(&ck, m.Ephemeral[:])
	ee, err := dh(h.localEphemeral, &m.Ephemeral)
	if err != nil {
		return nil, fmt.Errorf("noise: consume response from %s: ephemeral key: %w", h.remote, ErrInvalidPublicKey)
	}
	kdf1(&ck, ee[:])
	clear(ee[:])
	se, err := dh(local.static, &m.Ephemeral)
	if err != nil {
		return nil, fmt.Errorf("noise: consume response from %s: ephemeral key: %w", h.remote, ErrInvalidPublicKey)
	}
	kdf1(&ck, se[:])
	clear(se[:])

	kdf3(&ck, &tau, &key, h.psk[:])
	mixHash(&hash, tau[:])
	if err := open(nil, &key, m.Empty[:], hash[:]); err != nil {
		return nil, fmt.Errorf("noise: consume response from %s: %w", h.remote, err)
	}
	mixHash(&hash, m.Empty[:])

	h.hash, h.chainKey = hash, ck
	h.localEphemeral = nil
	h.remoteIndex = m.Sender
	h.state = stateResponseConsumed
	return h, nil
}

// DeriveSession turns a completed handshake (response created or consumed)
// into transport keys and erases the handshake's chaining key, hash and
// ephemeral keys. Indices stay readable until the next step or Clear.
func (h *Handshake) DeriveSession(now time.Time) (*Session, error) {
	h.mu.Lock()
	defer h.mu.Unlock()

	var initiator bool
	switch h.state {
	case stateResponseConsumed:
		initiator = true
	case stateResponseCreated:
		initiator = false
	default:
		return nil, fmt.Errorf("noise: derive session with %s: %w (%s)", h.remote, ErrHandshakeState, h.state)
	}

	// (T_i->r, T_r->i) = KDF2(C, empty)
	first, second := h.chainKey, [KeySize]byte{}
	kdf2(&first, &second, nil)
	defer clear(first[:])
	defer clear(second[:])
	s := &Session{
		IsInitiator: initiator,
		LocalIndex:  h.localIndex,
		RemoteIndex: h.remoteIndex,
		Created:     now,
	}
	send, recv := &first, &second
	if !initiator {
		send, recv = recv, send
	}
	var err error
	if s.Send, err = chachapoly.New(send[:]); err != nil {
		return nil, err
	}
	if s.Receive, err = chachapoly.New(recv[:]); err != nil {
		return nil, err
	}
	h.clearEphemeralLocked()
	return s, nil
}

// Clear abandons any handshake in progress and erases its ephemeral state
// and indices. The replay and flood records of the peer's initiations are
// kept, since they protect against old initiations across handshakes.
func (h *Handshake) Clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clearEphemeralLocked()
	h.localIndex, h.remoteIndex = 0, 0
}

// Wipe erases every secret the Handshake holds, including the precomputed
// static-static secret and the preshared key; the Handshake cannot be used
// afterwards (every step fails). Call it when the peer is removed.
func (h *Handshake) Wipe() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.clearEphemeralLocked()
	h.localIndex, h.remoteIndex = 0, 0
	clear(h.psk[:])
	clear(h.ss[:])
	h.ssOK = false
}

// clearEphemeralLocked erases the handshake-in-progress secrets. The
// crypto/ecdh ephemeral key is dropped, not wiped: that package keeps its own
// copy of the scalar, out of reach.
func (h *Handshake) clearEphemeralLocked() {
	clear(h.hash[:])
	clear(h.chainKey[:])
	clear(h.remoteEphemeral[:])
	h.localEphemeral = nil
	h.state = stateZeroed
}
