package noise

// Denial-of-service defence (whitepaper section 5.4.7 and 5.3):
//
//	initiator (CookieGenerator)              responder (CookieChecker)
//	AddMACs: mac1 = MAC(HASH(label1||Spub_r), msg)   CheckMAC1: cheap, no DH
//	         mac2 = MAC(cookie, msg) if fresh        CheckMAC2 (under load)
//	ConsumeReply <---- MessageCookieReply ----       CreateReply:
//	                                                 cookie = MAC(secret, src)
//	                                                 sealed with XChaCha20-Poly1305
//	                                                 under HASH(label2||Spub_r),
//	                                                 bound to the message's mac1
//
// The responder's secret is random and replaced when older than
// CookieRefreshTime; an initiator stops using a cookie after the same time.
// All MAC comparisons are constant time.

import (
	"crypto/cipher"
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"hash"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20poly1305"
)

// macOffsets returns where mac1 and mac2 start in a marshalled initiation or
// response, and ok=false for any other length.
func macOffsets(msg []byte) (mac1, mac2 int, ok bool) {
	switch len(msg) {
	case MessageInitiationSize, MessageResponseSize:
		return len(msg) - 2*MACSize, len(msg) - MACSize, true
	}
	return 0, 0, false
}

// keyedMAC computes BLAKE2s-128 under one fixed key, reusing keyed digests
// so the hot check (mac1 on every handshake packet) does not allocate.
type keyedMAC struct {
	pool sync.Pool // of *macDigest
}

type macDigest struct {
	d   hash.Hash
	out [blake2s.Size]byte
}

func newKeyedMAC(key []byte) *keyedMAC {
	k := append([]byte(nil), key...)
	m := &keyedMAC{}
	m.pool.New = func() any {
		d, err := blake2s.New128(k)
		if err != nil {
			panic("noise: mac key size: " + err.Error())
		}
		return &macDigest{d: d}
	}
	return m
}

// sum sets out to the MAC of data.
func (m *keyedMAC) sum(out *[MACSize]byte, data []byte) {
	md := m.pool.Get().(*macDigest)
	md.d.Reset()
	md.d.Write(data)
	md.d.Sum(md.out[:0])
	copy(out[:], md.out[:MACSize])
	m.pool.Put(md)
}

// sourceBytes encodes the sender's address as the cookie input: the IP
// (4 bytes for IPv4, including IPv4-mapped IPv6, else 16) then the port,
// little-endian as netip.AddrPort.MarshalBinary writes it. The zone is left
// out so a cookie binds to the address alone.
func sourceBytes(src netip.AddrPort) ([18]byte, int) {
	var b [18]byte
	a := src.Addr().Unmap()
	n := 0
	if a.Is4() {
		v := a.As4()
		n = copy(b[:], v[:])
	} else {
		v := a.As16()
		n = copy(b[:], v[:])
	}
	binary.LittleEndian.PutUint16(b[n:], src.Port())
	return b, n + 2
}

// CookieChecker is the responder side: it validates mac1 and mac2 of
// incoming handshake messages and issues cookie replies. It is safe for
// concurrent use.
type CookieChecker struct {
	// Immutable after NewCookieChecker.
	mac1      *keyedMAC
	cookieKey [KeySize]byte
	// sealer encrypts cookies under cookieKey (stateless, safe for
	// concurrent use); made once so that a reply under a flood does not
	// build a cipher.
	sealer cipher.AEAD

	mu sync.RWMutex
	// Guarded by mu.
	secret    [blake2s.Size]byte
	secretSet time.Time // zero until the first reply: no mac2 can be valid
}

// NewCookieChecker prepares the checks for messages sent to local.
func NewCookieChecker(local *Local) *CookieChecker {
	sealer, err := chacha20poly1305.NewX(local.cookieKey[:])
	if err != nil {
		panic("noise: cookie key: " + err.Error()) // the key has the one size NewX takes
	}
	return &CookieChecker{
		mac1:      newKeyedMAC(local.mac1Key[:]),
		cookieKey: local.cookieKey,
		sealer:    sealer,
	}
}

// CheckMAC1 reports whether msg, a whole marshalled initiation or response,
// carries a valid mac1 for our public key. It does no public-key work, so it
// is the first filter for every handshake packet. Any other length fails.
func (c *CookieChecker) CheckMAC1(msg []byte) bool {
	o1, o2, ok := macOffsets(msg)
	if !ok {
		return false
	}
	var want [MACSize]byte
	c.mac1.sum(&want, msg[:o1])
	return subtle.ConstantTimeCompare(want[:], msg[o1:o2]) == 1
}

// secretFreshLocked reports whether the secret was issued and is at most
// CookieRefreshTime old at now; c.mu must be held.
func (c *CookieChecker) secretFreshLocked(now time.Time) bool {
	return !c.secretSet.IsZero() && now.Sub(c.secretSet) <= CookieRefreshTime
}

// cookieLocked computes the cookie for src; c.mu must be held.
func (c *CookieChecker) cookieLocked(out *[MACSize]byte, src netip.AddrPort) {
	b, n := sourceBytes(src)
	mac(out, c.secret[:], b[:n])
}

// CheckMAC2 reports whether msg carries a mac2 made with the cookie we would
// give src now. It fails when no secret was issued or the secret is older
// than CookieRefreshTime.
func (c *CookieChecker) CheckMAC2(msg []byte, src netip.AddrPort, now time.Time) bool {
	_, o2, ok := macOffsets(msg)
	if !ok {
		return false
	}
	var cookie, want [MACSize]byte
	c.mu.RLock()
	if !c.secretFreshLocked(now) {
		c.mu.RUnlock()
		return false
	}
	c.cookieLocked(&cookie, src)
	c.mu.RUnlock()
	mac(&want, cookie[:], msg[:o2])
	clear(cookie[:])
	return subtle.ConstantTimeCompare(want[:], msg[o2:]) == 1
}

// CreateReply builds the cookie reply to msg (a whole initiation or
// response whose mac1 was valid) received from src; receiver is the Sender
// index of msg. The secret is renewed first if older than CookieRefreshTime.
func (c *CookieChecker) CreateReply(msg []byte, receiver uint32, src netip.AddrPort, now time.Time) (MessageCookieReply, error) {
	var r MessageCookieReply
	o1, o2, ok := macOffsets(msg)
	if !ok {
		return r, fmt.Errorf("noise: cookie reply: %w: %d bytes is neither an initiation nor a response", ErrMessageSize, len(msg))
	}
	var cookie [MACSize]byte
	defer clear(cookie[:])

	// Replies are sent under load, from several goroutines: share the lock
	// unless the secret must be renewed.
	c.mu.RLock()
	fresh := c.secretFreshLocked(now)
	if fresh {
		c.cookieLocked(&cookie, src)
	}
	c.mu.RUnlock()
	if !fresh {
		c.mu.Lock()
		if !c.secretFreshLocked(now) {
			if _, err := rand.Read(c.secret[:]); err != nil {
				c.mu.Unlock()
				return r, fmt.Errorf("noise: cookie secret: %w", err)
			}
			c.secretSet = now
		}
		c.cookieLocked(&cookie, src)
		c.mu.Unlock()
	}

	if _, err := rand.Read(r.Nonce[:]); err != nil {
		return r, fmt.Errorf("noise: cookie nonce: %w", err)
	}
	c.sealer.Seal(r.Cookie[:0], r.Nonce[:], cookie[:], msg[o1:o2])
	r.Receiver = receiver
	return r, nil
}

// CookieGenerator is the initiator side for one peer: it writes mac1 and
// mac2 into outgoing handshake messages and stores cookies from replies. It
// is safe for concurrent use.
type CookieGenerator struct {
	// Immutable after NewCookieGenerator.
	mac1      *keyedMAC
	cookieKey [KeySize]byte

	mu sync.Mutex
	// Guarded by mu.
	cookie      [MACSize]byte
	cookieSet   time.Time // zero: no cookie
	hasLastMAC1 bool
	lastMAC1    [MACSize]byte // mac1 of the last message sent; a reply must bind to it
}

// NewCookieGenerator prepares MACs for messages sent to remote.
func NewCookieGenerator(remote PublicKey) *CookieGenerator {
	mac1Key := labelKey(WGLabelMAC1, &remote)
	g := &CookieGenerator{
		mac1:      newKeyedMAC(mac1Key[:]),
		cookieKey: labelKey(WGLabelCookie, &remote),
	}
	return g
}

// AddMACs writes mac1, and mac2 when a cookie younger than CookieRefreshTime
// is held (else zeros), into msg, a whole marshalled initiation or response.
// Messages of any other length are left untouched.
func (g *CookieGenerator) AddMACs(msg []byte, now time.Time) {
	o1, o2, ok := macOffsets(msg)
	if !ok {
		return
	}
	var m1, m2 [MACSize]byte
	g.mac1.sum(&m1, msg[:o1])
	copy(msg[o1:o2], m1[:])

	g.mu.Lock()
	g.lastMAC1 = m1
	g.hasLastMAC1 = true
	fresh := !g.cookieSet.IsZero() && now.Sub(g.cookieSet) <= CookieRefreshTime
	if fresh {
		mac(&m2, g.cookie[:], msg[:o2])
	}
	g.mu.Unlock()
	copy(msg[o2:], m2[:])
}

// ConsumeReply decrypts a cookie reply to the last message we MACed and, if
// it authenticates, keeps its cookie (valid from now for CookieRefreshTime).
// It reports whether the reply was accepted.
func (g *CookieGenerator) ConsumeReply(m *MessageCookieReply, now time.Time) bool {
	aead, err := chacha20poly1305.NewX(g.cookieKey[:])
	if err != nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.hasLastMAC1 {
		return false
	}
	var cookie [MACSize]byte
	if _, err := aead.Open(cookie[:0], m.Nonce[:], m.Cookie[:], g.lastMAC1[:]); err != nil {
		return false
	}
	g.cookie = cookie
	g.cookieSet = now
	clear(cookie[:])
	return true
}
