// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 kernel: sixteen ChaCha20 blocks at once, one block per 32-bit
// lane of sixteen ZMM registers (register i holds word i of every block),
// interleaved with scalar Poly1305 blocks so that the vector units and the
// scalar multiplier work at the same time.
//
// Scalar registers in keystreamPoly16 and polyBlocks:
//   R10, R11, R12  the Poly1305 accumulator h (h2 holds the bits above 128)
//   R13            the *polyState (r0 at 24, r1 at 32)
//   SI             the next 16-byte message block; CX blocks left
//   AX, DX         MULQ operands; BX, DI, R14, R15 the product t0..t3

// POLY_BLOCK adds the 16-byte block at (SI) with its 2^128 bit to h and
// multiplies h by r modulo 2^130 - 5 (partially reduced: h2 stays small).
#define POLY_BLOCK \
	ADDQ  0(SI), R10; \
	ADCQ  8(SI), R11; \
	ADCQ  $1, R12; \
	LEAQ  16(SI), SI; \
	MOVQ  24(R13), AX; \
	MULQ  R10; \
	MOVQ  AX, BX; \
	MOVQ  DX, DI; \
	MOVQ  32(R13), AX; \
	MULQ  R10; \
	ADDQ  AX, DI; \
	ADCQ  $0, DX; \
	MOVQ  DX, R14; \
	MOVQ  24(R13), AX; \
	MULQ  R11; \
	ADDQ  AX, DI; \
	ADCQ  DX, R14; \
	MOVQ  $0, R15; \
	ADCQ  $0, R15; \
	MOVQ  32(R13), AX; \
	MULQ  R11; \
	ADDQ  AX, R14; \
	ADCQ  DX, R15; \
	MOVQ  24(R13), AX; \
	IMULQ R12, AX; \
	ADDQ  AX, R14; \
	ADCQ  $0, R15; \
	MOVQ  32(R13), AX; \
	IMULQ R12, AX; \
	ADDQ  AX, R15; \
	MOVQ  BX, R10; \
	MOVQ  DI, R11; \
	MOVQ  R14, R12; \
	ANDQ  $3, R12; \
	ANDQ  $-4, R14; \
	ADDQ  R14, R10; \
	ADCQ  R15, R11; \
	ADCQ  $0, R12; \
	SHRQ  $2, R15, R14; \
	SHRQ  $2, R15; \
	ADDQ  R14, R10; \
	ADCQ  R15, R11; \
	ADCQ  $0, R12

// QR4 runs four independent ChaCha20 quarter rounds side by side.
#define QR4(a0, b0, c0, d0, a1, b1, c1, d1, a2, b2, c2, d2, a3, b3, c3, d3) \
	VPADDD  b0, a0, a0; VPADDD  b1, a1, a1; VPADDD  b2, a2, a2; VPADDD  b3, a3, a3; \
	VPXORD  a0, d0, d0; VPXORD  a1, d1, d1; VPXORD  a2, d2, d2; VPXORD  a3, d3, d3; \
	VPROLD  $16, d0, d0; VPROLD $16, d1, d1; VPROLD $16, d2, d2; VPROLD $16, d3, d3; \
	VPADDD  d0, c0, c0; VPADDD  d1, c1, c1; VPADDD  d2, c2, c2; VPADDD  d3, c3, c3; \
	VPXORD  c0, b0, b0; VPXORD  c1, b1, b1; VPXORD  c2, b2, b2; VPXORD  c3, b3, b3; \
	VPROLD  $12, b0, b0; VPROLD $12, b1, b1; VPROLD $12, b2, b2; VPROLD $12, b3, b3; \
	VPADDD  b0, a0, a0; VPADDD  b1, a1, a1; VPADDD  b2, a2, a2; VPADDD  b3, a3, a3; \
	VPXORD  a0, d0, d0; VPXORD  a1, d1, d1; VPXORD  a2, d2, d2; VPXORD  a3, d3, d3; \
	VPROLD  $8, d0, d0; VPROLD  $8, d1, d1; VPROLD  $8, d2, d2; VPROLD  $8, d3, d3; \
	VPADDD  d0, c0, c0; VPADDD  d1, c1, c1; VPADDD  d2, c2, c2; VPADDD  d3, c3, c3; \
	VPXORD  c0, b0, b0; VPXORD  c1, b1, b1; VPXORD  c2, b2, b2; VPXORD  c3, b3, b3; \
	VPROLD  $7, b0, b0; VPROLD  $7, b1, b1; VPROLD  $7, b2, b2; VPROLD  $7, b3, b3

// TRANSPOSE4 turns words a, b, c, d of four blocks per 128-bit lane into
// four registers that each hold words a..d of one block per lane.
#define TRANSPOSE4(a, b, c, d) \
	VPUNPCKLDQ  b, a, Z16; \
	VPUNPCKHDQ  b, a, Z17; \
	VPUNPCKLDQ  d, c, Z18; \
	VPUNPCKHDQ  d, c, Z19; \
	VPUNPCKLQDQ Z18, Z16, a; \
	VPUNPCKHQDQ Z18, Z16, b; \
	VPUNPCKLQDQ Z19, Z17, c; \
	VPUNPCKHQDQ Z19, Z17, d

// STORE_BLOCKS writes the four blocks 4L+j (L = 0..3) whose words 0-3,
// 4-7, 8-11 and 12-15 sit in lane L of g0, g1, g2 and g3.
#define STORE_BLOCKS(g0, g1, g2, g3, o0, o1, o2, o3) \
	VSHUFI32X4 $0x44, g1, g0, Z16; \
	VSHUFI32X4 $0xEE, g1, g0, Z17; \
	VSHUFI32X4 $0x44, g3, g2, Z18; \
	VSHUFI32X4 $0xEE, g3, g2, Z19; \
	VSHUFI32X4 $0x88, Z18, Z16, Z20; \
	VSHUFI32X4 $0xDD, Z18, Z16, Z21; \
	VSHUFI32X4 $0x88, Z19, Z17, Z22; \
	VSHUFI32X4 $0xDD, Z19, Z17, Z23; \
	VMOVDQU32  Z20, o0(DI); \
	VMOVDQU32  Z21, o1(DI); \
	VMOVDQU32  Z22, o2(DI); \
	VMOVDQU32  Z23, o3(DI)

// LOAD_STATE broadcasts the sixteen words of the state at (AX) into i0-i15
// (one block per lane; the counter, word 12, plus the lane number) and
// copies them to x0-x15, the working registers.
#define LOAD_STATE(i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11, i12, i13, i14, i15, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15) \
	VPBROADCASTD 0(AX), i0; \
	VPBROADCASTD 4(AX), i1; \
	VPBROADCASTD 8(AX), i2; \
	VPBROADCASTD 12(AX), i3; \
	VPBROADCASTD 16(AX), i4; \
	VPBROADCASTD 20(AX), i5; \
	VPBROADCASTD 24(AX), i6; \
	VPBROADCASTD 28(AX), i7; \
	VPBROADCASTD 32(AX), i8; \
	VPBROADCASTD 36(AX), i9; \
	VPBROADCASTD 40(AX), i10; \
	VPBROADCASTD 44(AX), i11; \
	VPBROADCASTD 48(AX), i12; \
	VPADDD       ·laneCounters<>(SB), i12, i12; \
	VPBROADCASTD 52(AX), i13; \
	VPBROADCASTD 56(AX), i14; \
	VPBROADCASTD 60(AX), i15; \
	VMOVDQA32 i0, x0; \
	VMOVDQA32 i1, x1; \
	VMOVDQA32 i2, x2; \
	VMOVDQA32 i3, x3; \
	VMOVDQA32 i4, x4; \
	VMOVDQA32 i5, x5; \
	VMOVDQA32 i6, x6; \
	VMOVDQA32 i7, x7; \
	VMOVDQA32 i8, x8; \
	VMOVDQA32 i9, x9; \
	VMOVDQA32 i10, x10; \
	VMOVDQA32 i11, x11; \
	VMOVDQA32 i12, x12; \
	VMOVDQA32 i13, x13; \
	VMOVDQA32 i14, x14; \
	VMOVDQA32 i15, x15

// ADD_STATE adds the initial state i0-i15 to the rounds' result x0-x15.
#define ADD_STATE(i0, i1, i2, i3, i4, i5, i6, i7, i8, i9, i10, i11, i12, i13, i14, i15, x0, x1, x2, x3, x4, x5, x6, x7, x8, x9, x10, x11, x12, x13, x14, x15) \
	VPADDD i0, x0, x0; \
	VPADDD i1, x1, x1; \
	VPADDD i2, x2, x2; \
	VPADDD i3, x3, x3; \
	VPADDD i4, x4, x4; \
	VPADDD i5, x5, x5; \
	VPADDD i6, x6, x6; \
	VPADDD i7, x7, x7; \
	VPADDD i8, x8, x8; \
	VPADDD i9, x9, x9; \
	VPADDD i10, x10, x10; \
	VPADDD i11, x11, x11; \
	VPADDD i12, x12, x12; \
	VPADDD i13, x13, x13; \
	VPADDD i14, x14, x14; \
	VPADDD i15, x15, x15

// func keystreamPoly16(state *[16]uint32, ks *[1024]byte, p *polyState, msg *byte, blocks, per int)
//
// Writes the keystream of blocks counter..counter+15 (state[12] is the
// counter) to ks and, meanwhile, absorbs blocks 16-byte Poly1305 blocks from
// msg into p, at most per of them between two half rounds.
TEXT ·keystreamPoly16(SB), NOSPLIT, $0-48
	MOVQ state+0(FP), AX
	LOAD_STATE(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)

	MOVQ p+16(FP), R13
	MOVQ 0(R13), R10
	MOVQ 8(R13), R11
	MOVQ 16(R13), R12
	MOVQ msg+24(FP), SI
	MOVQ blocks+32(FP), CX
	MOVQ $10, R9

rounds:
	QR4(Z0, Z4, Z8, Z12, Z1, Z5, Z9, Z13, Z2, Z6, Z10, Z14, Z3, Z7, Z11, Z15)
	MOVQ per+40(FP), R8

polyColumn:
	TESTQ CX, CX
	JZ    diagonal
	TESTQ R8, R8
	JZ    diagonal
	POLY_BLOCK
	DECQ  CX
	DECQ  R8
	JMP   polyColumn

diagonal:
	QR4(Z0, Z5, Z10, Z15, Z1, Z6, Z11, Z12, Z2, Z7, Z8, Z13, Z3, Z4, Z9, Z14)
	DECQ R9
	JNZ  rounds

polyRest:
	TESTQ CX, CX
	JZ    polyDone
	POLY_BLOCK
	DECQ  CX
	JMP   polyRest

polyDone:
	MOVQ R10, 0(R13)
	MOVQ R11, 8(R13)
	MOVQ R12, 16(R13)

	ADD_STATE(Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23, Z24, Z25, Z26, Z27, Z28, Z29, Z30, Z31, Z0, Z1, Z2, Z3, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)

	TRANSPOSE4(Z0, Z1, Z2, Z3)
	TRANSPOSE4(Z4, Z5, Z6, Z7)
	TRANSPOSE4(Z8, Z9, Z10, Z11)
	TRANSPOSE4(Z12, Z13, Z14, Z15)

	MOVQ ks+8(FP), DI
	STORE_BLOCKS(Z0, Z4, Z8, Z12, 0, 256, 512, 768)
	STORE_BLOCKS(Z1, Z5, Z9, Z13, 64, 320, 576, 832)
	STORE_BLOCKS(Z2, Z6, Z10, Z14, 128, 384, 640, 896)
	STORE_BLOCKS(Z3, Z7, Z11, Z15, 192, 448, 704, 960)
	VZEROUPPER
	RET

// TRANSPOSE4_Y is TRANSPOSE4 for YMM registers, with Y16-Y19 as scratch.
#define TRANSPOSE4_Y(a, b, c, d) \
	VPUNPCKLDQ  b, a, Y16; \
	VPUNPCKHDQ  b, a, Y17; \
	VPUNPCKLDQ  d, c, Y18; \
	VPUNPCKHDQ  d, c, Y19; \
	VPUNPCKLQDQ Y18, Y16, a; \
	VPUNPCKHQDQ Y18, Y16, b; \
	VPUNPCKLQDQ Y19, Y17, c; \
	VPUNPCKHQDQ Y19, Y17, d

// STORE_BLOCKS_Y writes blocks j and 4+j, whose words 0-3, 4-7, 8-11 and
// 12-15 sit in the low and the high lane of g0, g1, g2 and g3.
#define STORE_BLOCKS_Y(g0, g1, g2, g3, lo0, lo1, hi0, hi1) \
	VSHUFI32X4 $0, g1, g0, Y16; \
	VSHUFI32X4 $0, g3, g2, Y17; \
	VSHUFI32X4 $3, g1, g0, Y18; \
	VSHUFI32X4 $3, g3, g2, Y19; \
	VMOVDQU32  Y16, lo0(DI); \
	VMOVDQU32  Y17, lo1(DI); \
	VMOVDQU32  Y18, hi0(DI); \
	VMOVDQU32  Y19, hi1(DI)

// func keystream8(state *[16]uint32, ks *[kernelBytes]byte)
//
// Writes the keystream of the eight blocks starting at state[12] to the
// first 512 bytes of ks, one block per 32-bit lane of sixteen YMM
// registers. It needs AVX-512VL
// (VPROLD on YMM and the registers above Y15).
TEXT ·keystream8(SB), NOSPLIT, $0-16
	MOVQ state+0(FP), AX
	LOAD_STATE(Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23, Y24, Y25, Y26, Y27, Y28, Y29, Y30, Y31, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)
	MOVQ $10, R9

rounds8:
	QR4(Y0, Y4, Y8, Y12, Y1, Y5, Y9, Y13, Y2, Y6, Y10, Y14, Y3, Y7, Y11, Y15)
	QR4(Y0, Y5, Y10, Y15, Y1, Y6, Y11, Y12, Y2, Y7, Y8, Y13, Y3, Y4, Y9, Y14)
	DECQ R9
	JNZ  rounds8

	ADD_STATE(Y16, Y17, Y18, Y19, Y20, Y21, Y22, Y23, Y24, Y25, Y26, Y27, Y28, Y29, Y30, Y31, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10, Y11, Y12, Y13, Y14, Y15)

	TRANSPOSE4_Y(Y0, Y1, Y2, Y3)
	TRANSPOSE4_Y(Y4, Y5, Y6, Y7)
	TRANSPOSE4_Y(Y8, Y9, Y10, Y11)
	TRANSPOSE4_Y(Y12, Y13, Y14, Y15)

	MOVQ ks+8(FP), DI
	STORE_BLOCKS_Y(Y0, Y4, Y8, Y12, 0, 32, 256, 288)
	STORE_BLOCKS_Y(Y1, Y5, Y9, Y13, 64, 96, 320, 352)
	STORE_BLOCKS_Y(Y2, Y6, Y10, Y14, 128, 160, 384, 416)
	STORE_BLOCKS_Y(Y3, Y7, Y11, Y15, 192, 224, 448, 480)
	VZEROUPPER
	RET

// func polyBlocks(p *polyState, msg *byte, blocks int)
TEXT ·polyBlocks(SB), NOSPLIT, $0-24
	MOVQ p+0(FP), R13
	MOVQ 0(R13), R10
	MOVQ 8(R13), R11
	MOVQ 16(R13), R12
	MOVQ msg+8(FP), SI
	MOVQ blocks+16(FP), CX

polyLoop:
	TESTQ CX, CX
	JZ    polyEnd
	POLY_BLOCK
	DECQ  CX
	JMP   polyLoop

polyEnd:
	MOVQ R10, 0(R13)
	MOVQ R11, 8(R13)
	MOVQ R12, 16(R13)
	RET

DATA ·laneCounters<>+0(SB)/4, $0
DATA ·laneCounters<>+4(SB)/4, $1
DATA ·laneCounters<>+8(SB)/4, $2
DATA ·laneCounters<>+12(SB)/4, $3
DATA ·laneCounters<>+16(SB)/4, $4
DATA ·laneCounters<>+20(SB)/4, $5
DATA ·laneCounters<>+24(SB)/4, $6
DATA ·laneCounters<>+28(SB)/4, $7
DATA ·laneCounters<>+32(SB)/4, $8
DATA ·laneCounters<>+36(SB)/4, $9
DATA ·laneCounters<>+40(SB)/4, $10
DATA ·laneCounters<>+44(SB)/4, $11
DATA ·laneCounters<>+48(SB)/4, $12
DATA ·laneCounters<>+52(SB)/4, $13
DATA ·laneCounters<>+56(SB)/4, $14
DATA ·laneCounters<>+60(SB)/4, $15
GLOBL ·laneCounters<>(SB), RODATA|NOPTR, $64
