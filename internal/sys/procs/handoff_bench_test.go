package procs

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cpuNS is this process's user+system CPU time in nanoseconds.
func cpuNS() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reportCPU adds CPU-ns/op: the process's CPU time (every thread) per
// iteration since start.
func reportCPU(b *testing.B, start int64) {
	b.ReportMetric(float64(cpuNS()-start)/float64(b.N), "CPU-ns/op")
}

// BenchmarkHandoff measures H of the model (docs/benchmarks-method.md,
// "Threads and inline crypto"): what handing one batch to a crypto worker
// costs beyond the crypto itself, as the device does it (a channel send to
// a worker parked on its queue, the worker unlocking the batch's mutex, the
// producer's next wait on that mutex). "inline" is the same loop with the
// work done in place; the difference in CPU-ns/op (every thread of the
// process, so a worker's spinning counts) is the hand-off. Run it on one
// and on two CPUs:
//
//	taskset -c 0 go test -run '^$' -bench Handoff -cpu 1,2 ./internal/sys/procs
//	taskset -c 0,1 go test -run '^$' -bench Handoff -cpu 1,2 ./internal/sys/procs
func BenchmarkHandoff(b *testing.B) {
	// gap is the producer's own work between two batches: none (hand-offs
	// back to back, the worker never sleeps) and 20 µs (about one TSO
	// train of a TCP stream at 3 Gbit/s: the worker's thread goes idle
	// between batches, and every hand-off wakes it).
	for _, gap := range []time.Duration{0, 20 * time.Microsecond} {
		b.Run(fmt.Sprintf("gap=%v/inline", gap), func(b *testing.B) { handoff(b, gap, false) })
		b.Run(fmt.Sprintf("gap=%v/worker", gap), func(b *testing.B) { handoff(b, gap, true) })
	}
}

// sink keeps spin's arithmetic from being optimised away.
var sink uint64

// spin busies the calling goroutine for about d of CPU (a fixed count of
// arithmetic, so that a shared machine's other work does not stretch it),
// as a producer reading and routing packets would.
func spin(d time.Duration) {
	x := uint64(88172645463325252)
	for i := int64(0); i < int64(d)/2; i++ { // about 2 ns per round
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	sink += x
}

// handoff runs the loop of BenchmarkHandoff: a batch's mutex locked, the
// batch done in place or by a worker parked on a channel, the producer
// waiting for it, gap of the producer's own work.
func handoff(b *testing.B, gap time.Duration, worker bool) {
	type batch struct{ done sync.Mutex }
	work := make(chan *batch, 1024)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			select {
			case bt := <-work:
				bt.done.Unlock()
			case <-quit:
				return
			}
		}
	}()
	var bt batch
	start := cpuNS()
	for b.Loop() {
		bt.done.Lock()
		if worker {
			work <- &bt
		} else {
			bt.done.Unlock()
		}
		bt.done.Lock() // waits for the worker, as nextBatch does
		bt.done.Unlock()
		spin(gap)
	}
	reportCPU(b, start)
}
