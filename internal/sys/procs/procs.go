// Package procs chooses how many threads may run Go code at once
// (GOMAXPROCS) in a Wirelane data-path process: the WireGuard daemon and
// `wirelane ovpn serve|connect`.
//
// On a host that gives the daemon two CPUs, the daemon runs Go code on one
// of them. Each tunnel packet costs the kernel about as much CPU as it costs
// the daemon (copies between user and kernel memory, the TCP or UDP stack,
// softirq), and the applications that send and receive the traffic run on
// the same two CPUs. With a second thread allowed to run Go code, the Go
// scheduler wakes it whenever one of the daemon's goroutines readies
// another, and it spins looking for work on the CPU the kernel needs. One
// thread ends that: through network namespaces the WireGuard daemon
// carried 9% more TCP at 8% less CPU per byte, and the OpenVPN server and
// client 11-14% more (docs/benchmarks.md and docs/openvpn.md have the
// A/Bs). Larger hosts keep the Go default, which has not been measured
// against anything smaller.
//
// An operator's GOMAXPROCS environment variable always wins.
package procs

import (
	"os"
	"runtime"
)

// Env is the environment variable that, when set, is obeyed as it is.
const Env = "GOMAXPROCS"

// Choose returns the GOMAXPROCS a daemon runs with: current is the Go
// runtime's own choice (which honours CPU affinity and cgroup CPU limits),
// set tells whether the operator set GOMAXPROCS.
func Choose(current int, set bool) int {
	if set || current != 2 {
		return current
	}
	return 1
}

// Apply sets this process's GOMAXPROCS to Choose's answer and returns it.
// Call it once, at the start of a daemon's main function.
func Apply() int {
	v, ok := os.LookupEnv(Env)
	cur := runtime.GOMAXPROCS(0)
	n := Choose(cur, ok && v != "")
	if n != cur {
		runtime.GOMAXPROCS(n)
	}
	return n
}
