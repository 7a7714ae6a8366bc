package allowedips

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestJumpSlot checks bit extraction at every anchor length and index
// width against a bit-by-bit reading of the key.
func TestJumpSlot(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		hi, lo := rng.Uint64(), rng.Uint64()
		for s := range 128 {
			for k := 1; k <= jumpMaxBits && s+k <= 128; k++ {
				var want uint64
				for i := s; i < s+k; i++ {
					want = want<<1 | uint64(bitAt(hi, lo, uint8(i)))
				}
				if got := jumpSlot(hi, lo, uint8(s), uint8(k)); got != want {
					t.Fatalf("jumpSlot(%#x, %#x, s=%d, k=%d) = %#x, want %#x", hi, lo, s, k, got, want)
				}
			}
		}
	}
}

// TestJumpIndexLifecycle checks that the index appears at the threshold,
// is rebuilt as the family doubles, disappears when it shrinks below the
// threshold, and stays exact throughout, for anchors that straddle the
// 64-bit boundary of IPv6 keys.
func TestJumpIndexLifecycle(t *testing.T) {
	for _, base := range []string{"2001:db8:aa00::/40", "2001:db8:1:2:3::/80", "10.64.0.0/10"} {
		t.Run(base, func(t *testing.T) {
			cluster := netip.MustParsePrefix(base)
			rng := rand.New(rand.NewPCG(5, 5))
			var tab Table[int]
			var sawAnchor uint8
			for i := 0; tab.Len() < 4*jumpMinPrefixes; i++ {
				p := netip.PrefixFrom(addrInside(rng, cluster), cluster.Addr().BitLen()-rng.IntN(12)).Masked()
				tab.Insert(p, i%7)
				j := tab.jump4
				if cluster.Addr().Is6() {
					j = tab.jump6
				}
				if (j != nil) != (tab.Len() >= jumpMinPrefixes) {
					t.Fatalf("at %d prefixes jump index present = %v", tab.Len(), j != nil)
				}
				if j != nil {
					sawAnchor = max(sawAnchor, j.s)
				}
				if tab.Len()%256 == 0 {
					mustValid(t, &tab)
				}
			}
			if int(sawAnchor) < cluster.Bits() {
				t.Fatalf("anchor never reached the cluster: deepest %d, cluster /%d", sawAnchor, cluster.Bits())
			}
			mustValid(t, &tab)
			type entry struct {
				p netip.Prefix
				v int
			}
			var all []entry
			for v := range 7 {
				tab.Prefixes(v, func(p netip.Prefix) bool {
					all = append(all, entry{p, v})
					return true
				})
			}
			if len(all) != tab.Len() {
				t.Fatalf("streamed %d prefixes, table has %d", len(all), tab.Len())
			}
			rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
			for i, e := range all {
				if !tab.Remove(e.p, e.v) {
					t.Fatalf("Remove(%v, %d) failed", e.p, e.v)
				}
				if i%200 == 0 {
					mustValid(t, &tab)
				}
			}
			mustValid(t, &tab)
			if tab.jump4 != nil || tab.jump6 != nil || tab.Len() != 0 {
				t.Fatalf("after removing everything: Len %d, index present %v", tab.Len(), tab.jump4 != nil || tab.jump6 != nil)
			}
		})
	}
}

// TestRemoveValuePatchesIndex removes values that each own a small share
// of a large table, so that RemoveValue patches the jump indexes prefix
// by prefix instead of rebuilding them, and checks the indexes stay exact.
func TestRemoveValuePatchesIndex(t *testing.T) {
	tab := randomTable(t, 6000, 40, 3)
	j4, j6 := tab.jump4, tab.jump6
	if j4 == nil || j6 == nil {
		t.Fatal("table of 6000 prefixes has no jump index")
	}
	for v := range 10 {
		var owned []netip.Prefix
		tab.Prefixes(v, func(p netip.Prefix) bool { owned = append(owned, p); return true })
		if len(owned) == 0 || 8*len(owned) >= tab.Len() {
			t.Fatalf("value %d owns %d of %d prefixes; the test needs a small share", v, len(owned), tab.Len())
		}
		tab.RemoveValue(v)
		mustValid(t, tab)
		if tab.jump4 != j4 || tab.jump6 != j6 {
			t.Fatal("jump index was rebuilt; the patch path was not exercised")
		}
		for _, p := range owned {
			if got, ok := tab.Lookup(p.Addr()); ok && got == v {
				t.Fatalf("%v still routes to removed value %d", p.Addr(), v)
			}
		}
	}
}
