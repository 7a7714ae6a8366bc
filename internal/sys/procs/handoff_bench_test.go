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

// BenchmarkHandoff measures H of the model (docs/benchmarks-method.md,
// "Threads and inline crypto"): what handing one batch to a crypto worker
// costs beyond the crypto itself, as the device does it (a channel send to
// a worker parked on its queue, the worker unlocking the batch's mutex, the
// producer's next wait on that mutex), against the same loop with the work
// done in place. H-CPU-ns is the difference of the two in CPU time (every
// thread of the process, so the worker's wake-up and spinning count),
// worker/inline their ratio. Run it on one and on two CPUs:
//
//	taskset -c 0 go test -run '^$' -bench Handoff -cpu 1,2 ./internal/sys/procs
//	taskset -c 0,1 go test -run '^$' -bench Handoff -cpu 1,2 ./internal/sys/procs
func BenchmarkHandoff(b *testing.B) {
	// gap is the producer's own work between two batches: none (hand-offs
	// back to back, the worker never sleeps) and 20 µs (about one TSO
	// train of a TCP stream at 3 Gbit/s: the worker's thread goes idle
	// between batches, and every hand-off wakes it).
	for _, gap := range []time.Duration{0, 20 * time.Microsecond} {
		b.Run(fmt.Sprintf("gap=%v", gap), func(b *testing.B) {
			// The same count of iterations each way, in one benchmark,
			// so that the difference is H and the ratio says what a
			// hand-off costs beside the producer's own work.
			inline := handoff(b.N, gap, false)
			worker := handoff(b.N, gap, true)
			b.ReportMetric(inline, "inline-CPU-ns/op")
			b.ReportMetric(worker, "worker-CPU-ns/op")
			b.ReportMetric(worker-inline, "H-CPU-ns")
			b.ReportMetric(worker/inline, "worker/inline")
		})
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

// handoff runs n rounds of BenchmarkHandoff's loop and returns the CPU
// per round: a batch's mutex locked, the batch done in place or by a
// worker parked on a channel, the producer waiting for it, gap of the
// producer's own work.
func handoff(n int, gap time.Duration, worker bool) float64 {
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
	for range n {
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
	return float64(cpuNS()-start) / float64(max(n, 1))
}
