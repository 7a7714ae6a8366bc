package conn

// Tests of the noref send path's invariants (docs/noref-send-path.md):
//
//	1 TestSendAllocatesNothing          stable route: 0 allocations per batch
//	  TestReceiveAllocatesNothing       receive, GRO split included: 0 allocations
//	2 TestSendNeedsNoWriterLock         sends complete under the writer lock
//	3 TestConcurrentSendersAndWriters   stamped packets: right place, gens monotonic
//	4 TestNoPacketToOldDestination      after Replace returns, nothing to the old place
//	  TestCloseWaitsForSenders          after Close returns, no send is writing
//	5 TestRoam* (route_test.go)         one publication per roaming batch
//	6 TestSourceWatch* (sources_test.go) one rebuild per netlink event
//	7 BenchmarkSend* (bench_test.go)    ref mode beside noref

import (
	"encoding/binary"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sink is a plain UDP socket that counts stamped datagrams per generation.
type sink struct {
	conn  *net.UDPConn
	addr  netip.AddrPort
	mu    sync.Mutex
	byGen map[uint64]int // guarded by mu
	bad   []string       // guarded by mu
	done  chan struct{}
}

func newSink(t testing.TB, network string, ip netip.Addr, check func(s *sink, gen uint64) string) *sink {
	t.Helper()
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(8 << 20)
	s := &sink{conn: c, addr: c.LocalAddr().(*net.UDPAddr).AddrPort(), byGen: map[uint64]int{}, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		buf := make([]byte, 2048)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if n < 24 {
				continue
			}
			gen := binary.BigEndian.Uint64(buf[16:24])
			s.mu.Lock()
			s.byGen[gen]++
			if check != nil {
				if msg := check(s, gen); msg != "" && len(s.bad) < 10 {
					s.bad = append(s.bad, msg)
				}
			}
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { c.Close(); <-s.done })
	return s
}

func (s *sink) count(gen uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byGen[gen]
}

// stamp writes (sender, seq, gen) into each buffer.
func stamp(bufs [][]byte, sender, seq, gen uint64) {
	for _, b := range bufs {
		binary.BigEndian.PutUint64(b[0:8], sender)
		binary.BigEndian.PutUint64(b[8:16], seq)
		binary.BigEndian.PutUint64(b[16:24], gen)
	}
}

func makeBufs(n, size int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
	}
	return bufs
}

// Invariant 1.
func TestSendAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, gso := range []bool{false, true} {
		b, _, _ := openBind(t, Options{DisableGSO: !gso, DisableGRO: true, DisableSourceWatch: true})
		if g, _ := b.Offload(); g != gso {
			t.Logf("GSO %v unavailable: skipping those cases", gso)
			continue
		}
		for _, tc := range []struct {
			name string
			net  string
			ip   netip.Addr
			src  netip.Addr
		}{
			{"v4", "udp4", netip.MustParseAddr("127.0.0.1"), netip.Addr{}},
			{"v4 sticky", "udp4", netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.1")},
			{"v6", "udp6", netip.IPv6Loopback(), netip.Addr{}},
			{"v6 sticky", "udp6", netip.IPv6Loopback(), netip.IPv6Loopback()},
		} {
			name := tc.name
			if gso {
				name += " GSO"
			}
			t.Run(name, func(t *testing.T) {
				if tc.ip.Is6() {
					needIPv6(t, b)
				}
				s := newSink(t, tc.net, tc.ip, nil)
				var cache RouteCache
				cache.Set(Endpoint{Dst: s.addr, Src: tc.src, SrcIfindex: 1})
				rd := b.RCU().NewReader()
				defer rd.Release()
				bufs := makeBufs(32, 1200)
				bufs = append(bufs, make([]byte, 300), make([]byte, 1400)) // break the run: several messages
				send := func() {
					rd.Enter()
					r := cache.Borrow()
					if err := b.Send(bufs, r); err != nil {
						t.Fatal(err)
					}
					rd.Exit()
				}
				send() // warm the pool
				if a := testing.AllocsPerRun(200, send); a != 0 {
					t.Fatalf("%v allocations per Borrow+Send, want 0", a)
				}
				if s.count(0) == 0 {
					time.Sleep(50 * time.Millisecond)
					if s.count(0) == 0 {
						t.Fatal("nothing arrived")
					}
				}
			})
		}
	}
}

// TestReceiveAllocatesNothing: a receive call, GRO split included,
// allocates nothing per datagram or per batch.
func TestReceiveAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, gro := range []bool{false, true} {
		a, _, _ := openBind(t, Options{DisableSourceWatch: true, DisableGRO: true})
		_, bfns, bport := openBind(t, Options{DisableSourceWatch: true, DisableGRO: !gro, DisableGSO: true})
		r := NewRoute(Endpoint{Dst: loop4(bport), Src: netip.MustParseAddr("127.0.0.1"), SrcIfindex: 1}, 1)
		out := makeBufs(16, 1000)
		bufs := makeBufs(IdealBatchSize, groBufferSize)
		sizes := make([]int, IdealBatchSize)
		eps := make([]Endpoint, IdealBatchSize)
		got := 0
		round := func() {
			if err := a.Send(out, r); err != nil {
				t.Fatal(err)
			}
			for want := got + len(out); got < want; {
				n, err := bfns[0](bufs, sizes, eps)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < n; i++ {
					if sizes[i] != 1000 || eps[i].Src != r.Endpoint.Src {
						t.Fatalf("datagram %d: %d bytes from %v", i, sizes[i], eps[i])
					}
				}
				got += n
			}
		}
		round()
		if n := testing.AllocsPerRun(50, round); n != 0 {
			t.Fatalf("GRO %v: %v allocations per send+receive round", gro, n)
		}
	}
}

// Invariant 2.
func TestSendNeedsNoWriterLock(t *testing.T) {
	b, _, _ := openBind(t, Options{DisableSourceWatch: true})
	s := newSink(t, "udp4", netip.MustParseAddr("127.0.0.1"), nil)
	var cache RouteCache
	cache.Set(Endpoint{Dst: s.addr})
	unlock := cache.LockWriter()
	defer unlock()
	done := make(chan error, 1)
	go func() {
		rd := b.RCU().NewReader()
		defer rd.Release()
		bufs := makeBufs(16, 100)
		for i := 0; i < 100; i++ {
			rd.Enter()
			err := b.Send(bufs, cache.Borrow())
			rd.Exit()
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("sends blocked while the writer lock was held")
	}
}

// Invariant 3.
func TestConcurrentSendersAndWriters(t *testing.T) {
	b, _, _ := openBind(t, Options{DisableSourceWatch: true})
	var genMu sync.Mutex
	genDst := map[uint64]netip.AddrPort{} // guarded by genMu; filled by writers after Set
	var sinks []*sink
	for i := 0; i < 3; i++ {
		sinks = append(sinks, newSink(t, "udp4", netip.MustParseAddr("127.0.0.1"), nil))
	}
	var cache RouteCache
	r0, _ := cache.Set(Endpoint{Dst: sinks[0].addr})
	genDst[r0.Gen] = sinks[0].addr

	const senders, iters = 4, 400
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for w := 0; w < 2; w++ {
		writers.Add(1)
		go func(w int) {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ep := Endpoint{Dst: sinks[(w+i)%len(sinks)].addr}
				if i%3 == 0 {
					ep.Src, ep.SrcIfindex = netip.MustParseAddr("127.0.0.1"), 1
				}
				genMu.Lock() // the writer's own record, not the cache's lock
				r, changed := cache.Set(ep)
				if changed {
					genDst[r.Gen] = r.Endpoint.Dst
				}
				genMu.Unlock()
				runtime.Gosched()
			}
		}(w)
	}
	var wg sync.WaitGroup
	errs := make(chan string, senders)
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			rd := b.RCU().NewReader()
			defer rd.Release()
			bufs := makeBufs(4, 64)
			var last uint64
			for i := 0; i < iters; i++ {
				rd.Enter()
				r := cache.Borrow()
				if r.Gen < last {
					errs <- "generation went backwards"
					rd.Exit()
					return
				}
				last = r.Gen
				stamp(bufs, uint64(s), uint64(i), r.Gen)
				err := b.Send(bufs, r)
				rd.Exit()
				if err != nil {
					errs <- err.Error()
					return
				}
			}
		}(s)
	}
	wg.Wait()
	close(stop)
	writers.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	time.Sleep(100 * time.Millisecond)
	total := 0
	genMu.Lock()
	defer genMu.Unlock()
	for _, s := range sinks {
		s.mu.Lock()
		for gen, n := range s.byGen {
			total += n
			if dst, ok := genDst[gen]; !ok || dst != s.addr {
				t.Errorf("%d datagrams of generation %d reached %v; that generation's destination was %v", n, gen, s.addr, dst)
			}
		}
		s.mu.Unlock()
	}
	if total == 0 {
		t.Fatal("nothing arrived")
	}
	t.Logf("%d datagrams checked across %d generations", total, len(genDst))
}

// Invariant 4.
func TestNoPacketToOldDestination(t *testing.T) {
	b, _, _ := openBind(t, Options{DisableSourceWatch: true})
	a := newSink(t, "udp4", netip.MustParseAddr("127.0.0.1"), nil)
	c := newSink(t, "udp4", netip.MustParseAddr("127.0.0.1"), nil)
	var cache RouteCache
	cache.Set(Endpoint{Dst: a.addr})

	const maxGen = 64
	var started, completed [maxGen]atomic.Int64 // datagrams per generation
	stop := make(chan struct{})
	var stopOnce sync.Once
	var wg sync.WaitGroup
	halt := func() { stopOnce.Do(func() { close(stop) }); wg.Wait() }
	defer halt() // before the bind's cleanup, also when the test fails
	for s := 0; s < 3; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			rd := b.RCU().NewReader()
			defer rd.Release()
			bufs := makeBufs(4, 64)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rd.Enter()
				r := cache.Borrow()
				started[r.Gen].Add(int64(len(bufs)))
				stamp(bufs, uint64(s), uint64(i), r.Gen)
				if err := b.Send(bufs, r); err != nil {
					t.Error(err)
				}
				completed[r.Gen].Add(int64(len(bufs)))
				rd.Exit()
			}
		}(s)
	}
	type cut struct {
		gen  uint64
		old  *sink
		sent int64
	}
	var cuts []cut
	dsts := []*sink{a, c}
	for i := 1; i <= 8; i++ {
		time.Sleep(5 * time.Millisecond)
		old := cache.Borrow()
		next := dsts[i%2]
		if !cache.Replace(Endpoint{Dst: next.addr}, b.RCU()) {
			t.Fatal("replace did not change the route")
		}
		// The grace period is over: every send that borrowed old has
		// finished, and none can start.
		st, done := started[old.Gen].Load(), completed[old.Gen].Load()
		if st != done {
			t.Fatalf("generation %d: %d datagrams started but only %d finished when Replace returned", old.Gen, st, done)
		}
		cuts = append(cuts, cut{old.Gen, dsts[(i+1)%2], done})
	}
	time.Sleep(10 * time.Millisecond)
	halt()
	time.Sleep(100 * time.Millisecond)
	for _, ct := range cuts {
		if got := ct.old.count(ct.gen); int64(got) > ct.sent {
			t.Errorf("generation %d: %d datagrams reached the old destination, but only %d were sent before Replace returned", ct.gen, got, ct.sent)
		}
		if started[ct.gen].Load() != ct.sent {
			t.Errorf("generation %d: sends started after Replace returned", ct.gen)
		}
	}
}

func TestCloseWaitsForSenders(t *testing.T) {
	for _, own := range []bool{false, true} {
		t.Run(map[bool]string{false: "Bind.Send", true: "own Sender"}[own], func(t *testing.T) {
			testCloseWaitsForSenders(t, own)
		})
	}
}

// testCloseWaitsForSenders: sends through the bind's pool (own false) or
// through each goroutine's own Sender (own true).
func testCloseWaitsForSenders(t *testing.T, own bool) {
	b := NewStdBindOptions(Options{DisableSourceWatch: true})
	if _, _, err := b.Open(0); err != nil {
		t.Fatal(err)
	}
	s := newSink(t, "udp4", netip.MustParseAddr("127.0.0.1"), nil)
	r := NewRoute(Endpoint{Dst: s.addr}, 1)
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rd := b.RCU().NewReader()
			defer rd.Release()
			var tx Sender = b
			if own {
				var release func()
				tx, release = NewSender(b)
				defer release()
			}
			bufs := makeBufs(8, 64)
			for {
				rd.Enter()
				err := tx.Send(bufs, r)
				if err == nil {
					ok.Add(1) // inside the section: Close must wait for it
				}
				rd.Exit()
				if err != nil {
					return
				}
			}
		}()
	}
	time.Sleep(20 * time.Millisecond)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	n := ok.Load()
	wg.Wait()
	if n == 0 {
		t.Fatal("no send succeeded before Close")
	}
	if after := ok.Load(); after != n {
		t.Fatalf("%d sends succeeded after Close returned", after-n)
	}
}
