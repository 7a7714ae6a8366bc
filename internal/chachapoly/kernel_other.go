// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build !amd64 || purego

package chachapoly

// haveKernel is false: the kernel is written for amd64 only, and New
// returns golang.org/x/crypto's implementation everywhere else.
var haveKernel = false

// haveIFMA is false with haveKernel.
var haveIFMA = false

func keystreamPoly16(state *[16]uint32, ks *[kernelBytes]byte, p *polyState, msg *byte, blocks, per int) {
	panic("chachapoly: no kernel on this platform")
}

func polyBlocks(p *polyState, msg *byte, blocks int) {
	panic("chachapoly: no kernel on this platform")
}

func polyIFMA(lanes *[3][8]uint64, r *[3]uint64, msg *byte, groups int) {
	panic("chachapoly: no kernel on this platform")
}

func keystream8(state *[16]uint32, ks *[kernelBytes]byte) {
	panic("chachapoly: no kernel on this platform")
}
