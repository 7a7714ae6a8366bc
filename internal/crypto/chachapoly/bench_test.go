// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

package chachapoly

import (
	"crypto/cipher"
	"fmt"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// BenchmarkAEAD compares Seal and Open (in place, as the data path calls
// them) with x/crypto's at packet sizes, in the same run.
//
//	go test -run - -bench AEAD -count 5 ./internal/crypto/chachapoly
func BenchmarkAEAD(b *testing.B) {
	key := make([]byte, KeySize)
	ours, err := New(key)
	if err != nil {
		b.Fatal(err)
	}
	ref, _ := chacha20poly1305.New(key)
	impls := []struct {
		name string
		a    cipher.AEAD
	}{{"x-crypto", ref}, {"wirelane", ours}}
	for _, size := range []int{64, 256, 512, 1024, 1420, 8192} {
		for _, im := range impls {
			b.Run(fmt.Sprintf("seal/%d/%s", size, im.name), func(b *testing.B) {
				buf := make([]byte, size+Overhead)
				nonce := make([]byte, NonceSize)
				b.SetBytes(int64(size))
				for b.Loop() {
					im.a.Seal(buf[:0], nonce, buf[:size], nil)
				}
			})
			b.Run(fmt.Sprintf("open/%d/%s", size, im.name), func(b *testing.B) {
				nonce := make([]byte, NonceSize)
				sealed := im.a.Seal(nil, nonce, make([]byte, size), nil)
				buf := make([]byte, len(sealed))
				b.SetBytes(int64(size))
				for b.Loop() {
					copy(buf, sealed)
					if _, err := im.a.Open(buf[:0], nonce, buf, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
