package allowedips

// This file holds the trie itself: node layout, bit arithmetic on 128-bit
// keys, and the three structural operations (place, prune, lookup).
//
//	Insert:  place (walk, split an edge if needed, create the node) -> adopt
//	         -> patch the jump index (jump.go: linked, gained)
//	Remove:  find exact node -> disown -> patch the index (lost) -> prune
//	         (drop or splice the node; patch the index: unlinked)
//	Lookup:  jump index entry, if any -> walk while the node matches,
//	         keeping the last owner

import "math/bits"

// node is one trie node. A node with owner == nil is a branch node: it
// exists only because two stored prefixes diverge at its length, and it
// always has two children (the permanent root is the exception).
type node[T comparable] struct {
	// The fields a lookup reads come first; the whole node is 56 bytes on
	// 64-bit platforms and is allocated from the 64-byte size class, so a
	// lookup touches one cache line per level.
	child [2]*node[T]
	// hi and lo hold the prefix, masked to bits. IPv4 prefixes live in the
	// top 32 bits of hi; lo is then zero.
	hi, lo uint64
	owner  *owner[T] // nil for a branch node

	parent *node[T] // nil only for a family's root
	idx    uint32   // position in owner.nodes while owner != nil
	bits   uint8
	v6     bool
}

// attach makes c the child of n on side b.
func (n *node[T]) attach(b int, c *node[T]) {
	n.child[b] = c
	c.parent = n
}

// bitAt returns bit i of the 128-bit key (hi, lo), bit 0 being the most
// significant. Positions at or beyond 128 read as 0.
func bitAt(hi, lo uint64, i uint8) int {
	if i < 64 {
		return int(hi>>(63-i)) & 1
	}
	return int(lo>>(uint(127)-uint(i))) & 1
}

// commonBits returns the length of the common leading bits of two 128-bit
// keys, 128 when they are equal.
func commonBits(h1, l1, h2, l2 uint64) uint8 {
	if x := h1 ^ h2; x != 0 {
		return uint8(bits.LeadingZeros64(x))
	}
	return uint8(64 + bits.LeadingZeros64(l1^l2))
}

// maskTo clears every bit of (hi, lo) from position n on.
func maskTo(hi, lo uint64, n uint8) (uint64, uint64) {
	if n <= 64 {
		return hi &^ (^uint64(0) >> n), 0
	}
	return hi, lo &^ (^uint64(0) >> (n - 64))
}

// place returns the node for the masked prefix (hi, lo)/length under root,
// creating it (and a branch node if two paths diverge) when absent. top is
// the highest node created (the branch node or the new node itself), or
// nil if the node existed.
func place[T comparable](n *node[T], hi, lo uint64, length uint8, v6 bool) (found, top *node[T]) {
	for {
		if n.bits == length {
			return n, nil
		}
		side := bitAt(hi, lo, n.bits)
		c := n.child[side]
		if c == nil {
			leaf := &node[T]{hi: hi, lo: lo, bits: length, v6: v6}
			n.attach(side, leaf)
			return leaf, leaf
		}
		common := min(commonBits(hi, lo, c.hi, c.lo), length, c.bits)
		if common == c.bits {
			// c's prefix covers the new one: descend.
			n = c
			continue
		}
		fresh := &node[T]{hi: hi, lo: lo, bits: length, v6: v6}
		if common == length {
			// The new prefix covers c: it goes between n and c.
			fresh.attach(bitAt(c.hi, c.lo, length), c)
			n.attach(side, fresh)
			return fresh, fresh
		}
		// The paths diverge at bit common: add a branch node there.
		bh, bl := maskTo(hi, lo, common)
		branch := &node[T]{hi: bh, lo: bl, bits: common, v6: v6}
		branch.attach(bitAt(hi, lo, common), fresh)
		branch.attach(bitAt(c.hi, c.lo, common), c)
		n.attach(side, branch)
		return fresh, branch
	}
}

// find returns the node holding exactly the masked prefix (hi, lo)/length,
// or nil.
func find[T comparable](n *node[T], hi, lo uint64, length uint8) *node[T] {
	for n != nil && n.bits < length {
		n = n.child[bitAt(hi, lo, n.bits)]
	}
	if n == nil || n.bits != length || n.hi != hi || n.lo != lo {
		return nil
	}
	return n
}

// prune removes n, which has just lost its owner, from the trie if it is
// no longer needed, and then does the same for a parent left with one
// child. The root (parent == nil) always stays. Every node that leaves
// the trie is reported to the jump index.
func (t *Table[T]) prune(n *node[T]) {
	for {
		p := n.parent
		if n.owner != nil || p == nil || n.child[0] != nil && n.child[1] != nil {
			return
		}
		side := 0
		if p.child[1] == n {
			side = 1
		}
		switch {
		case n.child[0] != nil:
			p.attach(side, n.child[0])
		case n.child[1] != nil:
			p.attach(side, n.child[1])
		default:
			// p lost a child and may now be redundant.
			p.child[side] = nil
			n.detach()
			t.unlinked(n, p)
			n = p
			continue
		}
		// n had one child, which took its place: p is unchanged.
		n.detach()
		t.unlinked(n, p)
		return
	}
}

// detach clears the links of a node that has left the trie, so that a
// stale reference cannot keep a subtree alive.
func (n *node[T]) detach() {
	n.parent = nil
	n.child = [2]*node[T]{}
}

// lookup4 returns the owner of the longest IPv4 prefix containing the
// address held in the top 32 bits of hi.
func lookup4[T comparable](n *node[T], j *jumpIndex[T], hi uint64) *owner[T] {
	var best *node[T]
	if j != nil && uint8(bits.LeadingZeros64(hi^j.hi)) >= j.s {
		e := &j.ent[hi<<j.s>>(64-j.k)]
		best = e.best
		n = e.n.child[hi>>(63-e.n.bits)&1]
	}
	for n != nil {
		if uint8(bits.LeadingZeros64(hi^n.hi)) < n.bits {
			break
		}
		if n.owner != nil {
			best = n
		}
		n = n.child[hi>>(63-n.bits)&1]
	}
	if best == nil {
		return nil
	}
	return best.owner
}

// lookup6 returns the owner of the longest IPv6 prefix containing the
// address (hi, lo).
func lookup6[T comparable](n *node[T], j *jumpIndex[T], hi, lo uint64) *owner[T] {
	var best *node[T]
	if j != nil && commonBits(hi, lo, j.hi, j.lo) >= j.s {
		e := &j.ent[jumpSlot(hi, lo, j.s, j.k)]
		best = e.best
		n = e.n.child[bitAt(hi, lo, e.n.bits)]
	}
	for n != nil {
		if commonBits(hi, lo, n.hi, n.lo) < n.bits {
			break
		}
		if n.owner != nil {
			best = n
		}
		n = n.child[bitAt(hi, lo, n.bits)]
	}
	if best == nil {
		return nil
	}
	return best.owner
}
