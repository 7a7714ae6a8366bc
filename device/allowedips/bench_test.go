package allowedips

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// randomPrefix returns a random masked prefix, IPv4 or IPv6 with equal
// probability. IPv4 lengths are spread over /8../32 and IPv6 over
// /16../128, weighted towards the lengths seen in routing tables.
func randomPrefix(rng *rand.Rand) netip.Prefix {
	if rng.IntN(2) == 0 {
		return randomPrefix4(rng)
	}
	return randomPrefix6(rng)
}

func randomPrefix4(rng *rand.Rand) netip.Prefix {
	lengths := []int{8, 12, 16, 20, 22, 24, 24, 24, 28, 32, 32}
	return netip.PrefixFrom(randomAddr(rng, false), lengths[rng.IntN(len(lengths))]).Masked()
}

func randomPrefix6(rng *rand.Rand) netip.Prefix {
	lengths := []int{16, 32, 48, 48, 56, 64, 64, 64, 96, 112, 128, 128}
	return netip.PrefixFrom(randomAddr(rng, true), lengths[rng.IntN(len(lengths))]).Masked()
}

func randomAddr(rng *rand.Rand, v6 bool) netip.Addr {
	if v6 {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return netip.AddrFrom16(b)
	}
	var b [4]byte
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return netip.AddrFrom4(b)
}

// addrInside returns a random address covered by p.
func addrInside(rng *rand.Rand, p netip.Prefix) netip.Addr {
	b := randomAddr(rng, p.Addr().Is6()).AsSlice()
	base := p.Addr().AsSlice()
	for i := range p.Bits() {
		bit := byte(0x80) >> (i % 8)
		b[i/8] = b[i/8]&^bit | base[i/8]&bit
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// randomTable returns a table of n random prefixes spread over values
// 0..values-1.
func randomTable(tb testing.TB, n, values int, seed uint64) *Table[int] {
	rng := rand.New(rand.NewPCG(seed, 1))
	tab := new(Table[int])
	for i := 0; tab.Len() < n; i++ {
		if i > 2*n {
			tb.Fatalf("table stuck at %d prefixes after %d inserts", tab.Len(), i)
		}
		tab.Insert(randomPrefix(rng), rng.IntN(values))
	}
	return tab
}

// lookupSet holds a table of 100,000 prefixes of one family and probe
// addresses, half inside stored prefixes and half uniformly random.
type lookupSet struct {
	tab    Table[int]
	addrs  []netip.Addr
	hdrs   [][]byte
	stored []netip.Prefix
}

func newLookupSet(tb testing.TB, v6 bool) *lookupSet {
	const n, probes = 100000, 4096
	rng := rand.New(rand.NewPCG(11, 12))
	s := new(lookupSet)
	for i := 0; s.tab.Len() < n; i++ {
		if i > 2*n {
			tb.Fatalf("table stuck at %d prefixes after %d inserts", s.tab.Len(), i)
		}
		var p netip.Prefix
		if v6 {
			p = randomPrefix6(rng)
		} else {
			p = randomPrefix4(rng)
		}
		s.tab.Insert(p, rng.IntN(1000))
		s.stored = append(s.stored, p)
	}
	for i := range probes {
		var a netip.Addr
		if i%2 == 0 {
			a = addrInside(rng, s.stored[rng.IntN(len(s.stored))])
		} else {
			a = randomAddr(rng, v6)
		}
		s.addrs = append(s.addrs, a)
		s.hdrs = append(s.hdrs, a.AsSlice())
	}
	return s
}

var sink int

func benchLookup(b *testing.B, v6 bool) {
	s := newLookupSet(b, v6)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		v, _ := s.tab.Lookup(s.addrs[i&4095])
		sink += v
	}
}

func benchLookupBytes(b *testing.B, v6 bool) {
	s := newLookupSet(b, v6)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		v, _ := s.tab.LookupBytes(s.hdrs[i&4095])
		sink += v
	}
}

func BenchmarkLookup4(b *testing.B)      { benchLookup(b, false) }
func BenchmarkLookup6(b *testing.B)      { benchLookup(b, true) }
func BenchmarkLookupBytes4(b *testing.B) { benchLookupBytes(b, false) }
func BenchmarkLookupBytes6(b *testing.B) { benchLookupBytes(b, true) }

// BenchmarkInsert measures inserting random prefixes into a table that
// grows to b.N prefixes (capped, then restarted, to bound memory).
func BenchmarkInsert(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	ps := make([]netip.Prefix, 1<<16)
	for i := range ps {
		ps[i] = randomPrefix(rng)
	}
	tab := new(Table[int])
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i&(len(ps)-1) == 0 && i > 0 {
			tab = new(Table[int])
		}
		tab.Insert(ps[i&(len(ps)-1)], i&1023)
	}
}

// BenchmarkRemoveValue measures removing a value that owns 1,000 prefixes
// from a table that also holds 100,000 prefixes of other values. The
// reported time is per removed value; ns/prefix divides it by 1,000.
func BenchmarkRemoveValue(b *testing.B) {
	const own = 1000
	tab := randomTable(b, 100000, 1000, 9)
	rng := rand.New(rand.NewPCG(7, 8))
	ps := make([]netip.Prefix, own)
	for i := range ps {
		ps[i] = randomPrefix(rng)
	}
	const victim = -1
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for _, p := range ps {
			tab.Insert(p, victim)
		}
		b.StartTimer()
		tab.RemoveValue(victim)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*own), "ns/prefix")
}

// BenchmarkLookupHosts4 looks up addresses in a concentrator-style table:
// 100,000 host routes inside 10.0.0.0/12 plus a default route, probes
// spread over the /12 (about 10% of them hit a host route).
func BenchmarkLookupHosts4(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	cluster := netip.MustParsePrefix("10.0.0.0/12")
	var tab Table[int]
	tab.Insert(netip.MustParsePrefix("0.0.0.0/0"), -1)
	for i := 0; tab.Len() < 100001; i++ {
		tab.Insert(netip.PrefixFrom(addrInside(rng, cluster), 32), i%1000)
	}
	hdrs := make([][]byte, 4096)
	for i := range hdrs {
		hdrs[i] = addrInside(rng, cluster).AsSlice()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		v, _ := tab.LookupBytes(hdrs[i&4095])
		sink += v
	}
}

// BenchmarkLookupSmall is the common case: 16 peers with a host address
// each and a few subnets, one of them owning the default routes.
func BenchmarkLookupSmall(b *testing.B) {
	var tab Table[int]
	tab.Insert(netip.MustParsePrefix("0.0.0.0/0"), 0)
	tab.Insert(netip.MustParsePrefix("::/0"), 0)
	for i := range 16 {
		tab.Insert(netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 32), i)
		tab.Insert(netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(i), 0}), 24), i)
		tab.Insert(netip.PrefixFrom(netip.AddrFrom16([16]byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, byte(i + 1)}), 128), i)
	}
	hdrs := [][]byte{
		{10, 0, 0, 5}, {192, 168, 7, 9}, {8, 8, 8, 8},
		{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3},
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		v, _ := tab.LookupBytes(hdrs[i&3])
		sink += v
	}
}

// BenchmarkLookupNoIndex4 is BenchmarkLookupBytes4 with the jump index
// disabled: the cost of the plain path-compressed trie walk.
func BenchmarkLookupNoIndex4(b *testing.B) {
	s := newLookupSet(b, false)
	s.tab.jumpMin = -1
	s.tab.resize(false)
	if s.tab.jump4 != nil {
		b.Fatal("index still present")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		v, _ := s.tab.LookupBytes(s.hdrs[i&4095])
		sink += v
	}
}
