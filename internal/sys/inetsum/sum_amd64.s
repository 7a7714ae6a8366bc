//go:build amd64 && !purego

#include "textflag.h"

// func sumWords(b *byte, n int) uint64
//
// The sum, as an integer, of the n/2 little-endian 16-bit words at b; n is
// a positive multiple of 64 and at most maxWordsBytes (1 MiB), so that no
// 32-bit lane can overflow: each of the 32 lanes adds one word per 64
// bytes, at most 2^14 words of at most 2^16-1. Needs AVX2.
TEXT ·sumWords(SB), NOSPLIT, $0-24
	MOVQ   b+0(FP), SI
	MOVQ   n+8(FP), CX
	VPXOR  Y0, Y0, Y0
	VPXOR  Y1, Y1, Y1
	VPXOR  Y2, Y2, Y2
	VPXOR  Y3, Y3, Y3

loop:
	VPMOVZXWD 0(SI), Y4
	VPMOVZXWD 16(SI), Y5
	VPMOVZXWD 32(SI), Y6
	VPMOVZXWD 48(SI), Y7
	VPADDD    Y4, Y0, Y0
	VPADDD    Y5, Y1, Y1
	VPADDD    Y6, Y2, Y2
	VPADDD    Y7, Y3, Y3
	ADDQ      $64, SI
	SUBQ      $64, CX
	JNZ       loop

	// Widen every 32-bit lane to 64 bits and add them all up.
	VEXTRACTI128 $1, Y0, X4
	VPMOVZXDQ    X0, Y8
	VPMOVZXDQ    X4, Y9
	VPADDQ       Y9, Y8, Y8
	VEXTRACTI128 $1, Y1, X4
	VPMOVZXDQ    X1, Y9
	VPADDQ       Y9, Y8, Y8
	VPMOVZXDQ    X4, Y9
	VPADDQ       Y9, Y8, Y8
	VEXTRACTI128 $1, Y2, X4
	VPMOVZXDQ    X2, Y9
	VPADDQ       Y9, Y8, Y8
	VPMOVZXDQ    X4, Y9
	VPADDQ       Y9, Y8, Y8
	VEXTRACTI128 $1, Y3, X4
	VPMOVZXDQ    X3, Y9
	VPADDQ       Y9, Y8, Y8
	VPMOVZXDQ    X4, Y9
	VPADDQ       Y9, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPADDQ       X9, X8, X8
	VPSHUFD      $0x4e, X8, X9
	VPADDQ       X9, X8, X8
	VMOVQ        X8, AX
	MOVQ         AX, ret+16(FP)
	VZEROUPPER
	RET

