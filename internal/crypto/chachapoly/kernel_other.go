// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

//go:build !amd64 || purego

package chachapoly

// The kernels are written for amd64 only: New returns
// golang.org/x/crypto's implementation everywhere else.
const cpuKernel, cpuIFMA = false, false

// haveKernel and haveIFMA are what New uses: always false here.
var haveKernel, haveIFMA = false, false

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
