package wrap

// tls-crypt-v2 key files (OpenVPN's doc/tls-crypt-v2.txt).
//
//	server key: PEM "OpenVPN tls-crypt-v2 server key", 128 bytes:
//	            cipher(64) | hmac(64); Ke = cipher[:32] (AES-256-CTR),
//	            Ka = hmac[:32] (HMAC-SHA256)
//	client key: PEM "OpenVPN tls-crypt-v2 client key", Kc (256 bytes, a
//	            tls-crypt static key) || WKc
//	WKc:        T (32) | AES-256-CTR(Ke, IV = T[:16], Kc || metadata) | len (2)
//	            T = HMAC-SHA256(Ka, len || Kc || metadata), len = len(WKc)
//	metadata:   type (1) | data: 0x00 user data, 0x01 a 64-bit unix time

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// Sizes of tls-crypt-v2 keys.
const (
	// V2ServerKeyLen is the size of a tls-crypt-v2 server key.
	V2ServerKeyLen = 128
	// MaxWKcLen is the largest wrapped client key OpenVPN accepts.
	MaxWKcLen = 1024
	// MaxMetadataLen is the most metadata (type byte included) a wrapped
	// client key can hold.
	MaxMetadataLen = MaxWKcLen - (StaticKeyLen + cryptTag + 2)
	minWKcLen      = cryptTag + StaticKeyLen + 2
)

// Metadata types (the first byte of a client key's metadata).
const (
	MetadataUser      byte = 0x00 // free-form data given at key generation
	MetadataTimestamp byte = 0x01 // 64-bit big-endian unix time of generation
)

// PEM types of tls-crypt-v2 key files.
const (
	V2ServerPEM = "OpenVPN tls-crypt-v2 server key"
	V2ClientPEM = "OpenVPN tls-crypt-v2 client key"
)

// Errors about wrapped client keys.
var (
	ErrWKcLength = errors.New("wrap: tls-crypt-v2 wrapped client key: bad length")
	ErrWKcAuth   = errors.New("wrap: tls-crypt-v2 wrapped client key: authentication failed (another server key?)")
)

// V2ServerKey is a tls-crypt-v2 server key: it wraps and unwraps the
// clients' keys.
type V2ServerKey [V2ServerKeyLen]byte

func (k *V2ServerKey) ke() []byte { return k[:32] }
func (k *V2ServerKey) ka() []byte { return k[64 : 64+32] }

// GenerateV2ServerKey returns a random server key, as `openvpn --genkey
// tls-crypt-v2-server` makes.
func GenerateV2ServerKey() (*V2ServerKey, error) {
	var k V2ServerKey
	if _, err := rand.Read(k[:]); err != nil {
		return nil, err
	}
	return &k, nil
}

// ParseV2ServerKey parses a tls-crypt-v2 server key file.
func ParseV2ServerKey(text []byte) (*V2ServerKey, error) {
	b, err := decodePEM(text, V2ServerPEM)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	if len(b) != V2ServerKeyLen {
		return nil, fmt.Errorf("tls-crypt-v2 server key: %d bytes, want %d", len(b), V2ServerKeyLen)
	}
	var k V2ServerKey
	copy(k[:], b)
	return &k, nil
}

// Format returns the key in OpenVPN's file format.
func (k *V2ServerKey) Format() []byte { return encodePEM(V2ServerPEM, k[:]) }

// V2ClientKey is a tls-crypt-v2 client key: the client's own tls-crypt
// key and the same key wrapped by the server key, which the client
// sends to the server.
type V2ClientKey struct {
	Key StaticKey
	WKc []byte
}

// ParseV2ClientKey parses a tls-crypt-v2 client key file. It checks the
// wrapped key's framing, not its contents (only the server can).
func ParseV2ClientKey(text []byte) (*V2ClientKey, error) {
	b, err := decodePEM(text, V2ClientPEM)
	if err != nil {
		return nil, err
	}
	defer clear(b)
	if len(b) < StaticKeyLen+minWKcLen {
		return nil, fmt.Errorf("tls-crypt-v2 client key: %d bytes, want at least %d", len(b), StaticKeyLen+minWKcLen)
	}
	k := &V2ClientKey{WKc: append([]byte(nil), b[StaticKeyLen:]...)}
	copy(k.Key[:], b)
	if err := checkWKcLength(k.WKc); err != nil {
		return nil, fmt.Errorf("tls-crypt-v2 client key: %w", err)
	}
	return k, nil
}

// Format returns the key in OpenVPN's file format.
func (k *V2ClientKey) Format() []byte {
	b := append(append([]byte(nil), k.Key[:]...), k.WKc...)
	defer clear(b)
	return encodePEM(V2ClientPEM, b)
}

// checkWKcLength checks a wrapped key's trailing length field.
func checkWKcLength(wkc []byte) error {
	if len(wkc) < minWKcLen || len(wkc) > MaxWKcLen {
		return fmt.Errorf("%w: %d bytes", ErrWKcLength, len(wkc))
	}
	if n := int(binary.BigEndian.Uint16(wkc[len(wkc)-2:])); n != len(wkc) {
		return fmt.Errorf("%w: length field %d, %d bytes", ErrWKcLength, n, len(wkc))
	}
	return nil
}

// TimestampMetadata is the metadata `openvpn --genkey tls-crypt-v2-client`
// writes without user metadata: the time of generation.
func TimestampMetadata(t time.Time) []byte {
	return binary.BigEndian.AppendUint64([]byte{MetadataTimestamp}, uint64(t.Unix()))
}

// UserMetadata is user metadata given to `openvpn --genkey
// tls-crypt-v2-client FILE BASE64` as base64.
func UserMetadata(b64 string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("tls-crypt-v2 metadata: not base64: %v", err)
	}
	if len(b)+1 > MaxMetadataLen {
		return nil, fmt.Errorf("tls-crypt-v2 metadata: %d bytes, at most %d", len(b), MaxMetadataLen-1)
	}
	return append([]byte{MetadataUser}, b...), nil
}

// NewClientKey generates a client key with metadata (type byte first:
// UserMetadata or TimestampMetadata) wrapped by k.
func (k *V2ServerKey) NewClientKey(metadata []byte) (*V2ClientKey, error) {
	c := &V2ClientKey{}
	if _, err := rand.Read(c.Key[:]); err != nil {
		return nil, err
	}
	wkc, err := k.WrapClientKey(&c.Key, metadata)
	if err != nil {
		return nil, err
	}
	c.WKc = wkc
	return c, nil
}

// WrapClientKey wraps kc and metadata into a WKc.
func (k *V2ServerKey) WrapClientKey(kc *StaticKey, metadata []byte) ([]byte, error) {
	if len(metadata) > MaxMetadataLen {
		return nil, fmt.Errorf("tls-crypt-v2 metadata: %d bytes, at most %d", len(metadata), MaxMetadataLen)
	}
	n := cryptTag + StaticKeyLen + len(metadata) + 2
	var l [2]byte
	binary.BigEndian.PutUint16(l[:], uint16(n))
	m := hmac.New(sha256.New, k.ka())
	m.Write(l[:])
	m.Write(kc[:])
	m.Write(metadata)
	out := m.Sum(make([]byte, 0, n))
	out = append(out, kc[:]...)
	out = append(out, metadata...)
	b, err := aes.NewCipher(k.ke())
	if err != nil {
		return nil, err
	}
	cipher.NewCTR(b, out[:16]).XORKeyStream(out[cryptTag:], out[cryptTag:])
	return append(out, l[:]...), nil
}

// UnwrapClientKey checks and decrypts a WKc, returning the client's key
// and its metadata (type byte first).
func (k *V2ServerKey) UnwrapClientKey(wkc []byte) (*StaticKey, []byte, error) {
	if err := checkWKcLength(wkc); err != nil {
		return nil, nil, err
	}
	tag := wkc[:cryptTag]
	plain := make([]byte, len(wkc)-cryptTag-2)
	defer clear(plain)
	b, err := aes.NewCipher(k.ke())
	if err != nil {
		return nil, nil, err
	}
	cipher.NewCTR(b, tag[:16]).XORKeyStream(plain, wkc[cryptTag:len(wkc)-2])
	m := hmac.New(sha256.New, k.ka())
	m.Write(wkc[len(wkc)-2:])
	m.Write(plain)
	if !hmac.Equal(tag, m.Sum(nil)) {
		return nil, nil, ErrWKcAuth
	}
	var kc StaticKey
	copy(kc[:], plain)
	return &kc, append([]byte(nil), plain[StaticKeyLen:]...), nil
}

// SplitWKc splits a HARD_RESET_CLIENT_V3 or CONTROL_WKC_V1 packet into
// the tls-crypt packet and the WKc appended to it, by the WKc's trailing
// length field.
func SplitWKc(pkt []byte) (head, wkc []byte, err error) {
	if len(pkt) < hdrLen+8+cryptTag+minWKcLen {
		return nil, nil, ErrShort
	}
	n := int(binary.BigEndian.Uint16(pkt[len(pkt)-2:]))
	if n < minWKcLen || n > MaxWKcLen || n > len(pkt)-(hdrLen+8+cryptTag) {
		return nil, nil, fmt.Errorf("%w: length field %d in a %d-byte packet", ErrWKcLength, n, len(pkt))
	}
	return pkt[:len(pkt)-n], pkt[len(pkt)-n:], nil
}

// DescribeMetadata formats metadata for logs and allow-lists: "user
// BASE64" (the form given to --genkey), "timestamp RFC3339" or "type N
// BASE64".
func DescribeMetadata(md []byte) string {
	switch {
	case len(md) == 0:
		return "none"
	case md[0] == MetadataUser:
		return "user " + base64.StdEncoding.EncodeToString(md[1:])
	case md[0] == MetadataTimestamp && len(md) == 9:
		return "timestamp " + time.Unix(int64(binary.BigEndian.Uint64(md[1:])), 0).UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("type %d %s", md[0], base64.StdEncoding.EncodeToString(md[1:]))
}

// MetadataTime returns the generation time in timestamp metadata.
func MetadataTime(md []byte) (time.Time, bool) {
	if len(md) != 9 || md[0] != MetadataTimestamp {
		return time.Time{}, false
	}
	return time.Unix(int64(binary.BigEndian.Uint64(md[1:])), 0), true
}

// decodePEM returns the bytes of the one PEM block of type typ in text.
// Text before it is skipped, as OpenSSL's PEM reader does (comments);
// anything but white space after it is an error.
func decodePEM(text []byte, typ string) ([]byte, error) {
	begin := []byte("-----BEGIN " + typ + "-----")
	i := bytes.Index(text, begin)
	if i < 0 {
		return nil, fmt.Errorf("%s: no %q line", typ, begin)
	}
	line := 1 + bytes.Count(text[:i], []byte("\n"))
	blk, rest := pem.Decode(text[i:])
	if blk == nil || blk.Type != typ {
		return nil, fmt.Errorf("%s: line %d: malformed PEM block (bad base64 or no \"-----END %s-----\" line)", typ, line, typ)
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, fmt.Errorf("%s: data after the END line", typ)
	}
	if len(blk.Headers) != 0 {
		return nil, fmt.Errorf("%s: unexpected PEM headers", typ)
	}
	return blk.Bytes, nil
}

func encodePEM(typ string, b []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})
}
