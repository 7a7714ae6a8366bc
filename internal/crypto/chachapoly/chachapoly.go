// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

// Package chachapoly is ChaCha20-Poly1305 (RFC 8439) for the data path, with
// an AVX-512 kernel that runs the cipher on sixteen blocks at once while the
// scalar unit runs Poly1305 beside it.
//
// Map of a Seal of n bytes on a CPU with AVX-512 IFMA (Open authenticates
// first and decrypts after, so nothing unauthenticated is ever written):
//
//	firstCall:     8 or 16 blocks -> Poly1305 key (block 0), keystream for bytes 0..447 or 0..959
//	xorKeyStream:  16 blocks (1024 bytes) per call, 8 for a last 512 bytes or less
//	absorbFull:    Poly1305 over the ciphertext, 8 blocks (128 bytes) per step, in 8 lanes
//	then:          Poly1305 over what is left, the lengths; the tag
//
// Without IFMA, each sixteen-block cipher call also runs scalar Poly1305
// over the ciphertext written before it (sealFused, openFused), so that the
// vector and the scalar units work at the same time.
//
// Messages shorter than kernelMin, longer than kernelMax, and every message
// on a CPU without AVX-512 go to golang.org/x/crypto/chacha20poly1305, which
// is also the reference the tests compare against.
package chachapoly

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"unsafe"

	"golang.org/x/crypto/chacha20poly1305"
)

const (
	// KeySize is the size of a key in bytes.
	KeySize = chacha20poly1305.KeySize
	// NonceSize is the size of a nonce in bytes.
	NonceSize = chacha20poly1305.NonceSize
	// Overhead is the size of the tag in bytes.
	Overhead = chacha20poly1305.Overhead

	// kernelBytes is the keystream one kernel call writes: sixteen blocks.
	kernelBytes = 16 * 64
	// firstBytes is the keystream the first call leaves for the message:
	// its block 0 becomes the Poly1305 key.
	firstBytes = kernelBytes - 64
	// kernelMax keeps the 32-bit block counter of every lane far from
	// wrapping; the data path never comes near it.
	kernelMax = 1 << 30
)

// kernelMin is the shortest message the kernel takes: below it, sixteen
// blocks of keystream cost more than x/crypto's narrower code.
var kernelMin = 256

var errOpen = errors.New("chachapoly: message authentication failed")

// aead is the kernel's cipher.AEAD. It holds no mutable state, so one value
// may be used by many goroutines at once.
type aead struct {
	key      [8]uint32
	ifma     bool        // Poly1305 in IFMA lanes (the split path), fixed at New
	fallback cipher.AEAD // x/crypto, for the messages the kernel does not take
}

// New returns ChaCha20-Poly1305 with the 32-byte key. On a CPU without
// AVX-512 it is golang.org/x/crypto/chacha20poly1305's.
func New(key []byte) (cipher.AEAD, error) {
	fallback, err := chacha20poly1305.New(key)
	if err != nil || !haveKernel {
		return fallback, err
	}
	a := &aead{fallback: fallback, ifma: haveIFMA}
	for i := range a.key {
		a.key[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	return a, nil
}

func (a *aead) NonceSize() int { return NonceSize }
func (a *aead) Overhead() int  { return Overhead }

// state builds the cipher's initial state for nonce, with block counter 0.
func (a *aead) state(st *[16]uint32, nonce []byte) {
	st[0], st[1], st[2], st[3] = 0x61707865, 0x3320646e, 0x79622d32, 0x6b206574
	copy(st[4:12], a.key[:])
	st[12] = 0
	st[13] = binary.LittleEndian.Uint32(nonce[0:4])
	st[14] = binary.LittleEndian.Uint32(nonce[4:8])
	st[15] = binary.LittleEndian.Uint32(nonce[8:12])
}

// per spreads blocks Poly1305 blocks over the kernel's ten double rounds:
// the kernel absorbs at most per of them after each column round.
func per(blocks int) int { return (blocks + 9) / 10 }

// Seal encrypts and authenticates plaintext, authenticates additionalData
// and appends the result to dst. dst and plaintext may overlap exactly or
// not at all.
func (a *aead) Seal(dst, nonce, plaintext, additionalData []byte) []byte {
	if len(nonce) != NonceSize {
		panic("chachapoly: bad nonce length passed to Seal")
	}
	n := len(plaintext)
	if n < kernelMin || n > kernelMax {
		return a.fallback.Seal(dst, nonce, plaintext, additionalData)
	}
	ret, out := sliceForAppend(dst, n+Overhead)
	if inexactOverlap(out, plaintext) {
		panic("chachapoly: invalid buffer overlap")
	}
	if a.ifma {
		a.sealSplit(out, nonce, plaintext, additionalData)
	} else {
		a.sealFused(out, nonce, plaintext, additionalData)
	}
	return ret
}

// Open authenticates and decrypts ciphertext, authenticates additionalData
// and, if both are genuine, appends the plaintext to dst. dst and ciphertext
// may overlap exactly or not at all. On failure no plaintext is returned or
// left in dst.
func (a *aead) Open(dst, nonce, ciphertext, additionalData []byte) ([]byte, error) {
	if len(nonce) != NonceSize {
		panic("chachapoly: bad nonce length passed to Open")
	}
	if len(ciphertext) < Overhead {
		return nil, errOpen
	}
	n := len(ciphertext) - Overhead
	if n < kernelMin || n > kernelMax {
		return a.fallback.Open(dst, nonce, ciphertext, additionalData)
	}
	ct, tag := ciphertext[:n], ciphertext[n:]
	ret, out := sliceForAppend(dst, n)
	if inexactOverlap(out, ciphertext) {
		panic("chachapoly: invalid buffer overlap")
	}
	var ok bool
	if a.ifma {
		ok = a.openSplit(out, nonce, ct, tag, additionalData)
	} else {
		ok = a.openFused(out, nonce, ct, tag, additionalData)
	}
	if !ok {
		return nil, errOpen
	}
	return ret, nil
}

// sealSplit encrypts with the cipher kernels, then authenticates the whole
// ciphertext with the IFMA Poly1305 kernel: both run on the vector units, so
// running them one after the other costs nothing in overlap.
func (a *aead) sealSplit(out []byte, nonce, plaintext, ad []byte) {
	n := len(plaintext)
	var st [16]uint32
	var ks [kernelBytes]byte
	var p polyState
	covered := a.begin(&st, &ks, &p, nonce, ad, n)
	xorKeyStream(&st, &ks, covered, out[:n], plaintext)
	p.authenticate(out[:n], len(ad), out[n:])
}

// openSplit authenticates first and decrypts only a genuine message.
func (a *aead) openSplit(out []byte, nonce, ct, tag, ad []byte) bool {
	var st [16]uint32
	var ks [kernelBytes]byte
	var p polyState
	covered := a.begin(&st, &ks, &p, nonce, ad, len(ct))
	var want [Overhead]byte
	p.authenticate(ct, len(ad), want[:])
	if subtle.ConstantTimeCompare(want[:], tag) != 1 {
		return false
	}
	xorKeyStream(&st, &ks, covered, out, ct)
	return true
}

// begin starts an n-byte message on the split path: the cipher state for
// nonce, the first keystream blocks (block 0 keys Poly1305) and the
// additional data absorbed. It returns what firstCall covered.
func (a *aead) begin(st *[16]uint32, ks *[kernelBytes]byte, p *polyState, nonce, ad []byte, n int) (covered int) {
	a.state(st, nonce)
	covered = firstCall(st, ks, n)
	p.setKey(ks[:32])
	p.absorbPadded(ad)
	return covered
}

// firstCall makes the keystream of a message's first blocks: block 0 for
// the Poly1305 key, the rest for the message. It returns how many message
// bytes that keystream covers (ks[64:64+covered]) and leaves st[12] at the
// next unused block. Eight blocks do for messages up to 448 bytes.
func firstCall(st *[16]uint32, ks *[kernelBytes]byte, n int) (covered int) {
	if n <= 512-64 {
		keystream8(st, ks)
		st[12] += 8
		return 512 - 64
	}
	var idle polyState // the kernel's Poly1305 side has nothing to do here
	keystreamPoly16(st, ks, &idle, nil, 0, 0)
	st[12] += 16
	return firstBytes
}

// xorKeyStream XORs src with the keystream into dst: first with the covered
// bytes firstCall left in ks, then with sixteen blocks per call, and eight
// for a last stretch of 512 bytes or less.
func xorKeyStream(st *[16]uint32, ks *[kernelBytes]byte, covered int, dst, src []byte) {
	n := len(src)
	done := min(n, covered)
	xorInto(dst[:done], src[:done], ks[64:64+done])
	var idle polyState
	for done < n {
		m := n - done
		if m <= 512 {
			keystream8(st, ks)
			st[12] += 8
		} else {
			keystreamPoly16(st, ks, &idle, nil, 0, 0)
			st[12] += 16
			m = min(m, kernelBytes)
		}
		xorInto(dst[done:done+m], src[done:done+m], ks[:m])
		done += m
	}
}

// sealFused is Seal for CPUs without IFMA: each sixteen-block cipher call
// also runs scalar Poly1305 over the ciphertext of the call before, so the
// vector and the scalar units work at the same time.
func (a *aead) sealFused(out []byte, nonce, plaintext, ad []byte) {
	n := len(plaintext)
	var st [16]uint32
	var ks [kernelBytes]byte
	var p polyState
	a.state(&st, nonce)
	keystreamPoly16(&st, &ks, &p, nil, 0, 0)
	p.setKey(ks[:32])
	p.absorbPadded(ad)

	done := min(n, firstBytes)
	xorInto(out[:done], plaintext[:done], ks[64:64+done])
	absorbed := 0 // ciphertext bytes absorbed so far, a multiple of 16
	for done < n {
		st[12] += 16
		blocks := (done - absorbed) / 16
		var msg *byte
		if blocks > 0 {
			msg = &out[absorbed]
		}
		keystreamPoly16(&st, &ks, &p, msg, blocks, per(blocks))
		absorbed += 16 * blocks
		m := min(n-done, kernelBytes)
		xorInto(out[done:done+m], plaintext[done:done+m], ks[:m])
		done += m
	}
	p.absorbLast(p.absorbBlocks(out[absorbed:n]), len(ad), n)
	p.sum(out[n:])
}

// openFused is Open for CPUs without IFMA. Poly1305 runs inside the cipher
// calls, one region ahead of the XOR, so that it reads every ciphertext
// byte before an in-place Open overwrites it; on a bad tag the plaintext
// written so far is zeroed.
func (a *aead) openFused(out []byte, nonce, ct, tag, ad []byte) bool {
	n := len(ct)
	var st [16]uint32
	var ks [2][kernelBytes]byte
	var p polyState
	a.state(&st, nonce)
	keystreamPoly16(&st, &ks[0], &p, nil, 0, 0)
	p.setKey(ks[0][:32])
	p.absorbPadded(ad)

	// pending is the keystream not yet applied: out[start:start+size] gets
	// ks[cur][off:off+size] once Poly1305 has read that ciphertext.
	cur, off, start, size := 0, 64, 0, min(n, firstBytes)
	absorbed := 0
	for next := size; next < n; {
		st[12] += 16
		m := min(n-next, kernelBytes)
		// Absorb everything up to the end of the region this call makes
		// keystream for (its last partial block waits for the end).
		target := next + m
		if target == n {
			target = n &^ 15
		}
		blocks := (target - absorbed) / 16
		var msg *byte
		if blocks > 0 {
			msg = &ct[absorbed]
		}
		keystreamPoly16(&st, &ks[1-cur], &p, msg, blocks, per(blocks))
		absorbed = target
		xorInto(out[start:start+size], ct[start:start+size], ks[cur][off:off+size])
		cur, off, start, size = 1-cur, 0, next, m
		next += m
	}
	p.absorbLast(p.absorbBlocks(ct[absorbed:]), len(ad), n)
	var want [Overhead]byte
	p.sum(want[:])
	if subtle.ConstantTimeCompare(want[:], tag) != 1 {
		clear(out)
		return false
	}
	xorInto(out[start:start+size], ct[start:start+size], ks[cur][off:off+size])
	return true
}

// sliceForAppend extends in by n bytes, reallocating if it must, and returns
// the whole slice and the n new bytes.
func sliceForAppend(in []byte, n int) (whole, tail []byte) {
	if total := len(in) + n; cap(in) >= total {
		whole = in[:total]
	} else {
		whole = make([]byte, total)
		copy(whole, in)
	}
	return whole, whole[len(in):]
}

// inexactOverlap reports whether x and y share memory at different
// offsets, which an in-place Seal or Open cannot handle.
func inexactOverlap(x, y []byte) bool {
	if len(x) == 0 || len(y) == 0 || &x[0] == &y[0] {
		return false
	}
	xs, ys := uintptr(unsafe.Pointer(&x[0])), uintptr(unsafe.Pointer(&y[0]))
	return xs <= ys+uintptr(len(y)-1) && ys <= xs+uintptr(len(x)-1)
}
