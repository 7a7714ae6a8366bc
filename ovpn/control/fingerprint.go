package control

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"strings"
)

// Fingerprint is the SHA-256 hash of a certificate's DER encoding, as
// peer-fingerprint lists it.
type Fingerprint [sha256.Size]byte

// FingerprintOf returns c's fingerprint.
func FingerprintOf(c *x509.Certificate) Fingerprint { return sha256.Sum256(c.Raw) }

// String formats f as OpenVPN and `openssl x509 -fingerprint -sha256`
// do: upper-case hex bytes joined by colons.
func (f Fingerprint) String() string {
	var b strings.Builder
	for i, c := range f {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%02X", c)
	}
	return b.String()
}

// ParseFingerprint parses "AB:CD:..." (32 hex bytes joined by colons,
// either case), the form peer-fingerprint takes.
func ParseFingerprint(s string) (Fingerprint, error) {
	var f Fingerprint
	parts := strings.Split(s, ":")
	if len(parts) != len(f) {
		return f, fmt.Errorf("fingerprint %q: want %d hex bytes joined by colons (SHA-256), got %d", s, len(f), len(parts))
	}
	for i, p := range parts {
		if len(p) != 2 {
			return f, fmt.Errorf("fingerprint %q: byte %d (%q) is not two hex digits", s, i+1, p)
		}
		if _, err := hex.Decode(f[i:i+1], []byte(p)); err != nil {
			return f, fmt.Errorf("fingerprint %q: byte %d (%q) is not two hex digits", s, i+1, p)
		}
	}
	return f, nil
}
