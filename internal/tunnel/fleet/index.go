package fleet

// The indexes resolve checks each record against, so that resolving n
// records costs O(n log n) rather than n² comparisons (a scan of every
// network taken, for each of 1,000 records, was a third of the agent's
// time per change).

import (
	"cmp"
	"net/netip"
	"slices"
	"sort"
)

// netOwner is a network taken, and by whom (for the conflict's reason).
type netOwner struct {
	pfx  netip.Prefix
	name string
}

// netIndex holds the networks taken so far. Two prefixes overlap exactly
// when one contains the other's first address; so p overlaps a network
// taken when one of p's supernets (p included) is taken, or when a network
// taken starts within p.
type netIndex struct {
	exact   map[netip.Prefix]string // masked prefix -> its first owner
	byStart sortedRuns[netOwner]    // by first address, then length
	// lens4 and lens6 have bit n set when a network of length n is
	// taken: the supernets of other lengths are not looked up.
	lens4 uint64
	lens6 [3]uint64
}

func (x *netIndex) lens(p netip.Prefix) []uint64 {
	if p.Addr().Is4() {
		return []uint64{x.lens4}
	}
	return x.lens6[:]
}

func newNetIndex() *netIndex {
	return &netIndex{exact: map[netip.Prefix]string{}, byStart: sortedRuns[netOwner]{cmp: func(a, b netOwner) int { return comparePrefix(a.pfx, b.pfx) }}}
}

func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

// add records network p as taken by name.
func (x *netIndex) add(p netip.Prefix, name string) {
	p = p.Masked()
	if _, ok := x.exact[p]; !ok {
		x.exact[p] = name
	}
	if b := p.Bits(); p.Addr().Is4() {
		x.lens4 |= 1 << b
	} else {
		x.lens6[b/64] |= 1 << (b % 64)
	}
	x.byStart.add(netOwner{p, name})
}

// overlap returns a network taken that overlaps p, if there is one.
func (x *netIndex) overlap(p netip.Prefix) (netOwner, bool) {
	p = p.Masked()
	lens := x.lens(p)
	for b := p.Bits(); b >= 0; b-- {
		if lens[b/64]&(1<<(b%64)) == 0 {
			continue
		}
		q, _ := p.Addr().Prefix(b)
		if name, ok := x.exact[q]; ok {
			return netOwner{q, name}, true
		}
	}
	return x.byStart.first(netOwner{pfx: netip.PrefixFrom(p.Addr(), 0)}, func(o netOwner) bool { return p.Contains(o.pfx.Addr()) })
}

// guarded is an address no fleet network may hold, and what it is.
type guarded struct {
	addr netip.Addr
	what string
}

// addrIndex holds the guarded addresses, by address.
type addrIndex struct{ s sortedRuns[guarded] }

func (x *addrIndex) add(a netip.Addr, what string) {
	if x.s.cmp == nil {
		x.s.cmp = func(a, b guarded) int { return a.addr.Compare(b.addr) }
	}
	x.s.add(guarded{a, what})
}

// in returns a guarded address inside network p, if any.
func (x *addrIndex) in(p netip.Prefix) (guarded, bool) {
	if x.s.cmp == nil {
		return guarded{}, false
	}
	p = p.Masked()
	return x.s.first(guarded{addr: p.Addr()}, func(g guarded) bool { return p.Contains(g.addr) })
}

// sortedRuns is a set of values kept sorted by cmp for the query "the
// first value from v on": a sorted run and a short unsorted tail, merged
// into the run once it holds tailMax. Adding is O(1), amortised O(√n)
// with the merges, a query O(log n + tailMax): unlike inserting into one
// sorted slice, which moved half the slice each time.
type sortedRuns[T any] struct {
	cmp  func(a, b T) int
	run  []T // sorted
	tail []T // unsorted, at most tailMax
}

const tailMax = 32

func (s *sortedRuns[T]) add(v T) {
	s.tail = append(s.tail, v)
	if len(s.tail) < tailMax {
		return
	}
	slices.SortStableFunc(s.tail, s.cmp)
	merged := make([]T, 0, len(s.run)+len(s.tail))
	i, j := 0, 0
	for i < len(s.run) && j < len(s.tail) {
		if s.cmp(s.tail[j], s.run[i]) < 0 {
			merged = append(merged, s.tail[j])
			j++
		} else {
			merged = append(merged, s.run[i])
			i++
		}
	}
	merged = append(append(merged, s.run[i:]...), s.tail[j:]...)
	s.run, s.tail = merged, s.tail[:0]
}

// first returns the least value w >= from for which ok(w) is true,
// looking only at the least w >= from of the run and at the tail: ok must
// be true of a prefix of the values from on (a range's start).
func (s *sortedRuns[T]) first(from T, ok func(T) bool) (T, bool) {
	var best T
	found := false
	if i := sort.Search(len(s.run), func(i int) bool { return s.cmp(s.run[i], from) >= 0 }); i < len(s.run) && ok(s.run[i]) {
		best, found = s.run[i], true
	}
	for _, v := range s.tail {
		if s.cmp(v, from) >= 0 && ok(v) && (!found || s.cmp(v, best) < 0) {
			best, found = v, true
		}
	}
	return best, found
}
