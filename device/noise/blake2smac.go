package noise

// Keyed BLAKE2s-128 (RFC 7693) for mac1, mac2 and cookies. The x/crypto
// digest needs a heap-allocated hash.Hash per key, and mac2 and cookies use
// a different key per source address, so this small portable version keeps
// every MAC on the stack. Its output is checked against x/crypto in tests.

import (
	"encoding/binary"
	"math/bits"
)

var blake2sIV = [8]uint32{
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
}

var blake2sSigma = [10][16]byte{
	{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
	{14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
	{11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
	{7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
	{9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
	{2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
	{12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
	{13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
	{6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
	{10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
}

// blake2sCompress mixes one 64-byte block into h; t is the byte count so
// far including this block, last marks the final block.
func blake2sCompress(h *[8]uint32, block *[64]byte, t uint64, last bool) {
	var m [16]uint32
	for i := range m {
		m[i] = binary.LittleEndian.Uint32(block[4*i:])
	}
	v0, v1, v2, v3, v4, v5, v6, v7 := h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]
	v8, v9, v10, v11 := blake2sIV[0], blake2sIV[1], blake2sIV[2], blake2sIV[3]
	v12, v13, v14, v15 := blake2sIV[4]^uint32(t), blake2sIV[5]^uint32(t>>32), blake2sIV[6], blake2sIV[7]
	if last {
		v14 = ^v14
	}
	for r := range blake2sSigma {
		s := &blake2sSigma[r]
		// Columns.
		v0, v4, v8, v12 = g(v0, v4, v8, v12, m[s[0]&15], m[s[1]&15])
		v1, v5, v9, v13 = g(v1, v5, v9, v13, m[s[2]&15], m[s[3]&15])
		v2, v6, v10, v14 = g(v2, v6, v10, v14, m[s[4]&15], m[s[5]&15])
		v3, v7, v11, v15 = g(v3, v7, v11, v15, m[s[6]&15], m[s[7]&15])
		// Diagonals.
		v0, v5, v10, v15 = g(v0, v5, v10, v15, m[s[8]&15], m[s[9]&15])
		v1, v6, v11, v12 = g(v1, v6, v11, v12, m[s[10]&15], m[s[11]&15])
		v2, v7, v8, v13 = g(v2, v7, v8, v13, m[s[12]&15], m[s[13]&15])
		v3, v4, v9, v14 = g(v3, v4, v9, v14, m[s[14]&15], m[s[15]&15])
	}
	h[0] ^= v0 ^ v8
	h[1] ^= v1 ^ v9
	h[2] ^= v2 ^ v10
	h[3] ^= v3 ^ v11
	h[4] ^= v4 ^ v12
	h[5] ^= v5 ^ v13
	h[6] ^= v6 ^ v14
	h[7] ^= v7 ^ v15
	clear(m[:])
}

func g(a, b, c, d, x, y uint32) (uint32, uint32, uint32, uint32) {
	a += b + x
	d = bits.RotateLeft32(d^a, -16)
	c += d
	b = bits.RotateLeft32(b^c, -12)
	a += b + y
	d = bits.RotateLeft32(d^a, -8)
	c += d
	b = bits.RotateLeft32(b^c, -7)
	return a, b, c, d
}

// mac sets out to BLAKE2s-128 keyed with key (1 to 32 bytes) over data.
func mac(out *[MACSize]byte, key []byte, data []byte) {
	if len(key) == 0 || len(key) > 32 {
		panic("noise: mac key must be 1 to 32 bytes")
	}
	h := blake2sIV
	h[0] ^= 0x01010000 ^ uint32(len(key))<<8 ^ MACSize
	var block [64]byte
	copy(block[:], key)
	var t uint64 = 64
	if len(data) == 0 {
		blake2sCompress(&h, &block, t, true)
	} else {
		blake2sCompress(&h, &block, t, false)
		for len(data) > 64 {
			copy(block[:], data[:64])
			t += 64
			blake2sCompress(&h, &block, t, false)
			data = data[64:]
		}
		clear(block[:])
		copy(block[:], data)
		t += uint64(len(data))
		blake2sCompress(&h, &block, t, true)
	}
	for i := 0; i < MACSize/4; i++ {
		binary.LittleEndian.PutUint32(out[4*i:], h[i])
	}
	clear(block[:])
	clear(h[:])
}
