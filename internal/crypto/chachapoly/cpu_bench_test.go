// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

package chachapoly

import (
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU is the calling thread's user+system CPU time in nanoseconds.
func threadCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkAEADCPU is the S of internal/sys/procs' model: the CPU time one
// seal or open of a 64-byte and a 1420-byte packet costs the data-path
// AEAD, as CPU-ns/op of the benchmark's own thread, which a shared
// machine's other work does not inflate the way it inflates ns/op.
//
//	go test -run '^$' -bench AEADCPU -count 3 ./internal/crypto/chachapoly
func BenchmarkAEADCPU(b *testing.B) {
	key := make([]byte, KeySize)
	a, err := New(key)
	if err != nil {
		b.Fatal(err)
	}
	for _, size := range []int{64, 1420} {
		b.Run(fmt.Sprintf("seal/%d", size), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			buf := make([]byte, size+Overhead)
			nonce := make([]byte, NonceSize)
			start := threadCPU()
			for b.Loop() {
				a.Seal(buf[:0], nonce, buf[:size], nil)
			}
			b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "CPU-ns/op")
		})
		b.Run(fmt.Sprintf("open/%d", size), func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			nonce := make([]byte, NonceSize)
			sealed := a.Seal(nil, nonce, make([]byte, size), nil)
			buf := make([]byte, len(sealed))
			start := threadCPU()
			for b.Loop() {
				copy(buf, sealed)
				if _, err := a.Open(buf[:0], nonce, buf, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(threadCPU()-start)/float64(b.N), "CPU-ns/op")
		})
	}
}
