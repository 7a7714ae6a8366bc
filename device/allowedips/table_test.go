package allowedips

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"unsafe"
)

type op struct {
	remove bool   // Remove instead of Insert
	prefix string // CIDR
	value  string
	ok     bool // expected result of Remove
}

type probe struct {
	addr  string
	value string // "" means no match
}

func ins(p, v string) op          { return op{prefix: p, value: v} }
func del(p, v string, ok bool) op { return op{remove: true, prefix: p, value: v, ok: ok} }

func TestTable(t *testing.T) {
	tests := []struct {
		name   string
		ops    []op
		probes []probe
	}{
		{
			name: "empty table matches nothing",
			probes: []probe{
				{"10.0.0.1", ""}, {"::1", ""}, {"0.0.0.0", ""}, {"::", ""},
			},
		},
		{
			name: "most specific prefix wins across values",
			ops: []op{
				ins("10.0.0.0/8", "a"), ins("10.1.0.0/16", "b"), ins("10.1.2.0/24", "c"),
				ins("10.1.2.128/25", "a"), ins("0.0.0.0/0", "d"),
			},
			probes: []probe{
				{"10.9.9.9", "a"}, {"10.1.9.9", "b"}, {"10.1.2.3", "c"},
				{"10.1.2.200", "a"}, {"11.0.0.1", "d"}, {"192.168.0.1", "d"},
			},
		},
		{
			name: "insertion order does not matter",
			ops: []op{
				ins("10.1.2.128/25", "a"), ins("10.1.2.0/24", "c"), ins("0.0.0.0/0", "d"),
				ins("10.1.0.0/16", "b"), ins("10.0.0.0/8", "a"),
			},
			probes: []probe{
				{"10.9.9.9", "a"}, {"10.1.9.9", "b"}, {"10.1.2.3", "c"},
				{"10.1.2.200", "a"}, {"11.0.0.1", "d"},
			},
		},
		{
			name: "IPv4 and IPv6 are separate tables",
			ops: []op{
				ins("0.0.0.0/0", "v4"), ins("2001:db8::/32", "v6"),
			},
			probes: []probe{
				{"1.2.3.4", "v4"}, {"2001:db8::1", "v6"}, {"2001:db9::1", ""},
				{"::", ""}, {"::102:304", ""},
			},
		},
		{
			name:   "IPv6 default route does not catch IPv4",
			ops:    []op{ins("::/0", "v6")},
			probes: []probe{{"1.2.3.4", ""}, {"fe80::1", "v6"}},
		},
		{
			name:   "IPv4-mapped address is looked up as IPv4",
			ops:    []op{ins("10.0.0.0/8", "a")},
			probes: []probe{{"::ffff:10.1.2.3", "a"}, {"::ffff:11.1.2.3", ""}},
		},
		{
			name: "host routes",
			ops: []op{
				ins("192.168.1.1/32", "h"), ins("192.168.1.0/24", "n"),
				ins("2001:db8::1/128", "h6"), ins("2001:db8::/64", "n6"),
			},
			probes: []probe{
				{"192.168.1.1", "h"}, {"192.168.1.0", "n"}, {"192.168.1.2", "n"},
				{"2001:db8::1", "h6"}, {"2001:db8::", "n6"}, {"2001:db8::2", "n6"},
			},
		},
		{
			name: "prefix is masked on insert",
			ops:  []op{ins("10.1.2.3/8", "a"), ins("2001:db8:ffff::1/32", "b")},
			probes: []probe{
				{"10.200.0.1", "a"}, {"2001:db8::", "b"},
			},
		},
		{
			name: "default routes",
			ops:  []op{ins("0.0.0.0/0", "d4"), ins("::/0", "d6"), ins("10.0.0.0/8", "a")},
			probes: []probe{
				{"255.255.255.255", "d4"}, {"0.0.0.0", "d4"}, {"10.0.0.0", "a"},
				{"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "d6"}, {"::", "d6"},
			},
		},
		{
			name: "removal keeps other prefixes",
			ops: []op{
				ins("10.0.0.0/8", "a"), ins("10.1.0.0/16", "b"), ins("10.1.2.0/24", "a"),
				ins("10.1.3.0/24", "c"), del("10.1.0.0/16", "b", true),
			},
			probes: []probe{
				{"10.1.2.1", "a"}, {"10.1.3.1", "c"}, {"10.1.4.1", "a"}, {"10.9.0.1", "a"},
			},
		},
		{
			name: "removal by a value that does not own the prefix is refused",
			ops: []op{
				ins("10.0.0.0/8", "a"), del("10.0.0.0/8", "b", false),
				del("10.0.0.0/16", "a", false), del("10.0.0.0/7", "a", false),
				del("::/0", "a", false),
			},
			probes: []probe{{"10.1.1.1", "a"}},
		},
		{
			name:   "removal of a masked-equivalent prefix works",
			ops:    []op{ins("10.0.0.0/8", "a"), del("10.9.9.9/8", "a", true)},
			probes: []probe{{"10.0.0.1", ""}},
		},
		{
			name: "removing the default route leaves the rest",
			ops: []op{
				ins("0.0.0.0/0", "d"), ins("10.0.0.0/8", "a"), del("0.0.0.0/0", "d", true),
				del("0.0.0.0/0", "d", false),
			},
			probes: []probe{{"10.0.0.1", "a"}, {"11.0.0.1", ""}},
		},
		{
			name: "re-insert changes the owner",
			ops: []op{
				ins("10.0.0.0/24", "a"), ins("10.0.0.0/24", "b"),
				del("10.0.0.0/24", "a", false),
			},
			probes: []probe{{"10.0.0.1", "b"}},
		},
		{
			name: "branch node gets an owner later",
			ops: []op{
				ins("10.0.0.0/24", "a"), ins("10.0.1.0/24", "b"), ins("10.0.0.0/23", "c"),
				ins("10.0.2.0/23", "d"),
			},
			probes: []probe{
				{"10.0.0.1", "a"}, {"10.0.1.1", "b"}, {"10.0.2.1", "d"}, {"10.0.4.1", ""},
			},
		},
		{
			name: "deep IPv6 split beyond 64 bits",
			ops: []op{
				ins("2001:db8::/64", "a"), ins("2001:db8::8000:0:0:0/65", "b"),
				ins("2001:db8::1:0/112", "c"), ins("2001:db8::1:1/128", "d"),
			},
			probes: []probe{
				{"2001:db8::1", "a"}, {"2001:db8::8000:0:0:1", "b"},
				{"2001:db8::1:2", "c"}, {"2001:db8::1:1", "d"}, {"2001:db8:0:1::", ""},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tab Table[string]
			for _, o := range tc.ops {
				p := netip.MustParsePrefix(o.prefix)
				if o.remove {
					if got := tab.Remove(p, o.value); got != o.ok {
						t.Fatalf("Remove(%s, %s) = %v, want %v", o.prefix, o.value, got, o.ok)
					}
				} else {
					tab.Insert(p, o.value)
				}
				mustValid(t, &tab)
			}
			for _, pr := range tc.probes {
				a := netip.MustParseAddr(pr.addr)
				got, ok := tab.Lookup(a)
				if ok != (pr.value != "") || got != pr.value {
					t.Errorf("Lookup(%s) = %q, %v; want %q", pr.addr, got, ok, pr.value)
				}
				if a.Is4In6() {
					continue // LookupBytes does not unmap; tested separately
				}
				got2, ok2 := tab.LookupBytes(a.AsSlice())
				if got2 != got || ok2 != ok {
					t.Errorf("LookupBytes(%s) = %q, %v; Lookup gave %q, %v", pr.addr, got2, ok2, got, ok)
				}
			}
		})
	}
}

func TestLookupBytesDoesNotUnmap(t *testing.T) {
	var tab Table[int]
	tab.Insert(netip.MustParsePrefix("10.0.0.0/8"), 1)
	mapped := netip.MustParseAddr("::ffff:10.0.0.1").As16()
	if v, ok := tab.LookupBytes(mapped[:]); ok {
		t.Fatalf("16-byte mapped address matched IPv4 route, value %d", v)
	}
	tab.Insert(netip.MustParsePrefix("::ffff:10.0.0.0/104"), 2)
	if v, ok := tab.LookupBytes(mapped[:]); !ok || v != 2 {
		t.Fatalf("LookupBytes(mapped) = %d, %v; want 2, true", v, ok)
	}
	if v, ok := tab.Lookup(netip.AddrFrom16(mapped)); !ok || v != 1 {
		t.Fatalf("Lookup(mapped) = %d, %v; want the IPv4 owner 1", v, ok)
	}
	if got := tab.Count(2); got != 1 {
		t.Fatalf("mapped prefix stored %d times under its value, want 1", got)
	}
	var got []netip.Prefix
	tab.Prefixes(2, func(p netip.Prefix) bool { got = append(got, p); return true })
	if len(got) != 1 || got[0] != netip.MustParsePrefix("::ffff:10.0.0.0/104") {
		t.Fatalf("Prefixes(2) = %v, want the IPv6 form kept", got)
	}
}

func TestBadInput(t *testing.T) {
	var tab Table[int]
	tab.Insert(netip.Prefix{}, 1)
	tab.Insert(netip.PrefixFrom(netip.MustParseAddr("10.0.0.0"), 33), 1)
	tab.Insert(netip.PrefixFrom(netip.MustParseAddr("::"), 129), 1)
	if tab.Len() != 0 || tab.Count(1) != 0 {
		t.Fatalf("invalid prefixes were stored: Len %d", tab.Len())
	}
	if tab.Remove(netip.Prefix{}, 1) {
		t.Fatal("Remove of the zero prefix reported success")
	}
	tab.Insert(netip.MustParsePrefix("0.0.0.0/0"), 1)
	tab.Insert(netip.MustParsePrefix("::/0"), 1)
	for _, b := range [][]byte{nil, {}, {1, 2, 3}, make([]byte, 5), make([]byte, 15), make([]byte, 17)} {
		if _, ok := tab.LookupBytes(b); ok {
			t.Errorf("LookupBytes(%d bytes) matched", len(b))
		}
	}
	if _, ok := tab.Lookup(netip.Addr{}); ok {
		t.Error("Lookup of the zero Addr matched")
	}
	if v, ok := tab.Lookup(netip.MustParseAddr("fe80::1%eth0")); !ok || v != 1 {
		t.Errorf("Lookup of a zoned address = %d, %v; want 1, true", v, ok)
	}
	tab.RemoveValue(42) // absent value: no effect
	tab.Prefixes(42, func(netip.Prefix) bool { t.Error("yield called for absent value"); return true })
	if tab.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tab.Len())
	}
}

func TestCountLenAndPrefixes(t *testing.T) {
	var tab Table[int]
	in := map[int][]string{
		1: {"10.0.0.0/8", "10.1.0.0/16", "2001:db8::/32", "0.0.0.0/0"},
		2: {"10.2.0.0/16", "::/0", "192.168.0.1/32"},
	}
	for v, ps := range in {
		for _, p := range ps {
			tab.Insert(netip.MustParsePrefix(p), v)
			tab.Insert(netip.MustParsePrefix(p), v) // idempotent
		}
	}
	if tab.Len() != 7 || tab.Count(1) != 4 || tab.Count(2) != 3 || tab.Count(3) != 0 {
		t.Fatalf("Len %d Count(1) %d Count(2) %d", tab.Len(), tab.Count(1), tab.Count(2))
	}
	for v, ps := range in {
		var got []string
		tab.Prefixes(v, func(p netip.Prefix) bool { got = append(got, p.String()); return true })
		if len(got) != len(ps) {
			t.Fatalf("Prefixes(%d) = %v, want %v", v, got, ps)
		}
		for i := range ps {
			if got[i] != ps[i] {
				t.Fatalf("Prefixes(%d) = %v, want insertion order %v", v, got, ps)
			}
		}
	}
	// Moving a prefix updates both counts and appends it to the new owner.
	tab.Insert(netip.MustParsePrefix("10.0.0.0/8"), 2)
	if tab.Len() != 7 || tab.Count(1) != 3 || tab.Count(2) != 4 {
		t.Fatalf("after move: Len %d Count(1) %d Count(2) %d", tab.Len(), tab.Count(1), tab.Count(2))
	}
	var last netip.Prefix
	tab.Prefixes(2, func(p netip.Prefix) bool { last = p; return true })
	if last != netip.MustParsePrefix("10.0.0.0/8") {
		t.Fatalf("moved prefix not last in new owner's stream: %v", last)
	}
	// Early stop.
	n := 0
	tab.Prefixes(2, func(netip.Prefix) bool { n++; return n < 2 })
	if n != 2 {
		t.Fatalf("yield called %d times after returning false at 2", n)
	}
	tab.RemoveValue(1)
	mustValid(t, &tab)
	if tab.Len() != 4 || tab.Count(1) != 0 {
		t.Fatalf("after RemoveValue(1): Len %d Count(1) %d", tab.Len(), tab.Count(1))
	}
	if v, ok := tab.Lookup(netip.MustParseAddr("10.1.0.1")); !ok || v != 2 {
		t.Fatalf("10.1.0.1 -> %d, %v; want 2 via 10.0.0.0/8", v, ok)
	}
	if _, ok := tab.Lookup(netip.MustParseAddr("11.0.0.1")); ok {
		t.Fatal("removed IPv4 default route still matches")
	}
	tab.RemoveValue(2)
	mustValid(t, &tab)
	if tab.Len() != 0 || len(tab.owners) != 0 || nodeCount(&tab) != 2 {
		t.Fatalf("empty table keeps state: Len %d owners %d nodes %d", tab.Len(), len(tab.owners), nodeCount(&tab))
	}
}

// TestLargeValue gives one value 131,071 prefixes (the most one peer holds
// in the kernel's tests), streams them back and removes them, with another
// value's routes interleaved in the same trie.
func TestLargeValue(t *testing.T) {
	const n = 131071
	var tab Table[int]
	want := make(map[netip.Prefix]bool, n)
	for i := range n {
		var p netip.Prefix
		if i%2 == 0 {
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], 0x0a000000|uint32(i)<<3)
			p = netip.PrefixFrom(netip.AddrFrom4(b), 29+i%4)
		} else {
			var b [16]byte
			b[0], b[1] = 0xfd, 0x00
			binary.BigEndian.PutUint64(b[8:], uint64(i)<<40)
			p = netip.PrefixFrom(netip.AddrFrom16(b), 88+i%40)
		}
		p = p.Masked()
		want[p] = true
		tab.Insert(p, 1)
	}
	if len(want) != n {
		t.Fatalf("generator made %d distinct prefixes, want %d", len(want), n)
	}
	others := []string{"10.0.0.0/8", "10.0.0.0/29", "fd00::/8", "0.0.0.0/0", "fd00::1/128"}
	for _, p := range others {
		tab.Insert(netip.MustParsePrefix(p), 2)
	}
	// 10.0.0.0/29 and fd00::... /128 may collide with value 1's prefixes
	// and move them; account for that.
	for _, p := range others {
		delete(want, netip.MustParsePrefix(p))
	}
	if tab.Count(1) != len(want) || tab.Len() != len(want)+len(others) {
		t.Fatalf("Count(1) %d Len %d, want %d and %d", tab.Count(1), tab.Len(), len(want), len(want)+len(others))
	}
	mustValid(t, &tab)

	seen := 0
	tab.Prefixes(1, func(p netip.Prefix) bool {
		if !want[p] {
			t.Fatalf("streamed unexpected prefix %v", p)
		}
		want[p] = false
		seen++
		return true
	})
	if seen != tab.Count(1) {
		t.Fatalf("streamed %d prefixes, want %d", seen, tab.Count(1))
	}
	if v, ok := tab.Lookup(netip.MustParseAddr("10.0.0.17")); !ok || v != 1 {
		t.Fatalf("10.0.0.17 -> %d, %v; want 1", v, ok)
	}

	tab.RemoveValue(1)
	mustValid(t, &tab)
	if tab.Count(1) != 0 || tab.Len() != len(others) {
		t.Fatalf("after RemoveValue: Count(1) %d Len %d", tab.Count(1), tab.Len())
	}
	if got := nodeCount(&tab); got > 2+2*len(others) {
		t.Fatalf("%d nodes left for %d prefixes: removal did not prune", got, len(others))
	}
	for addr, v := range map[string]int{"10.0.0.17": 2, "10.0.0.1": 2, "11.0.0.1": 2, "fd00::1": 2, "fd00::2": 2, "fe00::": 0} {
		got, ok := tab.Lookup(netip.MustParseAddr(addr))
		if ok != (v != 0) || got != v {
			t.Errorf("after RemoveValue: %s -> %d, %v; want %d", addr, got, ok, v)
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	tab := randomTable(t, 10000, 100, 1)
	a4 := netip.MustParseAddr("10.1.2.3")
	a6 := netip.MustParseAddr("2001:db8::1")
	b4, b6 := a4.AsSlice(), a6.AsSlice()
	allocs := testing.AllocsPerRun(1000, func() {
		tab.Lookup(a4)
		tab.Lookup(a6)
		tab.LookupBytes(b4)
		tab.LookupBytes(b6)
	})
	if allocs != 0 {
		t.Fatalf("lookups allocated %v times per run", allocs)
	}
}

func TestMemoryPerPrefix(t *testing.T) {
	if s := unsafe.Sizeof(node[*int]{}); s > 64 {
		t.Fatalf("node is %d bytes, more than the 64-byte cache line", s)
	}
	const n = 100000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	tab := randomTable(t, n, 1000, 2)
	runtime.GC()
	runtime.ReadMemStats(&after)
	perPrefix := float64(after.HeapAlloc-before.HeapAlloc) / float64(tab.Len())
	t.Logf("%d prefixes, %d nodes, %.0f heap bytes per prefix", tab.Len(), nodeCount(tab), perPrefix)
	if perPrefix > 200 {
		t.Fatalf("%.0f heap bytes per prefix, want at most 200", perPrefix)
	}
	runtime.KeepAlive(tab)
}

// TestConcurrentReaders runs lookups from several goroutines under a read
// lock while a writer changes the table under the write lock, as the
// device does. Under -race this checks that lookups write nothing shared.
func TestConcurrentReaders(t *testing.T) {
	var mu sync.RWMutex
	tab := randomTable(t, 4000, 50, 5)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.RLock()
				for range 64 {
					a := randomAddr(rng, rng.IntN(2) == 0)
					tab.Lookup(a)
					tab.LookupBytes(a.AsSlice())
				}
				tab.Count(r)
				mu.RUnlock()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range 300 {
		mu.Lock()
		p := randomPrefix(rng)
		tab.Insert(p, i%50)
		if i%7 == 0 {
			tab.RemoveValue(i % 50)
		}
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	mustValid(t, tab)
}
