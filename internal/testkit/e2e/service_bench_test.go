package e2e

// The data path's cost of the service: the same WireGuard tunnel measured
// hosted by the service (scraped once a second, 50 event subscribers
// reading) and as the plain `wirelaned IFNAME` daemon it is underneath
// with the service stopped (the daemon outlives it), alternating in one
// run. Not part of CI: WIRELANE_SERVICE_BENCH=ROUNDSxSECONDS runs it
// (docs/benchmarks.md, "The service").

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// cpuTicks returns a process's user+system clock ticks (0 when gone).
func cpuTicks(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return u + k
}

// TestServiceBenchmark prints, per round and as medians, the iperf3 TCP
// throughput A->B through the tunnel and the CPU seconds per GB of both
// daemons (and of the service, when it runs), and the ratios hosted/plain.
// It asserts nothing about speed.
func TestServiceBenchmark(t *testing.T) {
	spec := os.Getenv("WIRELANE_SERVICE_BENCH")
	if spec == "" {
		t.Skip("a benchmark: WIRELANE_SERVICE_BENCH=ROUNDSxSECONDS runs it (for example 6x8)")
	}
	var rounds, secs int
	if _, err := fmt.Sscanf(spec, "%dx%d", &rounds, &secs); err != nil || rounds < 1 || secs < 1 {
		t.Fatalf("WIRELANE_SERVICE_BENCH=%q: want ROUNDSxSECONDS", spec)
	}
	sb := newServiceBed(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), sb.a)
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-W", "2", "10.78.0.2")
	pa, pb := daemonPid(sb.nsA, sb.a), daemonPid(sb.nsB, sb.b)
	if pa == 0 || pb == 0 {
		t.Fatalf("daemons: %d %d", pa, pb)
	}

	// load starts the scraper and the subscribers on the running service.
	load := func() (stop func()) {
		lctx, lcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := time.NewTicker(time.Second)
			defer tk.Stop()
			for {
				sb.c.Metrics(lctx)
				select {
				case <-lctx.Done():
					return
				case <-tk.C:
				}
			}
		}()
		for range 50 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				evs, err := sb.c.Events(lctx)
				if err != nil {
					return
				}
				defer evs.Close()
				for evs.Next() {
				}
			}()
		}
		time.Sleep(500 * time.Millisecond)
		return func() { lcancel(); wg.Wait() }
	}
	type result struct{ gbps, cpuPerGB, svcPerGB float64 }
	run := func(port int) result {
		netns.Start(t, sb.nsB, "iperf3", "-s", "-1", "-B", "10.78.0.2", "-p", strconv.Itoa(port))
		time.Sleep(300 * time.Millisecond)
		svcPid := 0
		if sb.proc != nil {
			svcPid = sb.proc.Cmd.Process.Pid
		}
		c0, s0 := cpuTicks(pa)+cpuTicks(pb), cpuTicks(svcPid)
		out, err := netns.Try(sb.nsA, nil, "iperf3", "-c", "10.78.0.2", "-p", strconv.Itoa(port), "-t", strconv.Itoa(secs), "-J")
		c1, s1 := cpuTicks(pa)+cpuTicks(pb), cpuTicks(svcPid)
		var res iperfResult
		if jerr := json.Unmarshal([]byte(out), &res); jerr != nil || err != nil || res.Error != "" {
			t.Fatalf("iperf3: %v %v %s\n%s", err, jerr, res.Error, out)
		}
		gb := res.End.SumReceived.Bytes / 1e9
		const hz = 100 // USER_HZ
		return result{res.End.SumReceived.BitsPerSecond / 1e9, (c1 - c0) / hz / gb, (s1 - s0) / hz / gb}
	}
	var hosted, plain []result
	port := 5400
	for i := range rounds {
		for _, withService := range []bool{i%2 == 0, i%2 != 0} {
			port++
			if withService {
				if sb.proc == nil {
					sb.start(t)
				}
				stop := load()
				r := run(port)
				stop()
				hosted = append(hosted, r)
				t.Logf("round %d hosted: %.2f Gbit/s, daemons %.2f CPU s/GB, service %.3f CPU s/GB", i+1, r.gbps, r.cpuPerGB, r.svcPerGB)
			} else {
				if sb.proc != nil {
					sb.stop(t)
					sb.proc = nil
				}
				r := run(port)
				plain = append(plain, r)
				t.Logf("round %d plain:  %.2f Gbit/s, daemons %.2f CPU s/GB", i+1, r.gbps, r.cpuPerGB)
			}
		}
	}
	if sb.proc == nil {
		sb.start(t) // for the deferred down
	}
	med := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		if len(v)%2 == 1 {
			return v[len(v)/2]
		}
		return (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	g := func(r result) float64 { return r.gbps }
	c := func(r result) float64 { return r.cpuPerGB }
	s := func(r result) float64 { return r.svcPerGB }
	t.Logf("medians over %d rounds of %d s: hosted %.2f Gbit/s (daemons %.2f CPU s/GB, service %.3f), plain %.2f Gbit/s (daemons %.2f CPU s/GB)",
		rounds, secs, med(hosted, g), med(hosted, c), med(hosted, s), med(plain, g), med(plain, c))
	t.Logf("ratios hosted/plain: throughput %.3f, daemons' CPU per GB %.3f; (daemons+service)/daemons %.3f",
		med(hosted, g)/med(plain, g), med(hosted, c)/med(plain, c), (med(hosted, c)+med(hosted, s))/med(plain, c))
}
