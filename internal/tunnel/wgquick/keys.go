package wgquick

import (
	"errors"

	"github.com/wirelane/wirelane/device/noise"
)

// Keys are the engine's own (device/noise): the same clamping, the same
// constant-time base64 and the same X25519 as the handshake uses, so the
// tool and the engine cannot disagree about a key.

// KeyLen is the length in bytes of a Curve25519 or preshared key.
const KeyLen = noise.KeySize

// Key is a Curve25519 private or public key, or a preshared key: the
// engine's noise.Key. Its text form (String) is the 44-character standard
// base64 encoding `wg` uses; fmt prints it as a placeholder.
type Key = noise.Key

// ErrBadKey reports a key that is not 44 characters of canonical base64
// encoding 32 bytes. The message matches what `wg` prints.
var ErrBadKey = errors.New("Key is not the correct length or format")

// ParseKey decodes the base64 text form of a key. It accepts exactly what
// `wg` accepts: 44 characters ending in '=' with canonical trailing bits.
func ParseKey(s string) (Key, error) {
	k, err := noise.ParseBase64Key(s)
	if err != nil {
		return Key{}, ErrBadKey
	}
	return k, nil
}

// GeneratePresharedKey returns 32 random bytes from the system CSPRNG.
func GeneratePresharedKey() (Key, error) {
	return noise.GeneratePresharedKey()
}

// GeneratePrivateKey returns a random Curve25519 private key, clamped as
// RFC 7748 prescribes (and as `wg genkey` prints it).
func GeneratePrivateKey() (Key, error) {
	return noise.GeneratePrivateKey()
}
