// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build amd64 && !purego

package chachapoly

import "golang.org/x/sys/cpu"

// haveXOR512 reports whether xorKeyStream512 can run here (AVX-512F and
// BW); without it the keystream is applied with crypto/subtle.XORBytes.
var haveXOR512 = cpuKernel && cpu.X86.HasAVX512BW

// xorKeyStream512 sets dst[i] = src[i] ^ ks[i] for i < n, n >= 1; dst may
// be src. It needs AVX-512F and BW.
//
//go:noescape
func xorKeyStream512(dst, src, ks *byte, n int)
