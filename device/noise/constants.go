package noise

import "time"

// Protocol identifiers and labels, named as in the WireGuard whitepaper
// (section 5.4). Changing any of them breaks interoperability.
const (
	// NoiseConstruction names the Noise protocol instance; its BLAKE2s hash
	// is the initial chaining key.
	NoiseConstruction = "Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"
	// WGIdentifier is mixed into the initial handshake hash.
	WGIdentifier = "WireGuard v1 zx2c4 Jason@zx2c4.com"
	// WGLabelMAC1 prefixes the responder's public key to form the mac1 key.
	WGLabelMAC1 = "mac1----"
	// WGLabelCookie prefixes the responder's public key to form the key that
	// encrypts cookie replies.
	WGLabelCookie = "cookie--"
)

// Timing rules enforced by this package (whitepaper section 6.1 and 5.3).
const (
	// CookieRefreshTime is how long a responder's cookie secret, and a cookie
	// held by an initiator, stay valid.
	CookieRefreshTime = 120 * time.Second
	// HandshakeInitiationRate is the minimum spacing between two initiations
	// consumed from the same peer (at most 50 per second).
	HandshakeInitiationRate = time.Second / 50
	// TimestampGranularity is the step to which initiation timestamps are
	// rounded down, so that they do not reveal the initiator's fine-grained
	// clock. It is the largest power of two of nanoseconds not above
	// HandshakeInitiationRate.
	TimestampGranularity = 1 << 24 * time.Nanosecond
)

// Sizes of the primitives' inputs and outputs.
const (
	// KeySize is the size of every key: X25519 keys, preshared keys, the
	// chaining key and the symmetric session keys.
	KeySize = 32
	// HashSize is the size of a BLAKE2s-256 digest.
	HashSize = 32
	// MACSize is the size of mac1, mac2 and a cookie (BLAKE2s-128).
	MACSize = 16
	// AEADTagSize is the size of a ChaCha20-Poly1305 authentication tag.
	AEADTagSize = 16
	// CookieNonceSize is the size of the XChaCha20-Poly1305 nonce of a cookie
	// reply.
	CookieNonceSize = 24
	// TimestampSize is the size of a TAI64N timestamp.
	TimestampSize = 12
)
