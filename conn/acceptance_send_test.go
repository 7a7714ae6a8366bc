package conn

// Acceptance tests of the send path beyond the invariant tests: one bind
// alternating IPv4 and IPv6 destinations (with and without sticky sources)
// never mixes them up, and a datagram too large for UDP in the middle of a
// batch is reported while the rest of the batch still goes out.

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

func TestAcceptanceAlternatingFamilies(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "GSO"}[gso], func(t *testing.T) {
			b, _, _ := openBind(t, Options{DisableGSO: !gso, DisableGRO: true, DisableSourceWatch: true})
			needIPv6(t, b)
			s4 := newSink(t, "udp4", netip.MustParseAddr("127.0.0.1"), nil)
			s6 := newSink(t, "udp6", netip.IPv6Loopback(), nil)
			var c4, c6 RouteCache
			c4.Set(Endpoint{Dst: s4.addr})
			c6.Set(Endpoint{Dst: s6.addr})
			r4s := NewRoute(Endpoint{Dst: s4.addr, Src: netip.MustParseAddr("127.0.0.1"), SrcIfindex: 1}, 10)
			r6s := NewRoute(Endpoint{Dst: s6.addr, Src: netip.IPv6Loopback(), SrcIfindex: 1}, 20)
			rd := b.RCU().NewReader()
			defer rd.Release()
			const rounds = 50
			routes := []*Route{c4.Borrow(), c6.Borrow(), r4s, r6s}
			for i := 0; i < rounds; i++ {
				for _, r := range routes {
					bufs := makeBufs(4, 200)
					stamp(bufs, 0, uint64(i), r.Gen)
					rd.Enter()
					err := b.Send(bufs, r)
					rd.Exit()
					if err != nil {
						t.Fatalf("round %d to %v: %v", i, r.Endpoint, err)
					}
				}
			}
			want := 4 * rounds
			deadline := time.Now().Add(5 * time.Second)
			for (s4.count(c4.Borrow().Gen)+s4.count(10) < 2*want || s6.count(c6.Borrow().Gen)+s6.count(20) < 2*want) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			s4.mu.Lock()
			defer s4.mu.Unlock()
			s6.mu.Lock()
			defer s6.mu.Unlock()
			if s4.byGen[1] != want || s4.byGen[10] != want || len(s4.byGen) != 2 {
				t.Errorf("IPv4 sink got %v, want %d of generations 1 and 10", s4.byGen, want)
			}
			if s6.byGen[1] != want || s6.byGen[20] != want || len(s6.byGen) != 2 {
				t.Errorf("IPv6 sink got %v, want %d of generations 1 and 20", s6.byGen, want)
			}
		})
	}
}

func TestAcceptanceOversizedDatagramSkipped(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "GSO"}[gso], func(t *testing.T) {
			a, _, _ := openBind(t, Options{DisableGSO: !gso, DisableGRO: true, DisableSourceWatch: true})
			_, bfns, bport := openBind(t, Options{DisableGSO: true, DisableGRO: true, DisableSourceWatch: true})
			ch := startReceivers(t, bfns, 1<<16)
			var sent [][]byte
			for i, size := range []int{300, 300, 300, 65508, 300, 300, 1 << 16, 200} {
				buf := make([]byte, size)
				binary.BigEndian.PutUint32(buf[4:8], uint32(i))
				sent = append(sent, buf)
			}
			err := a.Send(sent, NewRoute(Endpoint{Dst: loop4(bport)}, 1))
			if err == nil {
				t.Fatal("datagrams too large for UDP were not reported")
			}
			got := collect(t, ch, 6, 5*time.Second)
			seen := map[uint32]int{}
			for _, g := range got {
				seen[binary.BigEndian.Uint32(g.data[4:8])]++
			}
			for _, i := range []uint32{0, 1, 2, 4, 5, 7} {
				if seen[i] != 1 {
					t.Fatalf("datagram %d arrived %d times (all: %v)", i, seen[i], seen)
				}
			}
			select {
			case extra := <-ch:
				t.Fatalf("unexpected datagram of %d bytes", len(extra.data))
			case <-time.After(50 * time.Millisecond):
			}
			if g, _ := a.Offload(); g != gso {
				t.Fatalf("GSO is %v after an oversized single datagram, want %v", g, gso)
			}
		})
	}
}
