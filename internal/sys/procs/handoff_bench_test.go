package procs

import (
	"sync"
	"syscall"
	"testing"
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
// work done in place; the difference is the hand-off. Run it on one and on
// two CPUs:
//
//	taskset -c 0 go test -run '^$' -bench Handoff -cpu 1,2 ./internal/sys/procs
//	taskset -c 0,1 go test -run '^$' -bench Handoff -cpu 1,2 ./internal/sys/procs
func BenchmarkHandoff(b *testing.B) {
	type batch struct{ done sync.Mutex }
	b.Run("inline", func(b *testing.B) {
		var bt batch
		start := cpuNS()
		for b.Loop() {
			bt.done.Lock()
			bt.done.Unlock()
			bt.done.Lock()
			bt.done.Unlock()
		}
		reportCPU(b, start)
	})
	b.Run("worker", func(b *testing.B) {
		work := make(chan *batch, 1024)
		quit := make(chan struct{})
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
			work <- &bt
			bt.done.Lock() // waits for the worker, as nextBatch does
			bt.done.Unlock()
		}
		reportCPU(b, start)
		close(quit)
	})
}
