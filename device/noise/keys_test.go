package noise

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/crypto/curve25519"
)

func mustHex32(t testing.TB, s string) [32]byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		t.Fatalf("bad test hex %q", s)
	}
	return [32]byte(b)
}

// RFC 7748 section 6.1.
const (
	rfcAlicePriv = "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"
	rfcAlicePub  = "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"
	rfcBobPriv   = "5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"
	rfcBobPub    = "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"
	rfcShared    = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
)

func TestX25519RFC7748(t *testing.T) {
	a := PrivateKey(mustHex32(t, rfcAlicePriv))
	b := PrivateKey(mustHex32(t, rfcBobPriv))
	if got := hexKey(a.PublicKey()); got != rfcAlicePub {
		t.Errorf("Alice public = %s, want %s", got, rfcAlicePub)
	}
	if got := hexKey(b.PublicKey()); got != rfcBobPub {
		t.Errorf("Bob public = %s, want %s", got, rfcBobPub)
	}
	bobPub := [32]byte(b.PublicKey())
	alicePub := [32]byte(a.PublicKey())
	s1, err := dh(newECDHKey(&a), &bobPub)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := dh(newECDHKey(&b), &alicePub)
	if err != nil {
		t.Fatal(err)
	}
	if hexKey(s1) != rfcShared || hexKey(s2) != rfcShared {
		t.Errorf("shared secrets %x / %x, want %s", s1, s2, rfcShared)
	}
	// The same through golang.org/x/crypto/curve25519, as a cross-check of
	// the crypto/ecdh path used for speed.
	x, err := curve25519.X25519(a[:], bobPub[:])
	if err != nil || hex.EncodeToString(x) != rfcShared {
		t.Errorf("curve25519.X25519 = %x, %v", x, err)
	}
}

func TestX25519RFC7748SingleIteration(t *testing.T) {
	// RFC 7748 section 5.2, first test vector (unclamped scalar).
	k := PrivateKey(mustHex32(t, "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4"))
	u := mustHex32(t, "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c")
	got, err := dh(newECDHKey(&k), &u)
	if err != nil {
		t.Fatal(err)
	}
	if want := "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552"; hexKey(got) != want {
		t.Errorf("X25519 = %x, want %s", got, want)
	}
}

func TestDHRejectsLowOrderPoint(t *testing.T) {
	k, _ := GeneratePrivateKey()
	var zero [32]byte
	one := [32]byte{1}
	for _, p := range [][32]byte{zero, one} {
		if _, err := dh(newECDHKey(&k), &p); err == nil {
			t.Errorf("dh with low-order point %x succeeded", p[:2])
		}
	}
}

func TestWgPubkey(t *testing.T) {
	priv, err := ParseBase64Key("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=")
	if err != nil {
		t.Fatal(err)
	}
	pub := PrivateKey(priv).PublicKey()
	if got, want := Base64Key(pub), "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="; got != want {
		t.Errorf("pubkey = %s, want %s", got, want)
	}
	if got := NewLocal(PrivateKey(priv)).PublicKey(); got != pub {
		t.Errorf("Local public key %s differs from %s", got, pub)
	}
}

func TestClamp(t *testing.T) {
	var k PrivateKey
	for i := range k {
		k[i] = 0xff
	}
	k.Clamp()
	if k[0] != 0xf8 || k[31] != 0x7f {
		t.Errorf("clamp of all-ones: byte0=%#x byte31=%#x", k[0], k[31])
	}
	k = PrivateKey{}
	k.Clamp()
	if k[0] != 0 || k[31] != 0x40 {
		t.Errorf("clamp of zeros: byte0=%#x byte31=%#x", k[0], k[31])
	}
	for i := 0; i < 64; i++ {
		g, err := GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		if g[0]&7 != 0 || g[31]&0x80 != 0 || g[31]&0x40 == 0 {
			t.Fatalf("generated key not clamped: %x..%x", g[0], g[31])
		}
	}
	a, _ := GeneratePrivateKey()
	b, _ := GeneratePrivateKey()
	if a == b {
		t.Error("two generated keys are equal")
	}
	// Local clamps a copy.
	raw := PrivateKey(mustHex32(t, rfcAlicePriv))
	l := NewLocal(raw)
	c := raw
	c.Clamp()
	if l.PrivateKey() != c {
		t.Error("NewLocal did not clamp")
	}
	if hexKey(raw) != rfcAlicePriv {
		t.Error("NewLocal modified its argument")
	}
}

func TestGeneratePresharedKey(t *testing.T) {
	a, err := GeneratePresharedKey()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := GeneratePresharedKey()
	if a == b || a.IsZero() {
		t.Error("preshared keys not random")
	}
}

func TestIsZero(t *testing.T) {
	if !(PrivateKey{}).IsZero() || !(PublicKey{}).IsZero() || !(PresharedKey{}).IsZero() {
		t.Error("zero keys not reported zero")
	}
	if (PrivateKey{31: 1}).IsZero() || (PublicKey{0: 1}).IsZero() || (PresharedKey{16: 0x80}).IsZero() {
		t.Error("non-zero keys reported zero")
	}
}

func TestSecretsNotPrinted(t *testing.T) {
	k := PrivateKey(mustHex32(t, rfcAlicePriv))
	p := PresharedKey(mustHex32(t, rfcBobPriv))
	type holder struct {
		K PrivateKey
		P PresharedKey
	}
	for _, s := range []string{
		fmt.Sprint(k), fmt.Sprintf("%v %s %+v %#v", k, k, k, k),
		fmt.Sprint(p), fmt.Sprintf("%v %s %+v %#v", p, p, p, p),
		fmt.Sprintf("%v %+v %#v", holder{k, p}, holder{k, p}, holder{k, p}),
	} {
		for _, secret := range []string{rfcAlicePriv, rfcBobPriv, Base64Key(k), Base64Key(p), "119 7 109"} {
			if strings.Contains(s, secret) {
				t.Errorf("formatted output %q reveals a key", s)
			}
		}
	}
	if fmt.Sprint(k) != "[key]" || fmt.Sprintf("%x %d", k, k) != "[key] [key]" {
		t.Errorf("a Key prints %q and %q", fmt.Sprint(k), fmt.Sprintf("%x %d", k, k))
	}
	pub := PublicKey(mustHex32(t, rfcAlicePub))
	if pub.String() != "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=" {
		t.Errorf("PublicKey.String = %s", pub)
	}
}

func TestBase64RoundTripMatchesStdlib(t *testing.T) {
	for i := 0; i < 200; i++ {
		k, _ := GeneratePresharedKey()
		s := Base64Key(k)
		if want := base64.StdEncoding.EncodeToString(k[:]); s != want {
			t.Fatalf("Base64Key = %s, want %s", s, want)
		}
		got, err := ParseBase64Key(s)
		if err != nil || got != k {
			t.Fatalf("ParseBase64Key(%s) = %x, %v", s, got, err)
		}
	}
	// Every character of the alphabet in every position class.
	var all [32]byte
	for i := range all {
		all[i] = byte(i * 8)
	}
	if got := Base64Key(all); got != base64.StdEncoding.EncodeToString(all[:]) {
		t.Errorf("Base64Key = %s", got)
	}
}

func TestParseBase64KeyRejects(t *testing.T) {
	good := "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
	tests := []struct {
		name, in, wantErr string
	}{
		{"empty string", "", "0 characters"},
		{"missing padding", good[:43], "43 characters"},
		{"extra character", good + "=", "45 characters"},
		{"no padding character at the end", good[:43] + "A", "must end with '='"},
		{"url-safe alphabet", strings.Replace(good, "/", "_", 1), "position 24"},
		{"space inside", good[:10] + " " + good[11:], "position 11"},
		{"trailing newline instead of padding", good[:43] + "\n", "must end with '='"},
		{"double padding", good[:42] + "==", "position 43"},
		{"non-canonical trailing bits", good[:42] + "p=", "not canonical"},
		{"non-ascii", "é" + good[2:], "position 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParseBase64Key(tt.in)
			if err == nil {
				t.Fatalf("accepted %q", tt.in)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
			if k != ([32]byte{}) {
				t.Error("partial key returned with an error")
			}
		})
	}
}

func TestBase64CharTables(t *testing.T) {
	for v := uint32(0); v < 64; v++ {
		c := base64Char(v)
		if c != base64Alphabet[v] {
			t.Fatalf("base64Char(%d) = %q", v, c)
		}
		if base64Value(c) != int32(v) {
			t.Fatalf("base64Value(%q) = %d", c, base64Value(c))
		}
	}
	for c := 0; c < 256; c++ {
		if bytes.IndexByte([]byte(base64Alphabet), byte(c)) < 0 && base64Value(byte(c)) != -1 {
			t.Fatalf("base64Value(%#x) = %d, want -1", c, base64Value(byte(c)))
		}
	}
}

func FuzzParseBase64Key(f *testing.F) {
	f.Add("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=")
	f.Add("dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=")
	f.Add("")
	f.Add("hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmp=")
	f.Fuzz(func(t *testing.T, s string) {
		k, err := ParseBase64Key(s)
		std, stdErr := base64.StdEncoding.Strict().DecodeString(s)
		stdOK := stdErr == nil && len(std) == 32 && len(s) == 44 && !strings.ContainsAny(s, "\r\n")
		if (err == nil) != stdOK {
			t.Fatalf("ParseBase64Key(%q) err=%v but strict stdlib ok=%v", s, err, stdOK)
		}
		if err == nil && (!bytes.Equal(k[:], std) || Base64Key(k) != s) {
			t.Fatalf("ParseBase64Key(%q) = %x, stdlib %x", s, k, std)
		}
	})
}

// hexKey encodes k as the userspace protocol does (64 lowercase hex
// characters), for comparing with published vectors and wireguard-go.
func hexKey(k [KeySize]byte) string { return hex.EncodeToString(k[:]) }
