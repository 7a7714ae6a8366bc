package device

import (
	"runtime"
	"testing"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/internal/sys/procs"
)

// TestPlanBatchSize: the plan's largest batch is the one the device builds.
func TestPlanBatchSize(t *testing.T) {
	if procs.MaxBatch != conn.IdealBatchSize {
		t.Fatalf("procs.MaxBatch = %d, conn.IdealBatchSize = %d", procs.MaxBatch, conn.IdealBatchSize)
	}
}

// TestDeviceFollowsPlan: a device starts the plan's crypto workers and
// takes its inline-crypto threshold, with two threads running Go code
// (every batch inline) and with eight (a few packets inline), and reports
// both, with the threads, among its counters.
func TestDeviceFollowsPlan(t *testing.T) {
	old := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
	t.Setenv(procs.EnvInline, "")
	for _, threads := range []int{2, 8} {
		runtime.GOMAXPROCS(threads)
		want := procs.Current()
		p := newPair(t, pairOpts{})
		c := p.a.Counters()
		if p.a.cryptoWorkers != want.CryptoWorkers || int(p.a.inlineCrypto.Load()) != want.InlineCrypto {
			t.Errorf("%d threads: device has %d workers, inline %d; plan %+v", threads, p.a.cryptoWorkers, p.a.inlineCrypto.Load(), want)
		}
		if c.GOMAXPROCS != uint64(threads) || c.CryptoWorkers != uint64(want.CryptoWorkers) || c.InlineCrypto != uint64(want.InlineCrypto) {
			t.Errorf("%d threads: counters %d %d %d, plan %+v", threads, c.GOMAXPROCS, c.CryptoWorkers, c.InlineCrypto, want)
		}
		// The tunnel carries packets with either plan.
		p.send(p.ta, p.tb, ipA4, ipB4, "plan")
	}
	if procs.InlineCrypto(2) != procs.MaxBatch || procs.InlineCrypto(8) >= procs.MaxBatch {
		t.Errorf("the model's thresholds changed: %d at 2 threads, %d at 8", procs.InlineCrypto(2), procs.InlineCrypto(8))
	}
	// The operator's threshold.
	t.Setenv(procs.EnvInline, "0")
	p := newPair(t, pairOpts{})
	if p.a.inlineCrypto.Load() != 0 {
		t.Errorf("%s=0: device inlines up to %d", procs.EnvInline, p.a.inlineCrypto.Load())
	}
	p.send(p.ta, p.tb, ipA4, ipB4, "every batch to a worker")
}
