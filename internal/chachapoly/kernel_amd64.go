// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build amd64 && !purego

package chachapoly

import "golang.org/x/sys/cpu"

// haveKernel reports whether the AVX-512 kernel can run here: the CPU has
// AVX-512F and the operating system saves the ZMM registers.
var haveKernel = cpu.X86.HasAVX512F

// keystreamPoly16 writes the keystream of the sixteen blocks starting at
// state[12] to ks and absorbs blocks 16-byte Poly1305 blocks from msg into p,
// at most per of them between two half rounds of the cipher.
//
//go:noescape
func keystreamPoly16(state *[16]uint32, ks *[kernelBytes]byte, p *polyState, msg *byte, blocks, per int)

// polyBlocks absorbs blocks full 16-byte Poly1305 blocks from msg into p.
//
//go:noescape
func polyBlocks(p *polyState, msg *byte, blocks int)
