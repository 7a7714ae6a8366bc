// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

// Package chachapoly is ChaCha20-Poly1305 (RFC 8439) for the data path, with
// an AVX-512 kernel that runs the cipher on sixteen blocks at once while the
// scalar unit runs Poly1305 beside it.
//
// Map of a Seal of n bytes (Open is the same with Poly1305 run ahead of the
// XOR, so that it reads the ciphertext before an in-place Open overwrites it):
//
//	kernel call 1: blocks 0..15   -> Poly1305 key (block 0), keystream for bytes 0..959
//	kernel call k: blocks 16(k-1).. -> keystream for the next 1024 bytes,
//	               and meanwhile Poly1305 over the ciphertext written so far
//	after the last call: Poly1305 over the rest, the lengths, the tag
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
	fallback cipher.AEAD // x/crypto, for the messages the kernel does not take
}

// New returns ChaCha20-Poly1305 with the 32-byte key. On a CPU without
// AVX-512 it is golang.org/x/crypto/chacha20poly1305's.
func New(key []byte) (cipher.AEAD, error) {
	fallback, err := chacha20poly1305.New(key)
	if err != nil || !haveKernel {
		return fallback, err
	}
	a := &aead{fallback: fallback}
	for i := range a.key {
		a.key[i] = binary.LittleEndian.Uint32(key[4*i:])
	}
	return a, nil
}

// Accelerated reports whether New returns the AVX-512 kernel on this machine.
func Accelerated() bool { return haveKernel }

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

// per spreads blocks Poly1305 blocks over the kernel's ten double rounds.
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
	var st [16]uint32
	var ks [kernelBytes]byte
	var p polyState
	a.state(&st, nonce)
	keystreamPoly16(&st, &ks, &p, nil, 0, 0)
	p.setKey(ks[:32])
	p.absorbPadded(additionalData)

	done := min(n, firstBytes)
	subtle.XORBytes(out[:done], plaintext[:done], ks[64:64+done])
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
		subtle.XORBytes(out[done:done+m], plaintext[done:done+m], ks[:m])
		done += m
	}
	p.absorbPadded(out[absorbed:n])
	p.absorbLengths(len(additionalData), n)
	p.sum(out[n:])
	clear(ks[:])
	return ret
}

// Open authenticates and decrypts ciphertext, authenticates additionalData
// and, if both are genuine, appends the plaintext to dst. dst and ciphertext
// may overlap exactly or not at all. On failure the part of dst that would
// have held the plaintext is zeroed.
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
	var st [16]uint32
	var ks [2][kernelBytes]byte
	var p polyState
	a.state(&st, nonce)
	keystreamPoly16(&st, &ks[0], &p, nil, 0, 0)
	p.setKey(ks[0][:32])
	p.absorbPadded(additionalData)

	// pending is the keystream not yet applied: out[start:start+len] gets
	// ks[cur][off:off+len] once Poly1305 has read that ciphertext.
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
		subtle.XORBytes(out[start:start+size], ct[start:start+size], ks[cur][off:off+size])
		cur, off, start, size = 1-cur, 0, next, m
		next += m
	}
	p.absorbPadded(ct[absorbed:])
	p.absorbLengths(len(additionalData), n)
	var want [Overhead]byte
	p.sum(want[:])
	if subtle.ConstantTimeCompare(want[:], tag) != 1 {
		clear(out)
		clear(ks[0][:])
		clear(ks[1][:])
		return nil, errOpen
	}
	subtle.XORBytes(out[start:start+size], ct[start:start+size], ks[cur][off:off+size])
	clear(ks[0][:])
	clear(ks[1][:])
	return ret, nil
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
