package allowedips

import (
	"fmt"
	"testing"
)

// checkInvariants verifies the structure of t: trie shape, compression,
// key masking, parent links, and agreement between the trie, the per-value
// index and the counters. It reports the first violation found.
func checkInvariants[T comparable](t *Table[T]) error {
	owned := 0
	for _, fam := range []struct {
		root  *node[T]
		jump  *jumpIndex[T]
		count int
		v6    bool
		width uint8
	}{{t.root4, t.jump4, t.count4, false, 32}, {t.root6, t.jump6, t.count6, true, 128}} {
		if err := checkJump(fam.root, fam.jump, fam.width); err != nil {
			return fmt.Errorf("IPv6 %v: %v", fam.v6, err)
		}
		if fam.root == nil {
			if fam.count != 0 {
				return fmt.Errorf("IPv6 %v: no trie but count %d", fam.v6, fam.count)
			}
			continue
		}
		before := owned
		if fam.root.bits != 0 || fam.root.parent != nil || fam.root.v6 != fam.v6 {
			return fmt.Errorf("bad root %+v", fam.root)
		}
		var walk func(n *node[T]) error
		walk = func(n *node[T]) error {
			if n.v6 != fam.v6 || n.bits > fam.width {
				return fmt.Errorf("node %v: wrong family or length", n.prefix())
			}
			if !fam.v6 && (n.lo != 0 || n.hi&0xffffffff != 0) {
				return fmt.Errorf("node %v: IPv4 key uses low bits", n.prefix())
			}
			if h, l := maskTo(n.hi, n.lo, n.bits); h != n.hi || l != n.lo {
				return fmt.Errorf("node %v: key not masked", n.prefix())
			}
			if n.owner != nil {
				owned++
				if t.owners[n.owner.value] != n.owner {
					return fmt.Errorf("node %v: owner not in index", n.prefix())
				}
			} else if n.parent != nil && (n.child[0] == nil || n.child[1] == nil) {
				return fmt.Errorf("node %v: owner-less node with fewer than two children", n.prefix())
			}
			for side, c := range n.child {
				if c == nil {
					continue
				}
				if c.parent != n {
					return fmt.Errorf("node %v: child %v has wrong parent", n.prefix(), c.prefix())
				}
				if c.bits <= n.bits {
					return fmt.Errorf("node %v: child %v not longer", n.prefix(), c.prefix())
				}
				if commonBits(n.hi, n.lo, c.hi, c.lo) < n.bits {
					return fmt.Errorf("node %v: child %v outside prefix", n.prefix(), c.prefix())
				}
				if bitAt(c.hi, c.lo, n.bits) != side {
					return fmt.Errorf("node %v: child %v on wrong side", n.prefix(), c.prefix())
				}
				if err := walk(c); err != nil {
					return err
				}
			}
			return nil
		}
		if err := walk(fam.root); err != nil {
			return err
		}
		if owned-before != fam.count {
			return fmt.Errorf("IPv6 %v: %d owned nodes, family count %d", fam.v6, owned-before, fam.count)
		}
	}
	if owned != t.Len() {
		return fmt.Errorf("trie has %d owned nodes, count says %d", owned, t.Len())
	}
	listed := 0
	for v, o := range t.owners {
		if o.value != v {
			return fmt.Errorf("index entry %v: holds value %v", v, o.value)
		}
		if len(o.nodes) == 0 {
			return fmt.Errorf("index entry %v: empty", v)
		}
		for i, x := range o.nodes {
			if x.owner != o || x.idx != uint32(i) {
				return fmt.Errorf("index entry %v: node %v at %d has owner %p idx %d", v, x.prefix(), i, x.owner, x.idx)
			}
		}
		n := len(o.nodes)
		listed += n
	}
	if listed != t.Len() {
		return fmt.Errorf("index lists %d prefixes, count says %d", listed, t.Len())
	}
	return nil
}

// mustValid fails the test if t's invariants do not hold.
func mustValid[T comparable](tb testing.TB, t *Table[T]) {
	tb.Helper()
	if err := checkInvariants(t); err != nil {
		tb.Fatal(err)
	}
}

// nodeCount returns the number of nodes in both tries, roots included.
func nodeCount[T comparable](t *Table[T]) int {
	var count func(n *node[T]) int
	count = func(n *node[T]) int {
		if n == nil {
			return 0
		}
		return 1 + count(n.child[0]) + count(n.child[1])
	}
	return count(t.root4) + count(t.root6)
}

// checkJump recomputes every entry of j by walking the trie from the root
// and compares.
func checkJump[T comparable](root *node[T], j *jumpIndex[T], width uint8) error {
	if j == nil {
		return nil
	}
	if root == nil {
		return fmt.Errorf("jump index without a trie")
	}
	if j.k == 0 || j.s+j.k > width || j.width != width || len(j.ent) != 1<<j.k {
		return fmt.Errorf("jump index shape s=%d k=%d width=%d entries=%d", j.s, j.k, j.width, len(j.ent))
	}
	if h, l := maskTo(j.hi, j.lo, j.s); h != j.hi || l != j.lo {
		return fmt.Errorf("jump anchor not masked")
	}
	end := j.s + j.k
	for i := range j.ent {
		// The block is the anchor followed by the k bits of i.
		hi, lo := j.hi, j.lo
		for b := range j.k {
			if i>>(j.k-1-b)&1 == 0 {
				continue
			}
			pos := j.s + b
			if pos < 64 {
				hi |= 1 << (63 - pos)
			} else {
				lo |= 1 << (127 - pos)
			}
		}
		var want, best *node[T]
		for n := root; n != nil && n.bits <= end; n = n.child[bitAt(hi, lo, n.bits)] {
			if commonBits(hi, lo, n.hi, n.lo) < n.bits {
				break
			}
			want = n
			if n.owner != nil {
				best = n
			}
			if n.bits == 128 {
				break
			}
		}
		if e := j.ent[i]; e.n != want || e.best != best {
			return fmt.Errorf("jump entry %d (anchor len %d, k %d): node %p best %p, want %p and %p", i, j.s, j.k, e.n, e.best, want, best)
		}
	}
	return nil
}
