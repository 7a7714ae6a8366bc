package gomem

import (
	"runtime"
	"testing"
)

// TestReadSeesGoroutinesAndHeap: every gauge is known to this runtime (a
// renamed metric would read 0), and starting goroutines shows in the count.
func TestReadSeesGoroutinesAndHeap(t *testing.T) {
	runtime.GC()
	before := Read()
	if before.HeapLive == 0 || before.Stacks == 0 || before.GCCycles == 0 || before.Goroutines == 0 {
		t.Fatalf("a gauge reads 0 (unknown to this runtime?): %+v", before)
	}
	stop := make(chan struct{})
	started := make(chan struct{})
	for range 50 {
		go func() { started <- struct{}{}; <-stop }()
		<-started
	}
	during := Read()
	close(stop)
	if during.Goroutines < before.Goroutines+50 {
		t.Fatalf("goroutines: %d before, %d with 50 more running", before.Goroutines, during.Goroutines)
	}
	runtime.GC()
	if after := Read(); after.GCCycles <= before.GCCycles {
		t.Fatalf("gc cycles did not advance over a collection: %d then %d", before.GCCycles, after.GCCycles)
	}
}
