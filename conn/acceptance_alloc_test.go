package conn

// testing.AllocsPerRun truncates: 199 allocations over 200 runs report 0.
// This test counts every allocation of 2,000 borrow+send batches exactly
// (every allocation of the process is recorded with its stack) and wants
// none by this package, for IPv4 and IPv6, with and without a sticky source, GSO
// on and off. It sends the way the device does, through a Sender of its own
// (NewSender): Bind.Send's shared pool of scratch space allocates now and
// then by design, which TestSendAllocatesNothing bounds with AllocsPerRun.

import (
	"fmt"
	"net/netip"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestAcceptanceSendAllocatesExactlyNothing(t *testing.T) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1 // record every allocation with its stack
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	for _, gso := range []bool{false, true} {
		b, _, _ := openBind(t, Options{DisableGSO: !gso, DisableGRO: true, DisableSourceWatch: true})
		if g, _ := b.Offload(); g != gso {
			continue
		}
		for _, tc := range []struct {
			name    string
			network string
			ip, src netip.Addr
		}{
			{"v4", "udp4", netip.MustParseAddr("127.0.0.1"), netip.Addr{}},
			{"v4 sticky", "udp4", netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.1")},
			{"v6", "udp6", netip.IPv6Loopback(), netip.Addr{}},
			{"v6 sticky", "udp6", netip.IPv6Loopback(), netip.IPv6Loopback()},
		} {
			t.Run(map[bool]string{false: "plain ", true: "GSO "}[gso]+tc.name, func(t *testing.T) {
				if tc.ip.Is6() {
					needIPv6(t, b)
				}
				s := newSink(t, tc.network, tc.ip, nil)
				var cache RouteCache
				cache.Set(Endpoint{Dst: s.addr, Src: tc.src, SrcIfindex: 1})
				rd := b.RCU().NewReader()
				defer rd.Release()
				tx, release := NewSender(b)
				defer release()
				bufs := append(makeBufs(16, 1000), make([]byte, 200))
				send := func() {
					rd.Enter()
					err := tx.Send(bufs, cache.Borrow())
					rd.Exit()
					if err != nil {
						t.Fatal(err)
					}
				}
				for i := 0; i < 100; i++ {
					send()
				}
				before := allocSites()
				var ms0, ms1 runtime.MemStats
				runtime.ReadMemStats(&ms0)
				for i := 0; i < 2000; i++ {
					send()
				}
				runtime.ReadMemStats(&ms1)
				n := ms1.Mallocs - ms0.Mallocs
				if n == 0 {
					return
				}
				// Something in the process allocated: find out what. The
				// runtime allocates when it starts a thread for a P that
				// a blocked sendmmsg left (sysmon -> newm); that is not
				// the send path's doing, anything in this package is.
				for site, count := range allocSitesSince(before) {
					if strings.Contains(site, "wirelane/conn.") {
						t.Errorf("%d allocations in 2000 batches at:\n%s", count, site)
					} else {
						t.Logf("%d allocations outside the send path, at:\n%s", count, site)
					}
				}
			})
		}
	}
}

// allocSites returns the number of objects allocated so far at every call
// stack, as of a collection run now (the profile is published at the end
// of a collection).
func allocSites() map[string]int64 {
	runtime.GC()
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+50)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	sites := map[string]int64{}
	for _, r := range recs {
		var b strings.Builder
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			fmt.Fprintf(&b, "\t%s\n", f.Function)
			if !more {
				break
			}
		}
		sites[b.String()] += r.AllocObjects
	}
	return sites
}

// allocSitesSince returns the stacks that allocated since before, with
// their counts.
func allocSitesSince(before map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for site, n := range allocSites() {
		if strings.Contains(site, "conn.allocSites") {
			continue // the first snapshot's own allocations
		}
		if d := n - before[site]; d > 0 {
			out[site] = d
		}
	}
	return out
}
