package noise

import "crypto/ecdh"

// Local is this endpoint's static identity and everything derived from it
// once: the public key, the responder's initial handshake hash and the
// mac1/cookie keys. It is immutable after NewLocal, so it is safe for
// concurrent use without locking; a new private key means a new Local (and
// new Handshakes, whose precomputed static-static secret depends on it).
type Local struct {
	priv        PrivateKey
	pub         PublicKey
	static      *ecdh.PrivateKey // priv in crypto/ecdh form (carries pub)
	initialHash [HashSize]byte   // HASH(initialHash || pub): responder's start
	mac1Key     [HashSize]byte   // HASH(WGLabelMAC1 || pub)
	cookieKey   [HashSize]byte   // HASH(WGLabelCookie || pub)
}

// NewLocal builds an identity from priv, clamping a copy of it as `wg` does.
// It costs one scalar multiplication and a few hashes.
func NewLocal(priv PrivateKey) *Local {
	l := &Local{priv: priv}
	l.priv.Clamp()
	l.static = newECDHKey(&l.priv)
	copy(l.pub[:], l.static.PublicKey().Bytes())
	l.initialHash = mixedHash(&initialHash, l.pub[:])
	l.mac1Key = labelKey(WGLabelMAC1, &l.pub)
	l.cookieKey = labelKey(WGLabelCookie, &l.pub)
	return l
}

// labelKey returns HASH(label || pub).
func labelKey(label string, pub *PublicKey) [HashSize]byte {
	var buf [8 + KeySize]byte
	copy(buf[:], label)
	copy(buf[len(label):], pub[:])
	return blake2sSum(buf[:len(label)+KeySize])
}

// PrivateKey returns the (clamped) private key.
func (l *Local) PrivateKey() PrivateKey { return l.priv }

// PublicKey returns the public key.
func (l *Local) PublicKey() PublicKey { return l.pub }
