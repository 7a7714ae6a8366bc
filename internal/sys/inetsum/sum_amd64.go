//go:build amd64 && !purego

package inetsum

import "golang.org/x/sys/cpu"

// haveSumWords reports whether sumWords can run here (AVX2). Tests turn
// it off to run the scalar code on the same machine.
var haveSumWords = cpu.X86.HasAVX2

// sumWords returns the sum of the n/2 little-endian 16-bit words at b, n a
// positive multiple of 64 and at most maxWordsBytes.
//
//go:noescape
func sumWords(b *byte, n int) uint64
