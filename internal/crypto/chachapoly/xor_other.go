// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build !amd64 || purego

package chachapoly

// haveXOR512 is false where there is no AVX-512 kernel.
var haveXOR512 = false

func xorKeyStream512(dst, src, ks *byte, n int) {
	panic("chachapoly: no kernel on this platform")
}
