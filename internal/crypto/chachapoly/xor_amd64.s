// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build amd64 && !purego

#include "textflag.h"

// func xorKeyStream512(dst, src, ks *byte, n int)
//
// dst[i] = src[i] ^ ks[i] for i < n (n >= 1): 256 bytes per step in ZMM
// registers, then 64, then the last 1-63 bytes under a byte mask (masked
// loads and stores touch no byte outside it). Every block is read before
// it is written, so dst may be src. Needs AVX-512F and BW. No branch
// depends on the data, only on n.
TEXT ·xorKeyStream512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ks+16(FP), DX
	MOVQ n+24(FP), CX
	CMPQ CX, $256
	JB   by64

by256:
	VMOVDQU64 0(SI), Z0
	VMOVDQU64 64(SI), Z1
	VMOVDQU64 128(SI), Z2
	VMOVDQU64 192(SI), Z3
	VPXORQ    0(DX), Z0, Z0
	VPXORQ    64(DX), Z1, Z1
	VPXORQ    128(DX), Z2, Z2
	VPXORQ    192(DX), Z3, Z3
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VMOVDQU64 Z3, 192(DI)
	ADDQ      $256, SI
	ADDQ      $256, DX
	ADDQ      $256, DI
	SUBQ      $256, CX
	CMPQ      CX, $256
	JAE       by256

by64:
	CMPQ      CX, $64
	JB        tail
	VMOVDQU64 0(SI), Z0
	VPXORQ    0(DX), Z0, Z0
	VMOVDQU64 Z0, 0(DI)
	ADDQ      $64, SI
	ADDQ      $64, DX
	ADDQ      $64, DI
	SUBQ      $64, CX
	JMP       by64

tail:
	TESTQ        CX, CX
	JZ           done
	MOVQ         $-1, AX
	SHLQ         CX, AX // CX < 64: AX = -1 << CX
	NOTQ         AX     // the low CX bits set
	KMOVQ        AX, K1
	VMOVDQU8.Z   (SI), K1, Z0
	VMOVDQU8.Z   (DX), K1, Z1
	VPXORQ       Z1, Z0, Z0
	VMOVDQU8     Z0, K1, (DI)

done:
	VZEROUPPER
	RET
