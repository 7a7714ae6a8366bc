package noise

import (
	"bytes"
	"crypto/hmac"
	"encoding/hex"
	"hash"
	"testing"

	"golang.org/x/crypto/blake2s"
	"golang.org/x/crypto/chacha20poly1305"
)

func TestBlake2sRFC7693(t *testing.T) {
	// RFC 7693 appendix B: BLAKE2s-256("abc").
	want := "508c5e8c327c14e2e1a72ba34eeb452f37458b209ed63a294d999b4c86675982"
	if got := blake2sSum([]byte("abc")); hex.EncodeToString(got[:]) != want {
		t.Errorf("HASH(abc) = %x, want %s", got, want)
	}
	// mixedHash is HASH(a || b) for short and long b alike.
	var h [32]byte
	copy(h[:], "0123456789abcdef0123456789abcdef")
	for _, n := range []int{0, 1, 32, 48, 64, 65, 200} {
		data := bytes.Repeat([]byte{byte(n)}, n)
		want := blake2s.Sum256(append(h[:], data...))
		if got := mixedHash(&h, data); got != want {
			t.Errorf("mixedHash with %d bytes = %x, want %x", n, got, want)
		}
	}
}

func TestInitialValues(t *testing.T) {
	// Published in the whitepaper's reference implementations: the initial
	// chaining key is HASH("Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s").
	ck := blake2s.Sum256([]byte("Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s"))
	if ck != initialChainKey {
		t.Fatal("initial chaining key")
	}
	if want := "60e26daef327efc02ec335e2a025d2d016eb4206f87277f52d38d1988b78cd36"; hex.EncodeToString(ck[:]) != want {
		t.Errorf("initial chaining key = %x, want %s", ck, want)
	}
	h := blake2s.Sum256(append(ck[:], "WireGuard v1 zx2c4 Jason@zx2c4.com"...))
	if h != initialHash {
		t.Error("initial hash")
	}
}

func refHMAC(key, data []byte) []byte {
	m := hmac.New(func() hash.Hash { d, _ := blake2s.New256(nil); return d }, key)
	m.Write(data)
	return m.Sum(nil)
}

func TestHMACMatchesCryptoHMAC(t *testing.T) {
	var key [32]byte
	for i := range key {
		key[i] = byte(i*7 + 1)
	}
	for n := 0; n <= 64; n++ {
		data := bytes.Repeat([]byte{0xa5 ^ byte(n)}, n)
		got := hmacBlake2s(&key, data)
		if want := refHMAC(key[:], data); !bytes.Equal(got[:], want) {
			t.Fatalf("hmac with %d bytes = %x, want %x", n, got, want)
		}
	}
}

func TestKDFMatchesDefinition(t *testing.T) {
	// KDFn(C, X): T0 = HMAC(C, X); T1 = HMAC(T0, 0x1); Ti = HMAC(T0, Ti-1 || i).
	var c [32]byte
	copy(c[:], "chaining key chaining key chain!")
	x := []byte("input keying material")
	t0 := refHMAC(c[:], x)
	t1 := refHMAC(t0, []byte{1})
	t2 := refHMAC(t0, append(append([]byte(nil), t1...), 2))
	t3 := refHMAC(t0, append(append([]byte(nil), t2...), 3))

	ck := c
	kdf1(&ck, x)
	if !bytes.Equal(ck[:], t1) {
		t.Error("kdf1")
	}
	var a, b [32]byte
	ck = c
	kdf2(&ck, &a, x)
	if !bytes.Equal(ck[:], t1) || !bytes.Equal(a[:], t2) {
		t.Error("kdf2")
	}
	ck = c
	kdf3(&ck, &a, &b, x)
	if !bytes.Equal(ck[:], t1) || !bytes.Equal(a[:], t2) || !bytes.Equal(b[:], t3) {
		t.Error("kdf3")
	}
}

func TestMACIsKeyedBlake2s128(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	d, _ := blake2s.New128(key)
	d.Write([]byte("hello "))
	d.Write([]byte("world"))
	want := d.Sum(nil)
	var got [16]byte
	mac(&got, key, []byte("hello world"))
	if !bytes.Equal(got[:], want) {
		t.Errorf("mac = %x, want %x", got, want)
	}
	km := newKeyedMAC(key)
	for i := 0; i < 3; i++ { // pooled digests must be reset between uses
		var pooled [16]byte
		km.sum(&pooled, []byte("hello world"))
		if pooled != got {
			t.Fatalf("pooled mac round %d = %x, want %x", i, pooled, got)
		}
	}
}

func TestChaCha20Poly1305RFC8439(t *testing.T) {
	// RFC 8439 section 2.8.2.
	plaintext := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	aad, _ := hex.DecodeString("50515253c0c1c2c3c4c5c6c7")
	key, _ := hex.DecodeString("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
	nonce, _ := hex.DecodeString("070000004041424344454647")
	want, _ := hex.DecodeString("" +
		"d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6" +
		"3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36" +
		"92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc" +
		"3ff4def08e4b7a9de576d26586cec64b6116" +
		"1ae10b594f09e26a7e902ecbd0600691")
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		t.Fatal(err)
	}
	got := aead.Seal(nil, nonce, plaintext, aad)
	if !bytes.Equal(got, want) {
		t.Fatalf("seal =\n%x\nwant\n%x", got, want)
	}
	pt, err := aead.Open(nil, nonce, got, aad)
	if err != nil || !bytes.Equal(pt, plaintext) {
		t.Fatalf("open: %v", err)
	}
	got[0] ^= 1
	if _, err := aead.Open(nil, nonce, got, aad); err == nil {
		t.Fatal("tampered ciphertext opened")
	}
}

func refMAC(key, data []byte) []byte {
	d, err := blake2s.New128(key)
	if err != nil {
		panic(err)
	}
	d.Write(data)
	return d.Sum(nil)
}

func TestMACMatchesXCrypto(t *testing.T) {
	for _, klen := range []int{1, 16, 31, 32} {
		key := bytes.Repeat([]byte{byte(klen)}, klen)
		for n := 0; n <= 200; n++ {
			data := make([]byte, n)
			for i := range data {
				data[i] = byte(i*31 + n)
			}
			var got [16]byte
			mac(&got, key, data)
			if want := refMAC(key, data); !bytes.Equal(got[:], want) {
				t.Fatalf("key %d bytes, data %d bytes: %x, want %x", klen, n, got, want)
			}
		}
	}
}

func FuzzMAC(f *testing.F) {
	f.Add([]byte("key"), []byte("data"))
	f.Add(bytes.Repeat([]byte{7}, 32), bytes.Repeat([]byte{1}, 148))
	f.Fuzz(func(t *testing.T, key, data []byte) {
		if len(key) == 0 || len(key) > 32 {
			return
		}
		var got [16]byte
		mac(&got, key, data)
		if want := refMAC(key, data); !bytes.Equal(got[:], want) {
			t.Fatalf("mac(%x, %x) = %x, want %x", key, data, got, want)
		}
	})
}
