// Package inetsum computes the Internet checksum (RFC 1071): the ones'
// complement of the ones' complement sum of 16-bit big-endian words, shared
// by IP, ICMP, TCP and UDP.
//
//	acc := inetsum.Add(0, pseudoHeader)   // sums, unfolded, in any order
//	acc = inetsum.Add(acc, segment)
//	field := ^inetsum.Fold(acc)           // the checksum to store
package inetsum

import (
	"encoding/binary"
	"math/bits"
)

// Add adds b to acc as big-endian 16-bit words, a last odd byte padded
// with zero, without folding. Sums of pieces may be added together, with
// acc or with +, as long as every piece but the last has an even length;
// Add's result stays below 2^34, so a few of them never overflow.
//
// The bulk is summed eight bytes at a time in little-endian order with
// end-around carry: a ones' complement sum modulo 2^64-1, which folds to
// the 16-bit sum of the byte-swapped words because 2^16-1 divides 2^64-1,
// and swapping that sum's two bytes gives the big-endian sum (RFC 1071,
// section 2).
func Add(acc uint64, b []byte) uint64 {
	var s, c uint64
	// With AVX2 the bulk is summed 64 bytes per step as 16-bit words in
	// 32-bit lanes (sumWords): the same sum modulo 2^16-1, which is all
	// Fold keeps, added in with the same end-around carry.
	for haveSumWords && len(b) >= minWordsBytes {
		n := min(len(b), maxWordsBytes) &^ 63
		s, c = bits.Add64(s, sumWords(&b[0], n), c)
		b = b[n:]
	}
	for len(b) >= 64 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[32:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[40:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[48:]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[56:]), c)
		b = b[64:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	s, c = bits.Add64(s, 0, c)
	s += c // a carry out left s at zero: this cannot carry again
	f := Fold(s)
	acc = acc>>32 + acc&0xffffffff + uint64(f>>8|f<<8)
	for len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

const (
	// minWordsBytes is the shortest buffer sumWords takes: below it its
	// set-up and final additions cost what the scalar loop saves.
	minWordsBytes = 128
	// maxWordsBytes is the most one sumWords call takes, so that none of
	// its 32-bit lanes overflows.
	maxWordsBytes = 1 << 20
)

// Fold folds a sum to 16 bits, carries wrapped around.
func Fold(acc uint64) uint16 {
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}

// Checksum is the Internet checksum of b: what a header's checksum field
// holds when b is the header with that field zero.
func Checksum(b []byte) uint16 { return ^Fold(Add(0, b)) }
