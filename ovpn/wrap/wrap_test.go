package wrap

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
)

func testKey(seed byte) *StaticKey {
	var k StaticKey
	for i := range k {
		k[i] = seed + byte(i*7)
	}
	return &k
}

var plain = append([]byte{0x20, 1, 2, 3, 4, 5, 6, 7, 8}, []byte("\x00\x00\x00\x00\x05rest of a control packet")...)

func TestTLSAuthRoundTripAndLayout(t *testing.T) {
	k := testKey(1)
	cli, srv := NewTLSAuth(k, Direction1, sha1.New), NewTLSAuth(k, Direction0, sha1.New)
	w, err := cli.Wrap(nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != len(plain)+20+8 {
		t.Fatalf("wrapped length %d", len(w))
	}
	// Independent check: client HMAC key is half 1's hmac area, over
	// pid|time|op|sid|rest.
	m := hmac.New(sha1.New, k[192:192+20])
	m.Write(w[29:37])
	m.Write(plain[:9])
	m.Write(plain[9:])
	if !bytes.Equal(m.Sum(nil), w[9:29]) {
		t.Fatal("HMAC differs from the reference computation")
	}
	got, err := srv.Unwrap(nil, w)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("unwrap: %x %v", got, err)
	}
	if _, err := srv.Unwrap(nil, w); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v", err)
	}
	if _, err := NewTLSAuth(testKey(2), Direction0, sha1.New).Unwrap(nil, w); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong key: %v", err)
	}
	if _, err := cli.Unwrap(nil, w); !errors.Is(err, ErrAuth) {
		t.Fatalf("own direction accepted: %v", err)
	}
	bi1, bi2 := NewTLSAuth(k, Bidirectional, sha256.New), NewTLSAuth(k, Bidirectional, sha256.New)
	w, _ = bi1.Wrap(nil, plain)
	if got, err := bi2.Unwrap(nil, w); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("bidirectional: %v", err)
	}
}

func TestTLSCryptRoundTripAndLayout(t *testing.T) {
	k := testKey(3)
	cli, _ := NewTLSCrypt(k, false)
	srv, _ := NewTLSCrypt(k, true)
	w, err := cli.Wrap(nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != len(plain)+8+32 || !bytes.Equal(w[:9], plain[:9]) {
		t.Fatalf("wrapped %x", w)
	}
	// Independent check: decrypt with half 1's cipher key, IV = tag[:16],
	// and recompute the tag with half 1's hmac key.
	b, _ := aes.NewCipher(k[128 : 128+32])
	rest := make([]byte, len(w)-49)
	cipher.NewCTR(b, w[17:33]).XORKeyStream(rest, w[49:])
	if !bytes.Equal(rest, plain[9:]) {
		t.Fatal("ciphertext differs from reference AES-256-CTR")
	}
	m := hmac.New(sha256.New, k[192:192+32])
	m.Write(w[:17])
	m.Write(rest)
	if !bytes.Equal(m.Sum(nil), w[17:49]) {
		t.Fatal("tag differs from reference HMAC-SHA256")
	}
	got, err := srv.Unwrap(nil, w)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("unwrap: %x %v", got, err)
	}
	if _, err := srv.Unwrap(nil, w); !errors.Is(err, ErrReplay) {
		t.Fatalf("replay: %v", err)
	}
	other, _ := NewTLSCrypt(testKey(4), true)
	if _, err := other.Unwrap(nil, w); !errors.Is(err, ErrAuth) {
		t.Fatalf("wrong key: %v", err)
	}
	w2, _ := srv.Wrap(nil, plain)
	if got, err := cli.Unwrap(nil, w2); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("server to client: %v", err)
	}
	if _, err := srv.Unwrap(nil, w[:20]); !errors.Is(err, ErrShort) {
		t.Fatalf("short: %v", err)
	}
}

func TestStaticKeyParse(t *testing.T) {
	k := testKey(9)
	text := append([]byte("#\n# 2048 bit OpenVPN static key\n#\n"), k.Format()...)
	got, err := ParseStaticKey(text)
	if err != nil || *got != *k {
		t.Fatalf("round trip: %v", err)
	}
	for name, bad := range map[string]string{
		"no begin":  "abcd\n",
		"no end":    staticBegin + "\n00\n",
		"not hex":   staticBegin + "\nzz\n" + staticEnd,
		"too short": staticBegin + "\n0011\n" + staticEnd,
		"trailing":  string(k.Format()) + "junk\n",
	} {
		if _, err := ParseStaticKey([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err = ParseStaticKey([]byte(staticBegin + "\nzz\n" + staticEnd))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("error lacks line: %v", err)
	}
}

func FuzzParseStaticKey(f *testing.F) {
	f.Add(testKey(1).Format())
	f.Add([]byte(staticBegin + "\n00\n" + staticEnd))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseStaticKey(b)
		if err == nil {
			if k2, err := ParseStaticKey(k.Format()); err != nil || *k2 != *k {
				t.Fatal("formatted key does not parse back")
			}
		}
	})
}

func FuzzUnwrap(f *testing.F) {
	cli, _ := NewTLSCrypt(testKey(1), false)
	w, _ := cli.Wrap(nil, plain)
	f.Add(w)
	f.Add(plain)
	f.Fuzz(func(t *testing.T, b []byte) {
		srv, _ := NewTLSCrypt(testKey(1), true)
		_, _ = srv.Unwrap(nil, b)
		_, _ = NewTLSAuth(testKey(1), Direction0, sha1.New).Unwrap(nil, b)
	})
}
