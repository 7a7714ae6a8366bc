// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

package chachapoly

import "crypto/subtle"

// xorInto sets dst[i] = src[i] ^ ks[i] for every i < len(src), the
// keystream applied to a message (dst and src overlap exactly or not at
// all; dst and ks are at least as long as src). With AVX-512BW it runs 64
// bytes per instruction and the last 1-63 under a mask;
// crypto/subtle.XORBytes, which the kernels' callers used before, runs 16
// and then byte by byte.
func xorInto(dst, src, ks []byte) {
	n := len(src)
	if n == 0 {
		return
	}
	_, _ = dst[n-1], ks[n-1] // both long enough, or a panic here rather than a stray write
	if haveXOR512 {
		xorKeyStream512(&dst[0], &src[0], &ks[0], n)
		return
	}
	subtle.XORBytes(dst[:n], src, ks[:n])
}
