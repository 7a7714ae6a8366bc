// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

package chachapoly

import (
	"encoding/binary"
	"math/bits"
)

// polyState is a Poly1305 computation in radix 2^64. The kernel reads and
// writes h and reads r at fixed offsets (h at 0, 8, 16; r at 24, 32): do not
// reorder the fields.
type polyState struct {
	h [3]uint64 // accumulator; h[2] holds the few bits above 2^128
	r [2]uint64 // clamped multiplier
	s [2]uint64 // the pad added at the end
}

// setKey starts a computation with the 32-byte one-time key k.
func (p *polyState) setKey(k []byte) {
	p.h = [3]uint64{}
	p.r[0] = binary.LittleEndian.Uint64(k[0:8]) & 0x0FFFFFFC0FFFFFFF
	p.r[1] = binary.LittleEndian.Uint64(k[8:16]) & 0x0FFFFFFC0FFFFFFC
	p.s[0] = binary.LittleEndian.Uint64(k[16:24])
	p.s[1] = binary.LittleEndian.Uint64(k[24:32])
}

// absorbPadded absorbs b zero-padded to a multiple of 16 bytes, the way the
// AEAD construction feeds its additional data and its ciphertext.
func (p *polyState) absorbPadded(b []byte) {
	if b = p.absorbBlocks(b); len(b) > 0 {
		var last [16]byte
		copy(last[:], b)
		polyBlocks(p, &last[0], 1)
	}
}

// absorbBlocks absorbs the full 16-byte blocks at the start of b with the
// scalar code and returns what is left (less than one block).
func (p *polyState) absorbBlocks(b []byte) []byte {
	if full := len(b) / 16; full > 0 {
		polyBlocks(p, &b[0], full)
		b = b[full*16:]
	}
	return b
}

// ifmaMinGroups is the shortest run of 128-byte groups worth the IFMA
// kernel's set-up (the powers r^2 .. r^8).
const ifmaMinGroups = 2

const mask44 = 1<<44 - 1

// absorbFull absorbs the full 16-byte blocks at the start of b and returns
// what is left (less than one block). With IFMA it runs eight blocks at a
// time and leaves fewer than eight full blocks to the scalar code.
func (p *polyState) absorbFull(b []byte) []byte {
	if groups := len(b) / 128; haveIFMA && groups >= ifmaMinGroups {
		var lanes [3][8]uint64
		// The accumulator so far rides in lane 0, so it is multiplied by
		// r^(8*groups) like everything already absorbed must be.
		lanes[0][0] = p.h[0] & mask44
		lanes[1][0] = (p.h[0]>>44 | p.h[1]<<20) & mask44
		lanes[2][0] = p.h[1]>>24 | p.h[2]<<40
		r := [3]uint64{p.r[0] & mask44, (p.r[0]>>44 | p.r[1]<<20) & mask44, p.r[1] >> 24}
		polyIFMA(&lanes, &r, &b[0], groups)
		var s0, s1, s2 uint64 // each below 8 * 2^45
		for k := range 8 {
			s0 += lanes[0][k]
			s1 += lanes[1][k]
			s2 += lanes[2][k]
		}
		// Back to radix 2^64: s0 + s1*2^44 + s2*2^88.
		h0, c := bits.Add64(s0, s1<<44, 0)
		h1, c2 := bits.Add64(s1>>20, s2<<24, c)
		h2 := s2>>40 + c2
		// Fold the bits above 2^130 back in (times 5), so that h2 stays as
		// small as the scalar code needs.
		top := h2 >> 2
		h2 &= 3
		h0, c = bits.Add64(h0, top*5, 0)
		h1, c = bits.Add64(h1, 0, c)
		p.h = [3]uint64{h0, h1, h2 + c}
		b = b[groups*128:]
	}
	return p.absorbBlocks(b)
}

// authenticate absorbs the ciphertext ct and the lengths block and writes
// the tag.
func (p *polyState) authenticate(ct []byte, adLen int, tag []byte) {
	p.absorbLast(p.absorbFull(ct), adLen, len(ct))
	p.sum(tag)
}

// absorbLast absorbs the ciphertext's last partial block (rest, shorter than
// 16 bytes), zero-padded, and the lengths block, in one kernel call.
func (p *polyState) absorbLast(rest []byte, adLen, ctLen int) {
	var b [32]byte
	at := 0
	if len(rest) > 0 {
		copy(b[:16], rest)
		at = 16
	}
	binary.LittleEndian.PutUint64(b[at:], uint64(adLen))
	binary.LittleEndian.PutUint64(b[at+8:], uint64(ctLen))
	polyBlocks(p, &b[0], at/16+1)
}

// sum writes the tag: h reduced modulo 2^130 - 5, plus s, modulo 2^128.
// It runs in constant time.
func (p *polyState) sum(tag []byte) {
	h0, h1, h2 := p.h[0], p.h[1], p.h[2]
	// h < 2(2^130 - 5) here, so one conditional subtraction of the prime
	// (adding 5 and dropping 2^130) finishes the reduction.
	g0, c := bits.Add64(h0, 5, 0)
	g1, c := bits.Add64(h1, 0, c)
	g2 := h2 + c
	mask := 0 - (g2 >> 2 & 1)
	h0 = h0&^mask | g0&mask
	h1 = h1&^mask | g1&mask
	t0, c := bits.Add64(h0, p.s[0], 0)
	t1, _ := bits.Add64(h1, p.s[1], c)
	binary.LittleEndian.PutUint64(tag[0:8], t0)
	binary.LittleEndian.PutUint64(tag[8:16], t1)
}
