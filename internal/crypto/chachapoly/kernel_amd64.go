// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build amd64 && !purego

package chachapoly

import "golang.org/x/sys/cpu"

// cpuKernel reports whether the AVX-512 kernels can run here: the CPU has
// AVX-512F and VL, and the operating system saves the ZMM registers.
var cpuKernel = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

// cpuIFMA reports whether Poly1305 can use the eight-lane IFMA kernel. Tests
// turn it off to run the scalar Poly1305 path on the same machine.
var cpuIFMA = cpuKernel && cpu.X86.HasAVX512IFMA

// haveKernel and haveIFMA are what New uses: the CPU's abilities unless
// SetMode (or EnvAEAD) asked for the generic code.
var haveKernel, haveIFMA = cpuKernel, cpuIFMA

// keystreamPoly16 writes the keystream of the sixteen blocks starting at
// state[12] to ks and absorbs blocks 16-byte Poly1305 blocks from msg into p,
// at most per of them between two half rounds of the cipher.
//
//go:noescape
func keystreamPoly16(state *[16]uint32, ks *[kernelBytes]byte, p *polyState, msg *byte, blocks, per int)

// keystream8 writes the keystream of the eight blocks starting at state[12]
// to ks[:512]. It needs AVX-512VL.
//
//go:noescape
func keystream8(state *[16]uint32, ks *[kernelBytes]byte)

// polyBlocks absorbs blocks full 16-byte Poly1305 blocks from msg into p.
//
//go:noescape
func polyBlocks(p *polyState, msg *byte, blocks int)

// polyIFMA absorbs groups*8 full blocks from msg into eight radix-2^44
// accumulators (lanes, limb-major) with r (radix 2^44), leaving their sum
// equal to the serial result. groups must be at least 1.
//
//go:noescape
func polyIFMA(lanes *[3][8]uint64, r *[3]uint64, msg *byte, groups int)
