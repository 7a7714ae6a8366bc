// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

package chachapoly

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestXorIntoMatchesXORBytes compares xorInto with crypto/subtle.XORBytes on
// every length up to a few kernel calls, at every alignment within a word,
// in place and into a separate buffer, and checks that the masked tail
// writes no byte past the message (the guard bytes after dst stay).
func TestXorIntoMatchesXORBytes(t *testing.T) {
	if !haveXOR512 {
		t.Log("no AVX-512BW: xorInto is crypto/subtle.XORBytes, compared with itself")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	const guard = 80
	const most = 3*kernelBytes + 70
	src, ks := make([]byte, most+8+guard), make([]byte, most+8+guard)
	fill(rng, src)
	fill(rng, ks)
	pattern := make([]byte, len(src))
	fill(rng, pattern)
	want := make([]byte, most)
	dst := make([]byte, len(src))
	for n := 0; n <= most; n++ {
		for _, align := range []int{0, 1, 3, 7} {
			subtle.XORBytes(want[:n], src[align:align+n], ks[align:align+n])

			copy(dst, pattern)
			xorInto(dst[align:align+n], src[align:align+n], ks[align:align+n])
			if !bytes.Equal(dst[align:align+n], want[:n]) {
				t.Fatalf("n=%d align=%d: xorInto differs from XORBytes", n, align)
			}
			if !bytes.Equal(dst[:align], pattern[:align]) || !bytes.Equal(dst[align+n:], pattern[align+n:]) {
				t.Fatalf("n=%d align=%d: xorInto wrote outside dst", n, align)
			}

			copy(dst, src)
			xorInto(dst[align:align+n], dst[align:align+n], ks[align:align+n])
			if !bytes.Equal(dst[align:align+n], want[:n]) {
				t.Fatalf("n=%d align=%d: in-place xorInto differs from XORBytes", n, align)
			}
			if !bytes.Equal(dst[align+n:], src[align+n:]) {
				t.Fatalf("n=%d align=%d: in-place xorInto wrote past the message", n, align)
			}
		}
	}
}

// TestXORBytesPathMatchesXCrypto runs the AEAD's differential and
// tampering tests with the keystream applied by crypto/subtle.XORBytes,
// the path of a CPU with AVX-512F but not BW, on both Poly1305 paths.
func TestXORBytesPathMatchesXCrypto(t *testing.T) {
	old := haveXOR512
	haveXOR512 = false
	defer func() { haveXOR512 = old }()
	TestMatchesXCrypto(t)
	TestOpenRejectsTampering(t)
	withScalarPoly(t, TestMatchesXCrypto)
}

// BenchmarkXorInto is the keystream XOR at the lengths a 1420-byte
// packet's open and seal apply (960 bytes after the first kernel call,
// 464 after the second), with AVX-512BW and with crypto/subtle.XORBytes.
func BenchmarkXorInto(b *testing.B) {
	for _, n := range []int{960, 464} {
		src, ks := make([]byte, n), make([]byte, n)
		for _, path := range []struct {
			name string
			on   bool
		}{{"avx512", haveXOR512}, {"subtle", false}} {
			if path.name == "avx512" && !haveXOR512 {
				continue
			}
			b.Run(fmt.Sprintf("%d/%s", n, path.name), func(b *testing.B) {
				old := haveXOR512
				haveXOR512 = path.on
				defer func() { haveXOR512 = old }()
				b.SetBytes(int64(n))
				for b.Loop() {
					xorInto(src, src, ks)
				}
			})
		}
	}
}
