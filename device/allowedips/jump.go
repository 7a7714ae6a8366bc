package allowedips

// This file holds the jump index: a direct-indexed array that lets a
// lookup in a large trie skip the first levels of the walk.
//
//	Lookup:  address inside the anchor? -> entry for the next k bits
//	         -> continue the trie walk below the entry's node
//	Writes:  a node of length at most s+k that is linked in, unlinked,
//	         gains or loses an owner patches the entries of its blocks in
//	         one sequential pass (no walk of its subtree); a family whose
//	         size doubled or halved since the last build gets a fresh
//	         index, built by one walk of the trie's top.
//
// The index is anchored at a prefix A of length s, chosen at build time as
// the deepest node whose subtree holds at least 7/8 of the family's
// prefixes, so that a table whose prefixes mostly live in, say,
// 10.0.0.0/8 or fd00::/64 still gets k useful bits. Entry i describes
// the block of addresses that start with A followed by the k bits of i: the deepest
// node of length at most s+k whose prefix contains the block, and the
// deepest of those nodes that has an owner. Entries hold nodes, not
// owners, so moving a prefix to another owner changes no entry.
// Addresses outside A take the ordinary walk from the root.

import "math/bits"

const (
	// jumpMinPrefixes is the family size from which an index is kept.
	// Smaller tries are shallow and stay in cache.
	jumpMinPrefixes = 512
	// jumpMaxBits caps the index at 2^16 entries (1 MiB).
	jumpMaxBits = 16
)

// jumpEntry is the precomputed state of a walk after the first s+k bits.
type jumpEntry[T comparable] struct {
	n    *node[T] // deepest node of length <= s+k containing the block
	best *node[T] // deepest such node with an owner, or nil
}

// jumpIndex is the index of one family.
type jumpIndex[T comparable] struct {
	hi, lo  uint64 // the anchor prefix A, masked
	s, k    uint8  // A's length and the number of indexed bits
	width   uint8  // 32 or 128
	builtAt int    // family size when built, for the resize policy
	ent     []jumpEntry[T]
}

// jumpSlot returns the k bits of (hi, lo) that follow position s.
func jumpSlot(hi, lo uint64, s, k uint8) uint64 {
	var top uint64
	switch {
	case s == 0:
		top = hi
	case s < 64:
		top = hi<<s | lo>>(64-s)
	default:
		top = lo << (s - 64)
	}
	return top >> (64 - k)
}

// contains reports whether the masked prefix (hi, lo)/length contains
// the key (h2, l2).
func contains(hi, lo uint64, length uint8, h2, l2 uint64) bool {
	return commonBits(hi, lo, h2, l2) >= length
}

// buildJump returns a fresh index for the trie under root holding count
// prefixes, with one to two entries per prefix, or nil if there is no
// room below the anchor. It costs O(count + entries).
func buildJump[T comparable](root *node[T], count int, width uint8) *jumpIndex[T] {
	if root == nil {
		return nil
	}
	k := uint8(min(bits.Len(uint(count)), jumpMaxBits))
	// Anchor the index at the deepest node whose subtree holds nearly
	// all prefixes, as long as k bits still fit below it. At each step
	// only the smaller child's subtree is walked (see smaller); while the
	// descent continues those subtrees hang off the path and together hold
	// at most 1/8 of the prefixes, so the descent costs O(count).
	a, rem := root, count // rem: prefixes in a's subtree
	for {
		if a.owner != nil {
			rem--
		}
		var big *node[T]
		switch {
		case a.child[0] == nil:
			big = a.child[1]
		case a.child[1] == nil:
			big = a.child[0]
		default:
			side, n := smaller(a.child[0], a.child[1])
			big = a.child[1-side]
			rem -= n
		}
		if big == nil || big.bits+k > width || 8*rem < 7*count {
			break
		}
		a = big
	}
	k = min(k, width-a.bits)
	if k == 0 {
		return nil
	}
	j := &jumpIndex[T]{hi: a.hi, lo: a.lo, s: a.bits, k: k, width: width, builtAt: count,
		ent: make([]jumpEntry[T], 1<<k)}
	j.refresh(root, a.hi, a.lo, a.bits)
	return j
}

// smaller walks the subtrees under x and y in lock step until one is
// exhausted, and returns that side (0 for x) and the number of prefixes in
// it. It visits about twice the smaller subtree's nodes. A child holding
// at least 7/8 of the prefixes always has more nodes than its sibling (a
// subtree of n prefixes has between n and 2n nodes), so it is never the
// side returned.
func smaller[T comparable](x, y *node[T]) (side, count int) {
	stacks := [2][]*node[T]{{x}, {y}}
	var counts [2]int
	for {
		for i := range stacks {
			st := stacks[i]
			if len(st) == 0 {
				return i, counts[i]
			}
			n := st[len(st)-1]
			st = st[:len(st)-1]
			if n.owner != nil {
				counts[i]++
			}
			for _, c := range n.child {
				if c != nil {
					st = append(st, c)
				}
			}
			stacks[i] = st
		}
	}
}

// blocks returns the entries whose blocks lie inside n's prefix: all of
// them if n contains the anchor, none if n is disjoint from it or longer
// than s+k.
func (j *jumpIndex[T]) blocks(n *node[T]) []jumpEntry[T] {
	switch {
	case n.bits > j.s+j.k:
		// Deeper nodes are reached by the walk after the entry.
		return nil
	case n.bits <= j.s:
		if contains(n.hi, n.lo, n.bits, j.hi, j.lo) {
			return j.ent
		}
		return nil
	case contains(j.hi, j.lo, j.s, n.hi, n.lo):
		first := jumpSlot(n.hi, n.lo, j.s, j.k)
		return j.ent[first : first+1<<(j.s+j.k-n.bits)]
	}
	return nil
}

// linked updates the entries after n was linked into the trie: n is now
// the deepest node for every block of its prefix whose deepest node was
// shorter (an ancestor of n). n must not have an owner yet.
func (j *jumpIndex[T]) linked(n *node[T]) {
	ent := j.blocks(n)
	for i := range ent {
		if ent[i].n.bits < n.bits {
			ent[i].n = n
		}
	}
}

// unlinked updates the entries after n left the trie; p was its parent,
// which takes its place as the deepest node of its blocks. n has no owner.
func (j *jumpIndex[T]) unlinked(n, p *node[T]) {
	ent := j.blocks(n)
	for i := range ent {
		if ent[i].n == n {
			ent[i].n = p
		}
	}
}

// gained updates the entries after n, which had no owner, got one.
func (j *jumpIndex[T]) gained(n *node[T]) {
	ent := j.blocks(n)
	for i := range ent {
		if b := ent[i].best; b == nil || b.bits < n.bits {
			ent[i].best = n
		}
	}
}

// lost updates the entries after n lost its owner: the nearest ancestor
// with an owner takes its place.
func (j *jumpIndex[T]) lost(n *node[T]) {
	ent := j.blocks(n)
	if len(ent) == 0 {
		return
	}
	var up *node[T]
	for x := n.parent; x != nil; x = x.parent {
		if x.owner != nil {
			up = x
			break
		}
	}
	for i := range ent {
		if ent[i].best == n {
			ent[i].best = up
		}
	}
}

// refresh computes the entries of the blocks inside the prefix
// (hi, lo)/length, which lies inside the anchor and has length at most
// s+k, walking down from the root.
func (j *jumpIndex[T]) refresh(root *node[T], hi, lo uint64, length uint8) {
	// Find the deepest node of length <= length containing the prefix.
	var best *node[T]
	m := root
	for n := root; n != nil && n.bits <= length && contains(n.hi, n.lo, n.bits, hi, lo); n = n.child[bitAt(hi, lo, n.bits)] {
		m = n
		if n.owner != nil {
			best = n
		}
		if n.bits == length {
			break
		}
	}
	first := jumpSlot(hi, lo, j.s, j.k)
	j.cover(m, best, first, first+1<<(j.s+j.k-length), hi, lo, length)
}

// cover writes the entries [from, to), the blocks of the prefix
// (hi, lo)/length, given that m is the deepest node of length at most
// length containing that prefix and best the deepest node with an owner
// containing it. Each entry is written once: m's children inside
// the prefix (of length at most s+k) take their own ranges, recursively,
// and m fills the gaps.
func (j *jumpIndex[T]) cover(m, best *node[T], from, to uint64, hi, lo uint64, length uint8) {
	end := j.s + j.k
	pos := from
	for _, c := range m.child { // child[0]'s blocks precede child[1]'s
		if c == nil || c.bits > end || c.bits < length || !contains(hi, lo, length, c.hi, c.lo) {
			continue
		}
		cbest := best
		if c.owner != nil {
			cbest = c
		}
		cfrom := jumpSlot(c.hi, c.lo, j.s, j.k)
		cto := cfrom + 1<<(end-c.bits)
		j.set(pos, cfrom, m, best)
		j.cover(c, cbest, cfrom, cto, c.hi, c.lo, c.bits)
		pos = cto
	}
	j.set(pos, to, m, best)
}

// set stores (n, best) in the entries [from, to).
func (j *jumpIndex[T]) set(from, to uint64, n, best *node[T]) {
	blocks := j.ent[from:to]
	for i := range blocks {
		blocks[i] = jumpEntry[T]{n, best}
	}
}
