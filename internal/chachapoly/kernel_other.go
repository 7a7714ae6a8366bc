// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build !amd64 || purego

package chachapoly

// haveKernel is false: the kernel is written for amd64 only, and New
// returns golang.org/x/crypto's implementation everywhere else.
const haveKernel = false

func keystreamPoly16(state *[16]uint32, ks *[kernelBytes]byte, p *polyState, msg *byte, blocks, per int) {
	panic("chachapoly: no kernel on this platform")
}

func polyBlocks(p *polyState, msg *byte, blocks int) {
	panic("chachapoly: no kernel on this platform")
}
