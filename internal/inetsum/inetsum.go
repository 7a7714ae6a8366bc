// Package inetsum computes the Internet checksum (RFC 1071): the ones'
// complement of the ones' complement sum of 16-bit big-endian words, shared
// by IP, ICMP, TCP and UDP.
//
//	acc := inetsum.Add(0, pseudoHeader)   // sums, unfolded, in any order
//	acc = inetsum.Add(acc, segment)
//	field := ^inetsum.Fold(acc)           // the checksum to store
package inetsum

import "encoding/binary"

// Add adds b to acc as big-endian 16-bit words, a last odd byte padded
// with zero, without folding. Sums of pieces may be added together as long
// as every piece but the last has an even length.
func Add(acc uint64, b []byte) uint64 {
	for len(b) >= 8 {
		v := binary.BigEndian.Uint64(b)
		acc += v>>48 + v>>32&0xffff + v>>16&0xffff + v&0xffff
		b = b[8:]
	}
	for len(b) >= 2 {
		acc += uint64(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint64(b[0]) << 8
	}
	return acc
}

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
