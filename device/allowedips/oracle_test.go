package allowedips

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// reference is a deliberately naive model of Table: a list of
// (prefix, value) pairs scanned linearly. It shares no code with the trie.
type reference struct {
	entries []refEntry
}

type refEntry struct {
	p netip.Prefix
	v uint8
}

func (r *reference) insert(p netip.Prefix, v uint8) {
	p = p.Masked()
	for i := range r.entries {
		if r.entries[i].p == p {
			r.entries[i].v = v
			return
		}
	}
	r.entries = append(r.entries, refEntry{p, v})
}

func (r *reference) remove(p netip.Prefix, v uint8) bool {
	p = p.Masked()
	for i, e := range r.entries {
		if e.p == p && e.v == v {
			r.entries = append(r.entries[:i], r.entries[i+1:]...)
			return true
		}
	}
	return false
}

func (r *reference) removeValue(v uint8) {
	kept := r.entries[:0]
	for _, e := range r.entries {
		if e.v != v {
			kept = append(kept, e)
		}
	}
	r.entries = kept
}

// lookup finds the longest prefix containing a; a is not unmapped, so a
// 16-byte address only meets IPv6 prefixes (netip.Prefix.Contains never
// matches across families).
func (r *reference) lookup(a netip.Addr) (uint8, bool) {
	best, found := -1, uint8(0)
	for _, e := range r.entries {
		if e.p.Contains(a) && e.p.Bits() > best {
			best, found = e.p.Bits(), e.v
		}
	}
	return found, best >= 0
}

func (r *reference) prefixes(v uint8) []netip.Prefix {
	var out []netip.Prefix
	for _, e := range r.entries {
		if e.v == v {
			out = append(out, e.p)
		}
	}
	return out
}

// opReader decodes fuzz bytes into table operations. Running out of bytes
// yields zeros, so every input is a valid program.
type opReader struct {
	data []byte
}

func (r *opReader) byte() byte {
	if len(r.data) == 0 {
		return 0
	}
	b := r.data[0]
	r.data = r.data[1:]
	return b
}

// fills are the background patterns of generated addresses.
var fills = [4]byte{0x00, 0x0a, 0xa0, 0xff}

// addr builds an address from two bytes so that generated prefixes share
// long common runs and overlap often: every byte is one of four fill
// patterns chosen by a, except one position chosen by b which holds b.
func (r *opReader) addr(v6 bool) netip.Addr {
	a, b := r.byte(), r.byte()
	var buf [16]byte
	for i := range buf {
		buf[i] = fills[a&3]
	}
	n := 4
	if v6 {
		n = 16
	}
	buf[int(b)%n] = b
	if v6 {
		return netip.AddrFrom16(buf)
	}
	return netip.AddrFrom4([4]byte(buf[:4]))
}

// addrInsideBytes returns an address inside p whose host bits are all b.
func addrInsideBytes(p netip.Prefix, b byte) netip.Addr {
	buf := p.Addr().AsSlice()
	base := p.Addr().AsSlice()
	for i := range buf {
		buf[i] = b
	}
	for i := range p.Bits() {
		bit := byte(0x80) >> (i % 8)
		buf[i/8] = buf[i/8]&^bit | base[i/8]&bit
	}
	a, _ := netip.AddrFromSlice(buf)
	return a
}

func (r *opReader) prefix() netip.Prefix {
	flags := r.byte()
	v6 := flags&1 != 0
	a := r.addr(v6)
	return netip.PrefixFrom(a, int(r.byte())%(a.BitLen()+1))
}

// programStats counts how often a program did something observable, so
// tests can check that the comparison was not vacuous.
type programStats struct {
	hits, removed, maxLen int
}

// runProgram applies the operations encoded in data to a Table and to the
// reference and fails on the first disagreement.
func runProgram(t testing.TB, data []byte, jumpMin int) programStats {
	var st programStats
	tab := Table[uint8]{jumpMin: jumpMin}
	var ref reference
	r := &opReader{data: data}
	for step := 0; len(r.data) > 0; step++ {
		code := r.byte()
		v := code >> 4 & 3
		switch code % 8 {
		case 0, 1, 2:
			p := r.prefix()
			tab.Insert(p, v)
			ref.insert(p, v)
		case 3:
			var p netip.Prefix
			if code&0x40 != 0 && len(ref.entries) > 0 {
				// Name a stored prefix, possibly unmasked, possibly with
				// the wrong owner.
				e := ref.entries[int(r.byte())%len(ref.entries)]
				p = netip.PrefixFrom(addrInsideBytes(e.p, r.byte()), e.p.Bits())
			} else {
				p = r.prefix()
			}
			got, want := tab.Remove(p, v), ref.remove(p, v)
			if got != want {
				t.Fatalf("step %d: Remove(%v, %d) = %v, want %v", step, p, v, got, want)
			}
			if got {
				st.removed++
			}
		case 4:
			if code&0x40 == 0 {
				continue // RemoveValue half as often, so tables grow
			}
			tab.RemoveValue(v)
			ref.removeValue(v)
		case 5, 6, 7:
			flags := r.byte()
			a := r.addr(flags&1 != 0)
			gv, gok := tab.LookupBytes(a.AsSlice())
			wv, wok := ref.lookup(a)
			if gv != wv || gok != wok {
				t.Fatalf("step %d: LookupBytes(%v) = %d, %v; want %d, %v", step, a, gv, gok, wv, wok)
			}
			if gok {
				st.hits++
			}
			if a.Is4() {
				// Lookup of the mapped form must reach the IPv4 trie.
				gv, gok = tab.Lookup(netip.AddrFrom16(a.As16()))
				if gv != wv || gok != wok {
					t.Fatalf("step %d: Lookup(mapped %v) = %d, %v; want %d, %v", step, a, gv, gok, wv, wok)
				}
			}
		}
		if err := checkInvariants(&tab); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		st.maxLen = max(st.maxLen, tab.Len())
	}
	compareAll(t, &tab, &ref)
	return st
}

// compareAll checks Len, Count and Prefixes of every value against ref.
func compareAll(t testing.TB, tab *Table[uint8], ref *reference) {
	if tab.Len() != len(ref.entries) {
		t.Fatalf("Len = %d, want %d", tab.Len(), len(ref.entries))
	}
	for v := range uint8(4) {
		want := ref.prefixes(v)
		if tab.Count(v) != len(want) {
			t.Fatalf("Count(%d) = %d, want %d", v, tab.Count(v), len(want))
		}
		left := make(map[netip.Prefix]bool, len(want))
		for _, p := range want {
			left[p] = true
		}
		tab.Prefixes(v, func(p netip.Prefix) bool {
			if !left[p] {
				t.Fatalf("Prefixes(%d) yielded %v, not owned or repeated; want %v", v, p, want)
			}
			delete(left, p)
			return true
		})
		if len(left) != 0 {
			t.Fatalf("Prefixes(%d) missed %d prefixes of %v", v, len(left), want)
		}
	}
}

func FuzzTable(f *testing.F) {
	f.Add([]byte{})
	// Insert 10.10.10.10/8 as 0, look up, remove.
	f.Add([]byte{0x00, 0x00, 0x0a, 0x0a, 8, 0x04, 0x00, 0x0a, 0x00, 0x02, 0x00, 0x0a, 0x0a, 8})
	// IPv6 insert and nested insert by another value, then RemoveValue.
	f.Add([]byte{0x00, 0x01, 0x20, 0x01, 64, 0x10, 0x01, 0x20, 0x05, 100, 0x04, 0x01, 0x20, 0x05, 0x03})
	f.Add([]byte{0x00, 0x00, 0xff, 0x00, 0, 0x11, 0x01, 0x00, 0x00, 0, 0x04, 0x00, 0x01, 0x01, 0x04, 0x01, 0x01, 0x01})
	f.Add([]byte("\x00\x00\x01\x02\x20\x10\x00\x01\x03\x1f\x20\x00\x01\x07\x1e\x04\x00\x01\x02\x02\x00\x01\x02\x20\x04\x00\x01\x03"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 4096 {
			return // keep each run cheap; invariants are checked per step
		}
		runProgram(t, data, 1)  // jump index from the first prefix
		runProgram(t, data, -1) // plain trie walk
	})
}

// TestAgainstReference runs long pseudo-random programs through the same
// checker as the fuzz target, so the oracle comparison runs in every
// ordinary test run.
func TestAgainstReference(t *testing.T) {
	for seed := range uint64(8) {
		rng := rand.New(rand.NewPCG(seed, 7))
		data := make([]byte, 6000)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for _, jumpMin := range []int{1, -1} {
			st := runProgram(t, data, jumpMin)
			t.Logf("seed %d jumpMin %d: %+v", seed, jumpMin, st)
			if st.hits < 50 || st.removed < 10 || st.maxLen < 20 {
				t.Fatalf("seed %d: program too weak to test anything: %+v", seed, st)
			}
		}
	}
}

// TestRandomLookups compares the trie with the reference on tables large
// enough to have a jump index, with prefixes spread over the whole
// address space or clustered under one prefix (so the index is anchored
// below the root), plus a few routes outside the cluster. Probes are
// random or derived from stored prefixes so that deep matches occur.
func TestRandomLookups(t *testing.T) {
	type gen func(*rand.Rand) netip.Prefix
	clustered := func(base string, lengths ...int) gen {
		b := netip.MustParsePrefix(base)
		return func(rng *rand.Rand) netip.Prefix {
			return netip.PrefixFrom(addrInside(rng, b), lengths[rng.IntN(len(lengths))]).Masked()
		}
	}
	tests := []struct {
		name   string
		gen    gen
		extra  []string
		anchor int // the least expected anchor length, -1 for no index
	}{
		{"spread", randomPrefix, nil, 0},
		{"IPv4 hosts in a /16", clustered("10.1.0.0/16", 32, 32, 32, 30, 24), []string{"0.0.0.0/0", "10.0.0.0/8", "192.168.0.0/16"}, 16},
		{"IPv6 hosts in a /64", clustered("fd00:1:2:3::/64", 128, 128, 120, 96), []string{"::/0", "fd00::/8", "2001:db8::/32"}, 64},
		{"IPv4 nets in a /8", clustered("10.0.0.0/8", 16, 20, 24, 28), []string{"10.0.0.0/9"}, 8},
		{"too few prefixes for an index", clustered("10.0.0.0/8", 16, 20, 24, 28), nil, -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			var tab Table[uint8]
			var ref reference
			var stored []netip.Prefix
			add := func(p netip.Prefix, v uint8) {
				tab.Insert(p, v)
				ref.insert(p, v)
				stored = append(stored, p)
			}
			for _, p := range tc.extra {
				add(netip.MustParsePrefix(p), 3)
			}
			n := 1500
			if tc.anchor < 0 {
				n = jumpMinPrefixes / 2
			}
			for range n {
				add(tc.gen(rng), uint8(rng.IntN(3)))
			}
			mustValid(t, &tab)
			j := tab.jump4
			if stored[len(stored)-1].Addr().Is6() {
				j = tab.jump6
			}
			switch {
			case tc.anchor < 0 && (tab.jump4 != nil || tab.jump6 != nil):
				t.Fatal("small table has a jump index")
			case tc.anchor >= 0 && j == nil:
				t.Fatal("no jump index")
			case j != nil && int(j.s) < tc.anchor:
				t.Fatalf("jump index anchored at length %d, want at least %d", j.s, tc.anchor)
			}
			probe := func(n int) {
				t.Helper()
				for i := range n {
					var a netip.Addr
					if i%2 == 0 {
						a = randomAddr(rng, stored[0].Addr().Is6())
					} else {
						a = addrInside(rng, stored[rng.IntN(len(stored))])
					}
					gv, gok := tab.Lookup(a)
					wv, wok := ref.lookup(a)
					if gv != wv || gok != wok {
						t.Fatalf("Lookup(%v) = %d, %v; want %d, %v", a, gv, gok, wv, wok)
					}
				}
			}
			probe(4000)
			// Remove the outside routes (changing owners above the
			// anchor), a third of the rest, and re-insert some with new
			// owners; check after each phase.
			for _, p := range tc.extra {
				if !tab.Remove(netip.MustParsePrefix(p), 3) || !ref.remove(netip.MustParsePrefix(p), 3) {
					t.Fatalf("Remove(%s) failed", p)
				}
			}
			mustValid(t, &tab)
			probe(2000)
			for i := 0; i < len(stored); i += 3 {
				v, _ := tab.Lookup(stored[i].Addr())
				tab.Remove(stored[i], v)
				ref.remove(stored[i], v)
			}
			for i := 1; i < len(stored); i += 5 {
				tab.Insert(stored[i], 3)
				ref.insert(stored[i], 3)
			}
			mustValid(t, &tab)
			probe(2000)
			tab.RemoveValue(1)
			ref.removeValue(1)
			mustValid(t, &tab)
			probe(2000)
			compareAll(t, &tab, &ref)
		})
	}
}
