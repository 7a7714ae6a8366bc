// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

package chachapoly

import (
	"bytes"
	"crypto/cipher"
	"encoding/hex"
	"math/big"
	"math/rand/v2"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// requireKernel skips tests that only mean something with the AVX-512
// kernel, and lets the kernel take every length while the test runs.
func requireKernel(t testing.TB) {
	t.Helper()
	if !haveKernel {
		t.Skip("no AVX-512 on this CPU: New returns x/crypto's implementation, tested upstream")
	}
	old := kernelMin
	kernelMin = 0
	t.Cleanup(func() { kernelMin = old })
}

func pair(t testing.TB, key []byte) (ours, ref cipher.AEAD) {
	t.Helper()
	ours, err := New(key)
	if err != nil {
		t.Fatal(err)
	}
	ref, err = chacha20poly1305.New(key)
	if err != nil {
		t.Fatal(err)
	}
	return ours, ref
}

// TestRFC8439Vector is the AEAD example of RFC 8439, section 2.8.2.
func TestRFC8439Vector(t *testing.T) {
	requireKernel(t)
	unhex := func(s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	key := unhex("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
	nonce := unhex("070000004041424344454647")
	ad := unhex("50515253c0c1c2c3c4c5c6c7")
	pt := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	want := unhex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116" +
		"1ae10b594f09e26a7e902ecbd0600691")
	a, _ := pair(t, key)
	got := a.Seal(nil, nonce, pt, ad)
	if !bytes.Equal(got, want) {
		t.Fatalf("Seal:\n got %x\nwant %x", got, want)
	}
	back, err := a.Open(nil, nonce, got, ad)
	if err != nil || !bytes.Equal(back, pt) {
		t.Fatalf("Open: %v, %q", err, back)
	}
}

// TestMatchesXCrypto compares Seal and Open with x/crypto's on every length
// up to a few kernel calls, with and without additional data, in place and
// into a separate buffer.
func TestMatchesXCrypto(t *testing.T) {
	requireKernel(t)
	rng := rand.New(rand.NewPCG(1, 2))
	key := make([]byte, KeySize)
	nonce := make([]byte, NonceSize)
	for n := 0; n <= 3*kernelBytes+40; n++ {
		fill(rng, key)
		fill(rng, nonce)
		a, ref := pair(t, key)
		pt := make([]byte, n)
		fill(rng, pt)
		ad := make([]byte, rng.IntN(3)*rng.IntN(40))
		fill(rng, ad)
		want := ref.Seal(nil, nonce, pt, ad)

		got := a.Seal([]byte("prefix"), nonce, pt, ad)
		if !bytes.Equal(got[6:], want) || string(got[:6]) != "prefix" {
			t.Fatalf("n=%d ad=%d: Seal differs from x/crypto", n, len(ad))
		}
		buf := make([]byte, n, n+Overhead)
		copy(buf, pt)
		if got := a.Seal(buf[:0], nonce, buf, ad); !bytes.Equal(got, want) {
			t.Fatalf("n=%d ad=%d: in-place Seal differs from x/crypto", n, len(ad))
		}
		back, err := a.Open(nil, nonce, want, ad)
		if err != nil || !bytes.Equal(back, pt) {
			t.Fatalf("n=%d ad=%d: Open: %v", n, len(ad), err)
		}
		in := bytes.Clone(want)
		back, err = a.Open(in[:0], nonce, in, ad)
		if err != nil || !bytes.Equal(back, pt) {
			t.Fatalf("n=%d ad=%d: in-place Open: %v", n, len(ad), err)
		}
	}
}

// TestOpenRejectsTampering flips one bit anywhere in the ciphertext, the
// tag or the additional data and expects an error and no plaintext out.
func TestOpenRejectsTampering(t *testing.T) {
	requireKernel(t)
	rng := rand.New(rand.NewPCG(3, 4))
	key := make([]byte, KeySize)
	nonce := make([]byte, NonceSize)
	fill(rng, key)
	fill(rng, nonce)
	a, _ := pair(t, key)
	for _, n := range []int{0, 1, 15, 16, 64, 959, 960, 961, 1420, 2048, 3000} {
		pt := make([]byte, n)
		fill(rng, pt)
		ad := []byte("header")
		sealed := a.Seal(nil, nonce, pt, ad)
		for trial := 0; trial < 64; trial++ {
			ct, ad2 := bytes.Clone(sealed), bytes.Clone(ad)
			if i := rng.IntN(len(ct) + len(ad2)); i < len(ct) {
				ct[i] ^= 1 << rng.IntN(8)
			} else {
				ad2[i-len(ct)] ^= 1 << rng.IntN(8)
			}
			out := bytes.Repeat([]byte{0xAA}, n)
			if _, err := a.Open(out[:0], nonce, ct, ad2); err == nil {
				t.Fatalf("n=%d: tampered message accepted", n)
			}
			// No plaintext may leak: the output is left alone (the IFMA
			// path authenticates before it decrypts) or zeroed.
			if !bytes.Equal(out, make([]byte, n)) && !bytes.Equal(out, bytes.Repeat([]byte{0xAA}, n)) {
				t.Fatalf("n=%d: output neither untouched nor zeroed after a failed Open", n)
			}
		}
		if _, err := a.Open(nil, nonce[:NonceSize], sealed[:Overhead-1], ad); err == nil {
			t.Fatalf("short message accepted")
		}
	}
}

// TestPolyCarries drives the accumulator through its largest values (all
// bits of every block set) and checks the tag against x/crypto's.
func TestPolyCarries(t *testing.T) {
	requireKernel(t)
	for _, keyByte := range []byte{0x00, 0xFF, 0x80} {
		key := bytes.Repeat([]byte{keyByte}, KeySize)
		nonce := bytes.Repeat([]byte{keyByte}, NonceSize)
		a, ref := pair(t, key)
		for _, n := range []int{16, 960, 1420, 4096} {
			// Ciphertext of all ones: find the plaintext that encrypts to it.
			ones := bytes.Repeat([]byte{0xFF}, n)
			ks := ref.Seal(nil, nonce, make([]byte, n), nil)[:n]
			pt := make([]byte, n)
			for i := range pt {
				pt[i] = ones[i] ^ ks[i]
			}
			ad := bytes.Repeat([]byte{0xFF}, 48)
			if got, want := a.Seal(nil, nonce, pt, ad), ref.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
				t.Fatalf("key %#x n=%d: tag differs from x/crypto", keyByte, n)
			}
		}
	}
}

func TestOverlapPanics(t *testing.T) {
	requireKernel(t)
	a, _ := pair(t, make([]byte, KeySize))
	buf := make([]byte, 2000)
	defer func() {
		if recover() == nil {
			t.Fatal("Seal into a buffer shifted by one byte from its input did not panic")
		}
	}()
	a.Seal(buf[1:1], make([]byte, NonceSize), buf[:1500], nil)
}

// FuzzMatchesXCrypto compares both directions with x/crypto on arbitrary
// keys, nonces, messages and additional data.
func FuzzMatchesXCrypto(f *testing.F) {
	requireKernel(f)
	f.Add(make([]byte, KeySize), make([]byte, NonceSize), []byte("hello"), []byte{}, uint16(0))
	f.Add(bytes.Repeat([]byte{1}, KeySize), bytes.Repeat([]byte{2}, NonceSize), make([]byte, 1420), []byte("ad"), uint16(700))
	f.Fuzz(func(t *testing.T, key, nonce, pt, ad []byte, flip uint16) {
		if len(key) != KeySize || len(nonce) != NonceSize {
			return
		}
		a, ref := pair(t, key)
		want := ref.Seal(nil, nonce, pt, ad)
		got := a.Seal(nil, nonce, pt, ad)
		if !bytes.Equal(got, want) {
			t.Fatalf("Seal differs from x/crypto")
		}
		got[int(flip)%len(got)] ^= 0x10
		_, errOurs := a.Open(nil, nonce, got, ad)
		_, errRef := ref.Open(nil, nonce, got, ad)
		if (errOurs == nil) != (errRef == nil) || errOurs == nil {
			t.Fatalf("tampered Open: ours %v, x/crypto %v", errOurs, errRef)
		}
	})
}

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// TestAbsorbFullMatchesScalar checks the IFMA kernel against the scalar
// Poly1305 code on random keys, starting accumulators and lengths.
func TestAbsorbFullMatchesScalar(t *testing.T) {
	requireKernel(t)
	if !haveIFMA {
		t.Skip("no AVX-512 IFMA on this CPU")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 2000; trial++ {
		key := make([]byte, 32)
		fill(rng, key)
		if trial%7 == 0 {
			for i := range key[:16] {
				key[i] = 0xFF // the largest clamped r
			}
		}
		msg := make([]byte, 16*rng.IntN(200))
		fill(rng, msg)
		if trial%5 == 0 {
			for i := range msg {
				msg[i] = 0xFF
			}
		}
		// A nonzero starting accumulator, as additional data leaves it.
		start := make([]byte, 16*rng.IntN(3))
		fill(rng, start)
		checkLanes(t, key, start, msg)
	}
}

// checkLanes absorbs start (padded) and then msg (full blocks) with the
// IFMA lanes and with the scalar code, and compares the tags.
func checkLanes(t *testing.T, key, start, msg []byte) {
	t.Helper()
	var vec, ref polyState
	vec.setKey(key)
	ref.setKey(key)
	vec.absorbPadded(start)
	ref.absorbPadded(start)
	if rest := vec.absorbFull(msg); len(rest) != 0 {
		t.Fatalf("absorbFull left %d bytes of full blocks", len(rest))
	}
	if len(msg) > 0 {
		polyBlocks(&ref, &msg[0], len(msg)/16)
	}
	var a, b [16]byte
	vec.sum(a[:])
	ref.sum(b[:])
	if a != b {
		t.Fatalf("%d blocks after %d bytes: IFMA tag %x, scalar %x", len(msg)/16, len(start), a, b)
	}
}

// withScalarPoly runs f with the IFMA Poly1305 kernel turned off, so the
// fused ChaCha20/scalar-Poly1305 path is tested on machines that have IFMA.
func withScalarPoly(t *testing.T, f func(t *testing.T)) {
	old := haveIFMA
	haveIFMA = false
	defer func() { haveIFMA = old }()
	f(t)
}

func TestFusedPathMatchesXCrypto(t *testing.T) {
	withScalarPoly(t, TestMatchesXCrypto)
	withScalarPoly(t, TestOpenRejectsTampering)
	withScalarPoly(t, TestPolyCarries)
}

// TestNewUsesKernel makes sure the kernels are what New hands out wherever
// the CPU has them, so that the tests above test what the data path runs.
func TestNewUsesKernel(t *testing.T) {
	a, err := New(make([]byte, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	_, isKernel := a.(*aead)
	if isKernel != haveKernel || (Mode() == "generic") == haveKernel {
		t.Fatalf("haveKernel %v, New returned %T", haveKernel, a)
	}
	if _, err := New(make([]byte, KeySize-1)); err == nil {
		t.Fatal("New accepted a 31-byte key")
	}
	t.Logf("AVX-512 kernel: %v, IFMA Poly1305: %v", haveKernel, haveIFMA)
}

func TestSetMode(t *testing.T) {
	defer SetMode("auto")
	if err := SetMode("generic"); err != nil {
		t.Fatal(err)
	}
	if a, _ := New(make([]byte, KeySize)); Mode() != "generic" {
		t.Fatalf("generic mode: Mode() = %q", Mode())
	} else if _, isKernel := a.(*aead); isKernel {
		t.Fatal("generic mode: New returned the kernel")
	}
	if err := SetMode("fast"); err == nil {
		t.Fatal(`SetMode("fast") accepted`)
	}
	if err := SetMode(""); err != nil || haveKernel != cpuKernel || haveIFMA != cpuIFMA {
		t.Fatalf("auto mode: %v, kernel %v (cpu %v), ifma %v (cpu %v)", err, haveKernel, cpuKernel, haveIFMA, cpuIFMA)
	}
}

// FuzzPolyLanes compares the IFMA Poly1305 lanes with the scalar code on
// arbitrary keys, starting accumulators and messages.
func FuzzPolyLanes(f *testing.F) {
	requireKernel(f)
	if !haveIFMA {
		f.Skip("no AVX-512 IFMA on this CPU")
	}
	f.Add(bytes.Repeat([]byte{0xFF}, 32), []byte{}, bytes.Repeat([]byte{0xFF}, 512))
	f.Add(make([]byte, 32), []byte("additional"), make([]byte, 1408))
	f.Fuzz(func(t *testing.T, key, start, msg []byte) {
		if len(key) != 32 {
			return
		}
		checkLanes(t, key, start, msg[:len(msg)&^15])
	})
}

// p1305 is the Poly1305 prime, 2^130 - 5.
var p1305 = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 130), big.NewInt(5))

func bigState(h [3]uint64) *big.Int {
	v := new(big.Int).SetUint64(h[2])
	v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(h[1]))
	return v.Lsh(v, 64).Or(v, new(big.Int).SetUint64(h[0]))
}

// TestPolyAgainstBigInt checks both Poly1305 implementations against
// arithmetic with math/big at the extremes: the largest clamped r, all-ones
// blocks, and accumulators carried over from earlier blocks. The scalar
// accumulator must also stay below 2p, which the final reduction assumes.
func TestPolyAgainstBigInt(t *testing.T) {
	requireKernel(t)
	rng := rand.New(rand.NewPCG(7, 8))
	twoP := new(big.Int).Lsh(p1305, 1)
	for trial := 0; trial < 300; trial++ {
		key := make([]byte, 32)
		fill(rng, key)
		if trial%2 == 0 {
			copy(key, bytes.Repeat([]byte{0xFF}, 16)) // clamps to the largest r
		}
		msg := make([]byte, 16*rng.IntN(80))
		if trial%3 != 0 {
			for i := range msg {
				msg[i] = 0xFF
			}
		} else {
			fill(rng, msg)
		}
		start := bytes.Repeat([]byte{0xFF}, 16*rng.IntN(3))

		var ref polyState
		ref.setKey(key)
		r := bigState([3]uint64{ref.r[0], ref.r[1], 0})
		want := new(big.Int)
		hibit := new(big.Int).Lsh(big.NewInt(1), 128)
		for _, b := range [][]byte{start, msg} {
			for i := 0; i+16 <= len(b); i += 16 {
				m := new(big.Int).SetBytes(reverse(b[i : i+16]))
				want.Add(want, m).Add(want, hibit).Mul(want, r).Mod(want, p1305)
			}
		}
		for _, ifma := range []bool{false, true} {
			if ifma && !haveIFMA {
				continue
			}
			var p polyState
			p.setKey(key)
			p.absorbPadded(start)
			if ifma {
				p.absorbFull(msg)
			} else if len(msg) > 0 {
				polyBlocks(&p, &msg[0], len(msg)/16)
			}
			got := bigState(p.h)
			if got.Cmp(twoP) >= 0 {
				t.Fatalf("trial %d (ifma %v): accumulator %x not below 2p", trial, ifma, got)
			}
			if got.Mod(got, p1305).Cmp(want) != 0 {
				t.Fatalf("trial %d (ifma %v), %d blocks: h mod p = %x, want %x", trial, ifma, len(msg)/16, got, want)
			}
		}
	}
}

// TestSumEdges checks the final reduction and the pad at accumulators
// around p and just below 2p.
func TestSumEdges(t *testing.T) {
	for _, h := range []*big.Int{
		new(big.Int).Sub(p1305, big.NewInt(1)), p1305, new(big.Int).Add(p1305, big.NewInt(1)),
		new(big.Int).Sub(new(big.Int).Lsh(p1305, 1), big.NewInt(1)), big.NewInt(0),
	} {
		for _, s := range [][2]uint64{{0, 0}, {^uint64(0), ^uint64(0)}, {1, 1 << 63}} {
			var p polyState
			words := new(big.Int).Set(h)
			for i := range p.h {
				p.h[i] = new(big.Int).And(words, new(big.Int).SetUint64(^uint64(0))).Uint64()
				words.Rsh(words, 64)
			}
			p.s = s
			var tag [16]byte
			p.sum(tag[:])
			want := new(big.Int).Mod(h, p1305)
			want.Add(want, bigState([3]uint64{s[0], s[1], 0}))
			want.And(want, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 128), big.NewInt(1)))
			if got := new(big.Int).SetBytes(reverse(tag[:])); got.Cmp(want) != 0 {
				t.Fatalf("h=%x s=%x: tag %x, want %x", h, s, got, want)
			}
		}
	}
}

// reverse returns b's bytes in the opposite order (little to big endian).
func reverse(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[len(b)-1-i] = b[i]
	}
	return out
}
