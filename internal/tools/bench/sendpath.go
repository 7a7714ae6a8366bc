package bench

// The send-path A/B: what the route costs per batch, the borrowed route
// (noref) against ref mode, as the number of threads sending at once
// grows. The same loop as conn's BenchmarkSend/sink: every goroutine has
// its own Sender and sends batches of 32 datagrams to a Bind that only
// looks at the route, so nothing but the route's cost is measured:
//
//	noref: reader.Enter(); sender.Send(batch, cache.Borrow()); reader.Exit()
//	ref:   refEndpoint.send (device read lock, endpoint mutex, a Route
//	       built for the batch), the model of the device's ref path
//	       (device/refmode.go)
//
// The figure is CPU nanoseconds per batch: the window, times the CPUs the
// goroutines could use (GOMAXPROCS, at most the machine's CPUs), divided
// by the batches sent. Flat as threads grow means the route costs each
// batch the same however many goroutines send at once.

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/conn"
)

// sendPathThreads are the GOMAXPROCS values measured, as conn's benchmark
// is run with -cpu 1,2,4,8.
var sendPathThreads = []int{1, 2, 4, 8}

// sendPathBatch is the datagrams per batch, as in conn's benchmark.
const sendPathBatch = 32

// sendPathCase names the case for n threads.
func sendPathCase(n int) string {
	if n == 1 {
		return "1 thread"
	}
	return fmt.Sprintf("%d threads", n)
}

// sinkBind is a Bind whose Send only checks that it was given a route.
type sinkBind struct{}

var errNoRoute = errors.New("bench: send without a route")

func (sinkBind) Open(uint16) ([]conn.ReceiveFunc, uint16, error) { return nil, 0, nil }
func (sinkBind) Close() error                                    { return nil }
func (sinkBind) SetMark(uint32) error                            { return nil }
func (sinkBind) BatchSize() int                                  { return sendPathBatch }
func (sinkBind) Send(bufs [][]byte, r *conn.Route) error {
	if r == nil || len(bufs) == 0 {
		return errNoRoute
	}
	return nil
}

// refEndpoint is the locked endpoint of the device's ref mode
// (device/refmode.go, unexported there), as far as a send is concerned:
// the device's read lock around the batch, the endpoint's mutex around its
// copy, a Route built for the batch.
type refEndpoint struct {
	mu  sync.Mutex // guards ep and gen
	ep  conn.Endpoint
	gen uint64
}

func (e *refEndpoint) send(tx conn.Sender, devLock *sync.RWMutex, bufs [][]byte) error {
	devLock.RLock()
	defer devLock.RUnlock()
	e.mu.Lock()
	ep, gen := e.ep, e.gen
	e.mu.Unlock()
	return tx.Send(bufs, conn.NewRoute(ep, gen))
}

// sendPathRate runs threads goroutines sending batches for window with
// GOMAXPROCS set to threads, and returns CPU nanoseconds per batch.
func sendPathRate(ref bool, threads int, window time.Duration) (float64, error) {
	old := runtime.GOMAXPROCS(threads)
	defer runtime.GOMAXPROCS(old)
	ep := conn.Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:51820")}
	var (
		rcu   conn.RCU
		cache conn.RouteCache
		devMu sync.RWMutex
	)
	cache.Set(ep)
	refEP := &refEndpoint{ep: ep, gen: 1}

	total, elapsed, err := timedWorkers(threads, window, func(stop *atomic.Bool) (uint64, error) {
		tx, release := conn.NewSender(sinkBind{})
		defer release()
		rd := rcu.NewReader()
		defer rd.Release()
		bufs := make([][]byte, sendPathBatch)
		for i := range bufs {
			bufs[i] = make([]byte, 1200)
		}
		var n uint64
		for !stop.Load() {
			for range 256 {
				var err error
				if ref {
					err = refEP.send(tx, &devMu, bufs)
				} else {
					rd.Enter()
					err = tx.Send(bufs, cache.Borrow())
					rd.Exit()
				}
				if err != nil {
					return 0, err
				}
			}
			n += 256
		}
		return n, nil
	})
	if err != nil {
		return 0, err
	}
	if total == 0 {
		return 0, errors.New("bench: no batch sent")
	}
	cpus := float64(min(threads, runtime.NumCPU()))
	return float64(elapsed.Nanoseconds()) * cpus / float64(total), nil
}

// sendPathSection measures noref and ref mode at every thread count.
func sendPathSection(r *Report, cfg Config, p *progress) error {
	window := min(cfg.Duration, time.Second)
	for rep := 0; rep < cfg.Repeats; rep++ {
		for _, threads := range sendPathThreads {
			for _, e := range []struct {
				engine string
				ref    bool
			}{{EngineWirelane, false}, {EngineWirelaneRef, true}} {
				p.step(fmt.Sprintf("sendpath %s %s, repeat %d/%d", e.engine, sendPathCase(threads), rep+1, cfg.Repeats))
				v, err := sendPathRate(e.ref, threads, window)
				if err != nil {
					return err
				}
				r.Add(SectionSendPath, sendPathCase(threads), MetricCPUNsPerBatch, e.engine, LowerIsBetter, v)
			}
		}
	}
	return nil
}
