package noise

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/subtle"
	"fmt"
)

// Key is a 32-byte key of the protocol: an X25519 private key (a
// Curve25519 scalar), an X25519 public key (a u-coordinate) or a preshared
// key. It is the tree's one key type: the engine, the UAPI, configuration
// files and tools all hold keys as a Key, so that none can disagree about
// clamping or encoding. PrivateKey, PublicKey and PresharedKey are its
// names by role, for signatures that say which key they want.
//
// fmt never prints a Key's bytes: every verb gives "[key]" (Format), so a
// configuration printed by mistake leaks nothing. String gives the base64
// text `wg` uses, for the places (a public key in a log, a configuration
// file being written) that mean to show a key.
type Key [KeySize]byte

// PrivateKey is a Key used as an X25519 private key.
type PrivateKey = Key

// PublicKey is a Key used as an X25519 public key.
type PublicKey = Key

// PresharedKey is a Key used as the optional symmetric key mixed into a
// handshake; all zeros means "none", which is what the protocol mixes in
// when unset.
type PresharedKey = Key

// GeneratePrivateKey returns a fresh clamped private key from crypto/rand,
// exactly like `wg genkey`.
func GeneratePrivateKey() (PrivateKey, error) {
	var k PrivateKey
	if _, err := rand.Read(k[:]); err != nil {
		return PrivateKey{}, fmt.Errorf("noise: generate private key: %w", err)
	}
	k.Clamp()
	return k, nil
}

// GeneratePresharedKey returns 32 random bytes from crypto/rand, like
// `wg genpsk`.
func GeneratePresharedKey() (PresharedKey, error) {
	var k PresharedKey
	if _, err := rand.Read(k[:]); err != nil {
		return PresharedKey{}, fmt.Errorf("noise: generate preshared key: %w", err)
	}
	return k, nil
}

// Clamp applies the X25519 scalar clamping of RFC 7748 in place: clears the
// three low bits and the top bit, sets bit 254.
func (k *Key) Clamp() {
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
}

// PublicKey returns the public key of k, a private key: X25519(k, 9). The scalar is clamped by
// the multiplication, so an unclamped k gives the same result as its clamped
// form. It costs one scalar multiplication.
func (k Key) PublicKey() Key {
	var pub PublicKey
	priv, err := ecdh.X25519().NewPrivateKey(k[:])
	if err != nil {
		// Only a wrong length or FIPS-only mode fail, neither possible here
		// outside a FIPS-140-only build, where X25519 is unavailable at all.
		panic("noise: X25519 unavailable: " + err.Error())
	}
	copy(pub[:], priv.PublicKey().Bytes())
	return pub
}

// IsZero reports whether k is all zeros (unset; for a preshared key, none),
// in constant time.
func (k Key) IsZero() bool { return isZero32((*[32]byte)(&k)) }

// Format prints a placeholder instead of the key's bytes, whatever the verb.
func (k Key) Format(f fmt.State, verb rune) { _, _ = f.Write([]byte("[key]")) }

// String returns the key in base64, as `wg` prints it. It is for public
// keys and for writing configuration files: never log a private or
// preshared key's String.
func (k Key) String() string { return Base64Key(k) }

// Equal reports whether k and o are the same key, in constant time.
func (k Key) Equal(o Key) bool {
	return subtle.ConstantTimeCompare(k[:], o[:]) == 1
}

func isZero32(k *[32]byte) bool {
	var acc byte
	for _, b := range k {
		acc |= b
	}
	return subtle.ConstantTimeByteEq(acc, 0) == 1
}

// Base64KeyLen is the length of a key in base64: 43 characters and one '='.
const Base64KeyLen = 44

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

// Base64Key encodes k in standard padded base64 (44 characters), as `wg`
// prints keys.
func Base64Key(k Key) string {
	var out [Base64KeyLen]byte
	for i := 0; i < KeySize/3; i++ {
		v := uint32(k[3*i])<<16 | uint32(k[3*i+1])<<8 | uint32(k[3*i+2])
		encodeGroup(out[4*i:4*i+4], v)
	}
	v := uint32(k[30])<<16 | uint32(k[31])<<8
	var last [4]byte
	encodeGroup(last[:], v)
	copy(out[40:43], last[:3])
	out[43] = '='
	return string(out[:])
}

func encodeGroup(dst []byte, v uint32) {
	dst[0] = base64Char(v >> 18 & 63)
	dst[1] = base64Char(v >> 12 & 63)
	dst[2] = base64Char(v >> 6 & 63)
	dst[3] = base64Char(v & 63)
}

// base64Char maps a 6-bit value to its character without a table lookup
// indexed by secret data.
func base64Char(v uint32) byte {
	x := int32(v)
	// Start from 'A'+x and add the distance to the right range when x is past
	// each boundary; (bound - x) >> 8 is all ones exactly when x > bound.
	c := 'A' + x
	c += ((25 - x) >> 8) & ('a' - 'A' - 26)
	c += ((51 - x) >> 8) & ('0' - 'a' - 26)
	c += ((61 - x) >> 8) & ('+' - '0' - 10)
	c += ((62 - x) >> 8) & ('/' - '+' - 1)
	return byte(c)
}

// base64Value maps a character to its 6-bit value, or -1 when it is not in
// the standard alphabet, without branching on the character.
func base64Value(ch byte) int32 {
	c := int32(ch)
	v := int32(-1)
	// (lo-1 - c) & (c - (hi+1)) is negative exactly when lo <= c <= hi; the
	// shift turns that into an all-ones mask.
	v += (((('A' - 1) - c) & (c - ('Z' + 1))) >> 8) & (c - 'A' + 1)
	v += (((('a' - 1) - c) & (c - ('z' + 1))) >> 8) & (c - 'a' + 26 + 1)
	v += (((('0' - 1) - c) & (c - ('9' + 1))) >> 8) & (c - '0' + 52 + 1)
	v += (((('+' - 1) - c) & (c - ('+' + 1))) >> 8) & (62 + 1)
	v += (((('/' - 1) - c) & (c - ('/' + 1))) >> 8) & (63 + 1)
	return v
}

// ParseBase64Key decodes a key written as `wg` writes it: exactly 44
// characters of standard base64 ending in a single '=', with the unused low
// bits of the last character zero. Anything else (URL alphabet, missing or
// extra padding, whitespace, non-canonical trailing bits) is rejected, as
// `wg` rejects it. Decoding runs in time independent of the key's value; the
// error names the offending position but never echoes the input.
func ParseBase64Key(s string) (Key, error) {
	var k Key
	if len(s) != Base64KeyLen {
		return k, fmt.Errorf("noise: base64 key has %d characters, want %d", len(s), Base64KeyLen)
	}
	if s[Base64KeyLen-1] != '=' {
		return k, fmt.Errorf("noise: base64 key must end with '=' (position %d)", Base64KeyLen)
	}
	var bad int32
	for i := 0; i < KeySize/3; i++ {
		a, b, c, d := base64Value(s[4*i]), base64Value(s[4*i+1]), base64Value(s[4*i+2]), base64Value(s[4*i+3])
		bad |= a | b | c | d
		v := a<<18 | b<<12 | c<<6 | d
		k[3*i] = byte(v >> 16)
		k[3*i+1] = byte(v >> 8)
		k[3*i+2] = byte(v)
	}
	a, b, c := base64Value(s[40]), base64Value(s[41]), base64Value(s[42])
	bad |= a | b | c
	v := a<<18 | b<<12 | c<<6
	k[30] = byte(v >> 16)
	k[31] = byte(v >> 8)
	trailing := c & 3
	if bad < 0 || trailing != 0 {
		k = Key{}
		for i := 0; i < Base64KeyLen-1; i++ {
			if base64Value(s[i]) < 0 {
				return k, fmt.Errorf("noise: base64 key has an invalid character at position %d", i+1)
			}
		}
		return k, fmt.Errorf("noise: base64 key is not canonical: character %d has unused low bits set", Base64KeyLen-1)
	}
	return k, nil
}
