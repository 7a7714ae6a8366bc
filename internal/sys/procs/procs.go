// Package procs chooses how a Wirelane data-path process (the WireGuard
// daemon, `wirelane ovpn serve|connect`) uses the host's CPUs: how many
// threads run Go code at once (GOMAXPROCS), how many crypto workers the
// WireGuard device starts, and up to how many packets a batch is sealed
// or opened by the goroutine that built it instead of by a worker (the
// inline-crypto threshold).
//
// The three follow one model (docs/benchmarks-method.md, "Threads and
// inline crypto"), fed with per-packet costs measured on the reference
// machine:
//
//   - Threads: every packet costs the daemon D of CPU (its Go code and its
//     own system calls, which are raw and so run on its threads) and the
//     rest of the host O (the kernel's work outside the daemon, the
//     applications, the tunnel's other end). A daemon that runs Go code on
//     P threads carries at most P/D packets a second; the host at most
//     C/(D+O). More threads than the daemon's share of the host,
//     ceil(C * D/(D+O)), add nothing but idle threads that the Go scheduler
//     wakes to spin on CPUs the kernel needs. With the measured share of
//     0.41 that is 1 thread on 2 CPUs, 2 on 4, 7 on 16 and 27 on 64.
//   - Crypto workers: one per thread; more could not run at once.
//   - Inline crypto: handing a batch of n packets to a worker costs H
//     (a channel send, a worker's wake-up, the producer's wait) and gains
//     the part of the crypto that other threads then do in parallel. With
//     two threads or fewer no thread is free for that (one runs the
//     producer, the other the rest of the flow's pipeline), so every batch
//     is sealed where it was built; with W = threads-1 workers beside the
//     producer a batch is handed off when n*S*(1-1/W) > H, S being the
//     crypto of one MTU-size packet and H the hand-off to a worker whose
//     thread sleeps (11 µs): 36 packets with 3 threads, 22 with 7, 19
//     with 27.
//
// The operator's GOMAXPROCS environment variable always wins for the
// threads (the workers and the threshold then follow it), and
// WIRELANE_INLINE_CRYPTO sets the threshold directly. Apply logs nothing:
// its caller logs the plan (Plan.Log, Plan.LogThreads) once it has a
// logger.
package procs

import (
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
)

// Env is the environment variable that, when set, is obeyed as it is.
const Env = "GOMAXPROCS"

// EnvInline is the environment variable that sets the inline-crypto
// threshold: a number of packets from 0 (every batch to a worker) to
// MaxBatch (every batch inline).
const EnvInline = "WIRELANE_INLINE_CRYPTO"

// MaxBatch is the largest batch the WireGuard device builds
// (conn.IdealBatchSize; a device test keeps the two equal).
const MaxBatch = 128

// The model's inputs, measured on the reference machine (2 CPUs, AMD EPYC,
// 2026-12-02; docs/benchmarks-method.md has the commands).
const (
	// sharePermille is the daemon's share of the CPU its packets cost
	// the host, D/(D+O), in thousandths: a profile of one TCP stream
	// through namespaces put both daemons at 82% of the tunnel's CPU
	// (applications and kernel work outside the daemons the rest), each
	// at 41%.
	sharePermille = 410
	// handoffNS is H: the CPU a hand-off costs when the worker's thread
	// is idle between batches, the only case in which a hand-off can
	// gain anything (a busy worker has no time to give), in nanoseconds:
	// BenchmarkHandoff with 20 µs of the producer's own work between
	// batches, 10-18 µs on two CPUs (the worker's thread is woken, then
	// spins before it sleeps again; back to back a hand-off costs
	// 0.6-0.8 µs).
	handoffNS = 11000
	// cryptoNS is S: sealing or opening one 1420-byte packet, the bulk
	// traffic the workers are for (BenchmarkAEADCPU: 592 and 620 CPU ns;
	// a 64-byte packet costs 236 and 248).
	cryptoNS = 600
)

// Threads returns the model's GOMAXPROCS for a process that may run on
// cpus CPUs: the daemon's share of them, rounded up, at least 1.
func Threads(cpus int) int {
	if cpus <= 1 {
		return 1
	}
	// ceil(cpus * share) in integers.
	t := (cpus*sharePermille + 999) / 1000
	return min(max(t, 1), cpus)
}

// CryptoWorkers returns the model's number of crypto workers for a process
// running Go code on threads threads: one per thread.
func CryptoWorkers(threads int) int { return max(threads, 1) }

// InlineCrypto returns the model's inline-crypto threshold for a process
// running Go code on threads threads: the largest batch that is sealed or
// opened by the goroutine that built it.
func InlineCrypto(threads int) int {
	w := threads - 1 // workers that can run beside the producer
	if w <= 1 {
		return MaxBatch
	}
	// Inline while n*S*(1-1/w) <= H, that is n <= H*w / (S*(w-1)).
	n := handoffNS * w / (cryptoNS * (w - 1))
	return min(max(n, 1), MaxBatch)
}

// Plan is what a data-path process runs with, and why.
type Plan struct {
	// CPUs is how many CPUs the process may run on: the Go runtime's own
	// GOMAXPROCS, which honours CPU affinity and cgroup CPU limits (when
	// the operator set GOMAXPROCS, the CPUs of the affinity mask).
	CPUs int
	// GOMAXPROCS is how many threads run Go code at once.
	GOMAXPROCS int
	// CryptoWorkers is how many goroutines a WireGuard device starts to
	// seal and open batches.
	CryptoWorkers int
	// InlineCrypto is the largest batch sealed or opened by the goroutine
	// that built it.
	InlineCrypto int
	// ThreadsWhy and InlineWhy say where the values come from: "model",
	// or the environment variable that set them.
	ThreadsWhy, InlineWhy string
}

// String is the plan as a log line's message tail.
func (p Plan) String() string {
	return fmt.Sprintf("cpus=%d gomaxprocs=%d (%s) crypto_workers=%d inline_crypto_batch=%d (%s)",
		p.CPUs, p.GOMAXPROCS, p.ThreadsWhy, p.CryptoWorkers, p.InlineCrypto, p.InlineWhy)
}

// Why explains the plan in words, for the log.
func (p Plan) Why() string {
	threads := p.ThreadsWhy
	if threads == "model" {
		threads = fmt.Sprintf("the daemon's share of the host, %d.%02d x %d CPUs, rounded up", sharePermille/1000, sharePermille%1000/10, p.CPUs)
	}
	inline := p.InlineWhy
	if inline == "model" {
		if p.GOMAXPROCS <= 2 {
			inline = "every batch inline: with 2 threads or fewer none is free for a worker"
		} else {
			inline = fmt.Sprintf("larger batches to %d workers, where the hand-off costs less than the parallel crypto saves", p.GOMAXPROCS-1)
		}
	}
	return "threads: " + threads + "; inline crypto: " + inline
}

// Log writes the plan of a WireGuard data path as one Info line.
func (p Plan) Log(l *slog.Logger) {
	l.Info("data path plan", "cpus", p.CPUs, "gomaxprocs", p.GOMAXPROCS, "crypto_workers", p.CryptoWorkers,
		"inline_crypto_batch", p.InlineCrypto, "why", p.Why())
}

// LogThreads writes the part of the plan an OpenVPN data path uses (it
// seals and opens where it reads: no workers, no threshold) as one Info
// line.
func (p Plan) LogThreads(l *slog.Logger) {
	why := p.ThreadsWhy
	if why == "model" {
		why = fmt.Sprintf("the daemon's share of the host, %d.%02d x %d CPUs, rounded up", sharePermille/1000, sharePermille%1000/10, p.CPUs)
	}
	l.Info("data path plan", "cpus", p.CPUs, "gomaxprocs", p.GOMAXPROCS, "why", why)
}

// Model returns the model's plan for a process that may run on cpus CPUs.
func Model(cpus int) Plan {
	cpus = max(cpus, 1)
	t := Threads(cpus)
	return Plan{CPUs: cpus, GOMAXPROCS: t, CryptoWorkers: CryptoWorkers(t), InlineCrypto: InlineCrypto(t),
		ThreadsWhy: "model", InlineWhy: "model"}
}

// Resolve returns the plan for a process that may run on cpus CPUs.
// threads > 0 is the operator's GOMAXPROCS, obeyed as it is; inline is
// the value of EnvInline ("" when unset). A bad inline value is an error,
// and the plan then keeps the model's threshold.
func Resolve(cpus, threads int, inline string) (Plan, error) {
	p := Model(cpus)
	if threads > 0 {
		p.GOMAXPROCS = threads
		p.CryptoWorkers = CryptoWorkers(threads)
		p.InlineCrypto = InlineCrypto(threads)
		p.ThreadsWhy = Env + " set"
	}
	if inline == "" {
		return p, nil
	}
	n, err := strconv.Atoi(inline)
	if err != nil || n < 0 || n > MaxBatch {
		return p, fmt.Errorf("%s=%q: want a number of packets from 0 to %d", EnvInline, inline, MaxBatch)
	}
	p.InlineCrypto = n
	p.InlineWhy = EnvInline + " set"
	return p, nil
}

// applied is the plan Apply set; nil before.
var applied atomic.Pointer[Plan]

// envErr is the complaint about a bad EnvInline value (see EnvError).
var envErr atomic.Pointer[error]

// Apply sets this process's GOMAXPROCS to the plan's and returns the plan,
// which Current returns from then on. Call it once, at the start of a
// data-path program's main function. Like any call of runtime.GOMAXPROCS
// it ends the runtime's own updates when a cgroup CPU limit changes: a
// restarted daemon follows a new limit. A bad EnvInline value is reported by
// EnvError, for the program to refuse to start; the plan then keeps the
// model's threshold.
func Apply() Plan {
	cur := runtime.GOMAXPROCS(0)
	cpus, threads := cur, 0
	if v, ok := os.LookupEnv(Env); ok && v != "" {
		// The runtime has obeyed the variable (or ignored a bad one);
		// what it runs with is the operator's choice.
		cpus, threads = runtime.NumCPU(), cur
	}
	p, err := Resolve(cpus, threads, os.Getenv(EnvInline))
	if err != nil {
		envErr.Store(&err)
	} else {
		envErr.Store(nil)
	}
	if p.GOMAXPROCS != cur {
		runtime.GOMAXPROCS(p.GOMAXPROCS)
	}
	applied.Store(&p)
	return p
}

// EnvError reports a bad EnvInline value seen by Apply (nil when it was
// unset or valid, or before Apply).
func EnvError() error {
	if e := envErr.Load(); e != nil {
		return *e
	}
	return nil
}

// Current returns the plan this process runs with: Apply's, or, in a
// process that did not call it (a test, a program embedding the device),
// the model's workers and threshold for the threads the runtime runs
// with now, EnvInline obeyed when valid.
func Current() Plan {
	if p := applied.Load(); p != nil {
		return *p
	}
	t := runtime.GOMAXPROCS(0)
	p, _ := Resolve(runtime.NumCPU(), t, os.Getenv(EnvInline))
	p.ThreadsWhy = "runtime"
	return p
}
