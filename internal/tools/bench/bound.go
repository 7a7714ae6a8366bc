package bench

// The bound: how fast this machine seals and opens 1420-byte WireGuard
// payloads with ChaCha20-Poly1305, on one core and on all of them: with
// golang.org/x/crypto's (what wireguard-go uses) and with Wirelane's
// internal/crypto/chachapoly (AVX-512 kernels where the CPU has them). (The other bound, plain veth throughput, is an engine of the
// netns section.) Every data packet of either engine pays one seal and one
// open, so a tunnel moving G Gbit/s through one machine needs at least
// G/8 GB/s of each.

import (
	"crypto/cipher"
	"crypto/rand"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wirelane/wirelane/internal/crypto/chachapoly"
)

const boundSize = 1420

// boundWindow caps one AEAD measurement; the figure is stable within a
// second.
const boundWindow = time.Second

// timedWorkers runs workers goroutines for window and returns the work
// units they report and the time from start to the last one's end. Each
// calls work(stop) once; work counts units until stop is set and returns
// its count, or an error that ends the measurement.
func timedWorkers(workers int, window time.Duration, work func(stop *atomic.Bool) (uint64, error)) (uint64, time.Duration, error) {
	var stop atomic.Bool
	var total atomic.Uint64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := work(&stop)
			if err != nil {
				errs <- err
				return
			}
			total.Add(n)
		}()
	}
	time.Sleep(window)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(start)
	select {
	case err := <-errs:
		return 0, elapsed, err
	default:
	}
	return total.Load(), elapsed, nil
}

// aeadRate returns GB/s of plaintext sealed (or opened, when open is true)
// by workers goroutines during window.
func aeadRate(newAEAD func([]byte) (cipher.AEAD, error), open bool, workers int, window time.Duration) (float64, error) {
	key := make([]byte, chacha20poly1305.KeySize)
	if _, err := rand.Read(key); err != nil {
		return 0, err
	}
	aead, err := newAEAD(key)
	if err != nil {
		return 0, err
	}
	total, elapsed, err := timedWorkers(workers, window, func(stop *atomic.Bool) (uint64, error) {
		plain := make([]byte, boundSize)
		out := make([]byte, 0, boundSize+aead.Overhead())
		nonce := make([]byte, aead.NonceSize())
		sealed := aead.Seal(nil, nonce, plain, nil)
		var n uint64
		for !stop.Load() {
			for i := 0; i < 64; i++ {
				if open {
					if _, err := aead.Open(out[:0], nonce, sealed, nil); err != nil {
						return 0, fmt.Errorf("open failed: %w", err)
					}
				} else {
					out = aead.Seal(out[:0], nonce, plain, nil)
				}
			}
			n += 64
		}
		return n, nil
	})
	if err != nil {
		return 0, err
	}
	return float64(total) * boundSize / elapsed.Seconds() / 1e9, nil
}

// boundSection measures seal and open on one core and on all cores.
func boundSection(r *Report, cfg Config, p *progress) error {
	window := min(cfg.Duration, boundWindow)
	cpus := runtime.GOMAXPROCS(0)
	for rep := 0; rep < cfg.Repeats; rep++ {
		for _, c := range []struct {
			cas     string
			open    bool
			workers int
			metric  string
		}{
			{CaseSeal, false, 1, MetricGBps1},
			{CaseOpen, true, 1, MetricGBps1},
			{CaseSeal, false, cpus, MetricGBpsAll},
			{CaseOpen, true, cpus, MetricGBpsAll},
		} {
			for _, impl := range []struct {
				engine string
				make   func([]byte) (cipher.AEAD, error)
			}{{EngineXCrypto, chacha20poly1305.New}, {EngineWirelane, chachapoly.New}} {
				p.step(fmt.Sprintf("bound %s %s %s, repeat %d/%d", impl.engine, c.cas, c.metric, rep+1, cfg.Repeats))
				v, err := aeadRate(impl.make, c.open, c.workers, window)
				if err != nil {
					return err
				}
				r.Add(SectionBound, c.cas, c.metric, impl.engine, HigherIsBetter, v)
			}
		}
	}
	return nil
}
