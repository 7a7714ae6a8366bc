// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build amd64 && !purego

#include "textflag.h"

// Poly1305 on eight blocks at once with AVX-512 IFMA (52-bit multiply-add).
// Numbers mod 2^130 - 5 are kept in radix 2^44 (limbs of 44, 44 and 42
// bits), one number per 64-bit lane. Lane k absorbs blocks k, k+8, k+16, ...
// and multiplies by r^8 after each; the last group is multiplied by
// r^8, r^7, ..., r^1 instead, so that the sum of the lanes is the ordinary
// serial result.
//
// ZMM registers:
//   Z0-Z2    the eight accumulators (limbs 0, 1, 2)
//   Z3-Z7    r^8 broadcast: limbs 0-2, then 20*limb1, 20*limb2 (r^2 while
//            the powers are computed)
//   Z8-Z12   the last group's multipliers r^(8-k), same layout
//   Z13-Z17  r, then r^4, while the powers are computed; Z13-Z19 message
//            scratch after
//   Z20-Z25  product sums (low and high halves for limbs 0, 1, 2); Z28 scratch
//   Z26, Z27 qword indexes that gather the low and the high halves of blocks
//   Z29      2^44 - 1;  Z30  2^42 - 1;  Z31  2^40 (the 2^128 bit of a block)

// MULMOD sets (h0, h1, h2) to h*r mod 2^130 - 5, partly reduced. s1 and s2
// are 20*r1 and 20*r2: 2^132 = 20 (mod 2^130 - 5). The three carries run
// side by side, not one after another: limbs may come out a few bits over
// 44 (and 42), far below the 52 bits IFMA reads, and every bound below
// holds with them (inputs under 2^46, products under 2^96, sums under 2^57).
#define MULMOD(h0, h1, h2, r0, r1, r2, s1, s2) \
	VPXORQ      Z20, Z20, Z20; \
	VPXORQ      Z21, Z21, Z21; \
	VPXORQ      Z22, Z22, Z22; \
	VPXORQ      Z23, Z23, Z23; \
	VPXORQ      Z24, Z24, Z24; \
	VPXORQ      Z25, Z25, Z25; \
	VPMADD52LUQ r0, h0, Z20; \
	VPMADD52HUQ r0, h0, Z21; \
	VPMADD52LUQ r1, h0, Z22; \
	VPMADD52HUQ r1, h0, Z23; \
	VPMADD52LUQ r2, h0, Z24; \
	VPMADD52HUQ r2, h0, Z25; \
	VPMADD52LUQ s2, h1, Z20; \
	VPMADD52HUQ s2, h1, Z21; \
	VPMADD52LUQ r0, h1, Z22; \
	VPMADD52HUQ r0, h1, Z23; \
	VPMADD52LUQ r1, h1, Z24; \
	VPMADD52HUQ r1, h1, Z25; \
	VPMADD52LUQ s1, h2, Z20; \
	VPMADD52HUQ s1, h2, Z21; \
	VPMADD52LUQ s2, h2, Z22; \
	VPMADD52HUQ s2, h2, Z23; \
	VPMADD52LUQ r0, h2, Z24; \
	VPMADD52HUQ r0, h2, Z25; \
	VPSLLQ      $8, Z21, Z21; \
	VPADDQ      Z21, Z22, h1; \
	VPSLLQ      $8, Z23, Z23; \
	VPADDQ      Z23, Z24, h2; \
	VPSLLQ      $10, Z25, Z28; \
	VPSLLQ      $12, Z25, Z25; \
	VPADDQ      Z28, Z20, h0; \
	VPADDQ      Z25, h0, h0; \
	VPSRLQ      $44, h0, Z21; \
	VPSRLQ      $44, h1, Z23; \
	VPSRLQ      $42, h2, Z25; \
	VPANDQ      Z29, h0, h0; \
	VPANDQ      Z29, h1, h1; \
	VPANDQ      Z30, h2, h2; \
	VPADDQ      Z21, h1, h1; \
	VPADDQ      Z23, h2, h2; \
	VPADDQ      Z25, h0, h0; \
	VPSLLQ      $2, Z25, Z25; \
	VPADDQ      Z25, h0, h0

// TIMES20 sets dst to 20*src.
#define TIMES20(src, dst) \
	VPSLLQ $4, src, dst; \
	VPSLLQ $2, src, Z28; \
	VPADDQ Z28, dst, dst

// MASKED_MUL multiplies the lanes of (Z8, Z9, Z10) selected by K1 by the
// multiplier r0..s2, using Z0-Z2 as scratch.
#define MASKED_MUL(r0, r1, r2, s1, s2) \
	VMOVDQA64 Z8, Z0; \
	VMOVDQA64 Z9, Z1; \
	VMOVDQA64 Z10, Z2; \
	MULMOD(Z0, Z1, Z2, r0, r1, r2, s1, s2); \
	VMOVDQA64 Z0, K1, Z8; \
	VMOVDQA64 Z1, K1, Z9; \
	VMOVDQA64 Z2, K1, Z10

// func polyIFMA(lanes *[3][8]uint64, r *[3]uint64, msg *byte, groups int)
//
// Absorbs groups*8 full blocks from msg into the eight accumulators in
// lanes (limb-major, radix 2^44) and leaves their sum equal to the serial
// Poly1305 accumulator. groups must be at least 1.
TEXT ·polyIFMA(SB), NOSPLIT, $0-32
	VPBROADCASTQ ·mask44<>(SB), Z29
	VPBROADCASTQ ·mask42<>(SB), Z30
	VPBROADCASTQ ·bit40<>(SB), Z31
	VMOVDQU64    ·evenQwords<>(SB), Z26
	VMOVDQU64    ·oddQwords<>(SB), Z27

	// r, then r^(8-k) in lane k and r^8 in every lane, with three
	// multiplications: r^2; [r^2 r r^2 r ...] * r^2 = [r^4 r^3 ...]; then
	// lanes 0-3 of [r^4 r^3 r^2 r r^4 r^3 r^2 r] times r^4.
	MOVQ r+8(FP), AX
	VPBROADCASTQ 0(AX), Z13
	VPBROADCASTQ 8(AX), Z14
	VPBROADCASTQ 16(AX), Z15
	TIMES20(Z14, Z16)
	TIMES20(Z15, Z17)

	// r^2 in every lane of Z3-Z7.
	VMOVDQA64 Z13, Z3
	VMOVDQA64 Z14, Z4
	VMOVDQA64 Z15, Z5
	MULMOD(Z3, Z4, Z5, Z13, Z14, Z15, Z16, Z17)
	TIMES20(Z4, Z6)
	TIMES20(Z5, Z7)

	// Z8-Z10: r^2 in the even lanes, r in the odd ones.
	VMOVDQA64 Z13, Z8
	VMOVDQA64 Z14, Z9
	VMOVDQA64 Z15, Z10
	MOVQ  $0x55, BX
	KMOVW BX, K1
	VMOVDQA64 Z3, K1, Z8
	VMOVDQA64 Z4, K1, Z9
	VMOVDQA64 Z5, K1, Z10

	// Z0-Z2: that times r^2, r^4 in the even lanes, r^3 in the odd ones;
	// lanes 0, 1, 4 and 5 of it go into Z8-Z10: r^4 r^3 r^2 r r^4 r^3 r^2 r.
	VMOVDQA64 Z8, Z0
	VMOVDQA64 Z9, Z1
	VMOVDQA64 Z10, Z2
	MULMOD(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	MOVQ  $0x33, BX
	KMOVW BX, K1
	VMOVDQA64 Z0, K1, Z8
	VMOVDQA64 Z1, K1, Z9
	VMOVDQA64 Z2, K1, Z10

	// r^4 (lane 0 of Z0-Z2) in every lane of Z13-Z17; lanes 0-3 of Z8-Z10
	// times r^4 give r^8 r^7 r^6 r^5 r^4 r^3 r^2 r.
	VPBROADCASTQ X0, Z13
	VPBROADCASTQ X1, Z14
	VPBROADCASTQ X2, Z15
	TIMES20(Z14, Z16)
	TIMES20(Z15, Z17)
	MOVQ  $0x0F, BX
	KMOVW BX, K1
	MASKED_MUL(Z13, Z14, Z15, Z16, Z17)
	TIMES20(Z9, Z11)
	TIMES20(Z10, Z12)

	// r^8 (lane 0 of Z8-Z10) in every lane of Z3-Z7.
	VPBROADCASTQ X8, Z3
	VPBROADCASTQ X9, Z4
	VPBROADCASTQ X10, Z5
	TIMES20(Z4, Z6)
	TIMES20(Z5, Z7)

	MOVQ lanes+0(FP), DI
	VMOVDQU64 0(DI), Z0
	VMOVDQU64 64(DI), Z1
	VMOVDQU64 128(DI), Z2
	MOVQ msg+16(FP), SI
	MOVQ groups+24(FP), CX

group:
	// Split eight blocks into limbs and add them, 2^128 bit included.
	VMOVDQU64 0(SI), Z18
	VMOVDQU64 64(SI), Z19
	ADDQ      $128, SI
	VMOVDQA64 Z18, Z13
	VPERMT2Q  Z19, Z26, Z13
	VPERMT2Q  Z19, Z27, Z18
	VPANDQ    Z29, Z13, Z14
	VPADDQ    Z14, Z0, Z0
	VPSRLQ    $44, Z13, Z14
	VPSLLQ    $20, Z18, Z15
	VPORQ     Z15, Z14, Z14
	VPANDQ    Z29, Z14, Z14
	VPADDQ    Z14, Z1, Z1
	VPSRLQ    $24, Z18, Z14
	VPORQ     Z31, Z14, Z14
	VPADDQ    Z14, Z2, Z2
	DECQ      CX
	JZ        last
	MULMOD(Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7)
	JMP       group

last:
	MULMOD(Z0, Z1, Z2, Z8, Z9, Z10, Z11, Z12)
	VMOVDQU64 Z0, 0(DI)
	VMOVDQU64 Z1, 64(DI)
	VMOVDQU64 Z2, 128(DI)
	VZEROUPPER
	RET

DATA ·mask44<>+0(SB)/8, $0xFFFFFFFFFFF
GLOBL ·mask44<>(SB), RODATA|NOPTR, $8
DATA ·mask42<>+0(SB)/8, $0x3FFFFFFFFFF
GLOBL ·mask42<>(SB), RODATA|NOPTR, $8
DATA ·bit40<>+0(SB)/8, $0x10000000000
GLOBL ·bit40<>(SB), RODATA|NOPTR, $8

DATA ·evenQwords<>+0(SB)/8, $0
DATA ·evenQwords<>+8(SB)/8, $2
DATA ·evenQwords<>+16(SB)/8, $4
DATA ·evenQwords<>+24(SB)/8, $6
DATA ·evenQwords<>+32(SB)/8, $8
DATA ·evenQwords<>+40(SB)/8, $10
DATA ·evenQwords<>+48(SB)/8, $12
DATA ·evenQwords<>+56(SB)/8, $14
GLOBL ·evenQwords<>(SB), RODATA|NOPTR, $64

DATA ·oddQwords<>+0(SB)/8, $1
DATA ·oddQwords<>+8(SB)/8, $3
DATA ·oddQwords<>+16(SB)/8, $5
DATA ·oddQwords<>+24(SB)/8, $7
DATA ·oddQwords<>+32(SB)/8, $9
DATA ·oddQwords<>+40(SB)/8, $11
DATA ·oddQwords<>+48(SB)/8, $13
DATA ·oddQwords<>+56(SB)/8, $15
GLOBL ·oddQwords<>(SB), RODATA|NOPTR, $64
