//go:build !amd64 || purego

package inetsum

// haveSumWords is false where there is no vector code.
var haveSumWords = false

func sumWords(b *byte, n int) uint64 { panic("inetsum: no vector code on this platform") }
