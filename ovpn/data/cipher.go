package data

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"strings"

	"github.com/wirelane/wirelane/internal/crypto/chachapoly"
)

// Cipher is a data-channel AEAD cipher.
type Cipher uint8

// Supported ciphers.
const (
	AES128GCM Cipher = iota + 1
	AES256GCM
	ChaCha20Poly1305
	// AES128CBC and AES256CBC are the legacy (non-AEAD) ciphers, with an
	// HMAC (cbc.go); only for old servers, and only when a file names
	// them.
	AES128CBC
	AES256CBC
)

// AEAD reports whether the cipher authenticates itself (GCM,
// ChaCha20-Poly1305) rather than through an HMAC (CBC).
func (c Cipher) AEAD() bool { return c != AES128CBC && c != AES256CBC }

// String returns OpenVPN's name for the cipher.
func (c Cipher) String() string {
	switch c {
	case AES128GCM:
		return "AES-128-GCM"
	case AES256GCM:
		return "AES-256-GCM"
	case ChaCha20Poly1305:
		return "CHACHA20-POLY1305"
	case AES128CBC:
		return "AES-128-CBC"
	case AES256CBC:
		return "AES-256-CBC"
	}
	return fmt.Sprintf("cipher(%d)", uint8(c))
}

// KeyLen is the key size in bytes.
func (c Cipher) KeyLen() int {
	if c == AES128GCM || c == AES128CBC {
		return 16
	}
	return 32
}

// ParseCipher maps an OpenVPN cipher name (case-insensitive) to a Cipher.
func ParseCipher(name string) (Cipher, error) {
	switch strings.ToUpper(name) {
	case "AES-128-GCM":
		return AES128GCM, nil
	case "AES-256-GCM":
		return AES256GCM, nil
	case "CHACHA20-POLY1305":
		return ChaCha20Poly1305, nil
	case "AES-128-CBC":
		return AES128CBC, nil
	case "AES-256-CBC":
		return AES256CBC, nil
	}
	return 0, fmt.Errorf("data: unsupported cipher %q (supported: AES-256-GCM, AES-128-GCM, CHACHA20-POLY1305; AES-256-CBC, AES-128-CBC for old servers)", name)
}

func (c Cipher) aead(key []byte) (cipher.AEAD, error) {
	if !c.AEAD() {
		return nil, fmt.Errorf("data: %v is not an AEAD cipher (use NewCBCKey)", c)
	}
	if len(key) != c.KeyLen() {
		return nil, fmt.Errorf("data: %v needs a %d-byte key, got %d", c, c.KeyLen(), len(key))
	}
	switch c {
	case AES128GCM, AES256GCM:
		b, err := aes.NewCipher(key)
		if err != nil {
			return nil, err
		}
		return cipher.NewGCM(b)
	case ChaCha20Poly1305:
		return chachapoly.New(key)
	}
	return nil, fmt.Errorf("data: unknown cipher %d", c)
}
