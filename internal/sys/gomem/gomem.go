// Package gomem reads the Go runtime's own gauges of a process: the live
// heap, the goroutine stacks, the collections done and the goroutines
// alive. The engines report them (WireGuard daemons over UAPI, OpenVPN
// tunnels over their control socket) so that a soak can tell whether a
// process grows.
package gomem

import "runtime/metrics"

// Stats are the process's gauges at one moment.
type Stats struct {
	// HeapLive is the Go heap found live by the last garbage collection
	// (none is forced), in bytes.
	HeapLive uint64 `json:"heap_live_bytes"`
	// Stacks is the goroutine stacks' bytes now.
	Stacks uint64 `json:"stack_bytes"`
	// GCCycles counts the collections done, so that a reader can tell
	// whether one ran since it last looked.
	GCCycles uint64 `json:"gc_cycles"`
	// Goroutines is how many goroutines are alive now.
	Goroutines uint64 `json:"goroutines"`
}

// samples are the runtime/metrics read, in the order of Stats' fields.
var samples = [...]string{
	"/gc/heap/live:bytes",
	"/memory/classes/heap/stacks:bytes",
	"/gc/cycles/total:gc-cycles",
	"/sched/goroutines:goroutines",
}

// Read returns the gauges now. runtime/metrics reads them without stopping
// the world; a name the runtime does not know reads as 0.
func Read() Stats {
	var s [len(samples)]metrics.Sample
	for i := range s {
		s[i].Name = samples[i]
	}
	metrics.Read(s[:])
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	return Stats{HeapLive: v(0), Stacks: v(1), GCCycles: v(2), Goroutines: v(3)}
}
