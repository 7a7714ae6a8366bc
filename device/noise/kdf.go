package noise

// The symmetric primitives of the handshake (whitepaper section 5.4):
// HASH = BLAKE2s-256, MAC = keyed BLAKE2s-128, HMAC = HMAC-BLAKE2s-256 and the
// HKDF-style KDF built on it. Inputs in the handshake are short, so HASH and
// HMAC work on stack buffers through blake2s.Sum256 and do not allocate.

import (
	"crypto/ecdh"
	"errors"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20poly1305"
)

// Values derived once from the protocol names.
var (
	// initialChainKey is HASH(NoiseConstruction).
	initialChainKey [HashSize]byte
	// initialHash is HASH(initialChainKey || WGIdentifier); each side then
	// mixes in the responder's static public key.
	initialHash [HashSize]byte
	// zeroNonce is the AEAD nonce of every handshake encryption (each key is
	// used once).
	zeroNonce [chacha20poly1305.NonceSize]byte
)

func init() {
	initialChainKey = blake2s.Sum256([]byte(NoiseConstruction))
	initialHash = mixedHash(&initialChainKey, []byte(WGIdentifier))
}

// mixedHash returns HASH(h || data).
func mixedHash(h *[HashSize]byte, data []byte) [HashSize]byte {
	var buf [HashSize + 64]byte
	if len(data) > 64 {
		d, _ := blake2s.New256(nil)
		d.Write(h[:])
		d.Write(data)
		var out [HashSize]byte
		d.Sum(out[:0])
		return out
	}
	copy(buf[:], h[:])
	n := copy(buf[HashSize:], data)
	return blake2s.Sum256(buf[:HashSize+n])
}

// mixHash sets h = HASH(h || data).
func mixHash(h *[HashSize]byte, data []byte) {
	*h = mixedHash(h, data)
}

// hmacBlake2s returns HMAC-BLAKE2s-256(key, data) for a 32-byte key and at
// most 64 bytes of data (all the handshake needs).
func hmacBlake2s(key *[KeySize]byte, data []byte) [HashSize]byte {
	const block = blake2s.BlockSize
	if len(data) > 64 {
		panic("noise: hmac input too long")
	}
	var buf [block + 64]byte
	for i := range block {
		var k byte
		if i < KeySize {
			k = key[i]
		}
		buf[i] = k ^ 0x36
	}
	n := copy(buf[block:], data)
	inner := blake2s.Sum256(buf[:block+n])
	for i := range block {
		var k byte
		if i < KeySize {
			k = key[i]
		}
		buf[i] = k ^ 0x5c
	}
	copy(buf[block:], inner[:])
	out := blake2s.Sum256(buf[:block+HashSize])
	clear(buf[:])
	clear(inner[:])
	return out
}

// kdf1 sets ck = KDF1(ck, in).
func kdf1(ck *[KeySize]byte, in []byte) {
	prk := hmacBlake2s(ck, in)
	*ck = hmacBlake2s(&prk, []byte{1})
	clear(prk[:])
}

// kdf2 sets (ck, t2) = KDF2(ck, in).
func kdf2(ck, t2 *[KeySize]byte, in []byte) {
	prk := hmacBlake2s(ck, in)
	*ck = hmacBlake2s(&prk, []byte{1})
	var buf [KeySize + 1]byte
	copy(buf[:], ck[:])
	buf[KeySize] = 2
	*t2 = hmacBlake2s(&prk, buf[:])
	clear(prk[:])
	clear(buf[:])
}

// kdf3 sets (ck, t2, t3) = KDF3(ck, in).
func kdf3(ck, t2, t3 *[KeySize]byte, in []byte) {
	prk := hmacBlake2s(ck, in)
	*ck = hmacBlake2s(&prk, []byte{1})
	var buf [KeySize + 1]byte
	copy(buf[:], ck[:])
	buf[KeySize] = 2
	*t2 = hmacBlake2s(&prk, buf[:])
	copy(buf[:], t2[:])
	buf[KeySize] = 3
	*t3 = hmacBlake2s(&prk, buf[:])
	clear(prk[:])
	clear(buf[:])
}

// errLowOrder reports a DH whose result is all zeros: the peer sent a
// low-order point, so the shared secret would carry no entropy.
var errLowOrder = errors.New("X25519 with a low-order point")

// dh returns X25519(priv, pub), rejecting the all-zero result. It costs one
// scalar multiplication: priv already carries its public key, which is what
// makes crypto/ecdh cheaper here than golang.org/x/crypto/curve25519.X25519
// (that wrapper recomputes the public key of the scalar every call).
func dh(priv *ecdh.PrivateKey, pub *[KeySize]byte) ([KeySize]byte, error) {
	var out [KeySize]byte
	p, err := ecdh.X25519().NewPublicKey(pub[:])
	if err != nil {
		return out, err
	}
	s, err := priv.ECDH(p)
	if err != nil {
		return out, errLowOrder
	}
	copy(out[:], s)
	clear(s)
	return out, nil
}

// newECDHKey wraps a private key for crypto/ecdh (one scalar multiplication
// to derive its public key).
func newECDHKey(k *PrivateKey) *ecdh.PrivateKey {
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil {
		panic("noise: X25519 unavailable: " + err.Error())
	}
	return priv
}

// newEphemeral draws a fresh clamped ephemeral key.
func newEphemeral() (*ecdh.PrivateKey, error) {
	k, err := GeneratePrivateKey()
	if err != nil {
		return nil, err
	}
	priv := newECDHKey(&k)
	clear(k[:])
	return priv, nil
}

// blake2sSum is HASH(data).
func blake2sSum(data []byte) [HashSize]byte { return blake2s.Sum256(data) }
