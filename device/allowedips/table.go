package allowedips

// This file holds the exported Table: it converts netip values and raw
// header bytes into 128-bit keys and keeps the per-value index and the
// trie in step.

import (
	"encoding/binary"
	"net/netip"
)

// Table maps IPv4 and IPv6 prefixes to owners of type T and answers
// longest-prefix-match lookups. The zero value is an empty table ready to
// use. A Table must not be copied after first use.
//
// Table has no lock. Lookups, Prefixes, Count and Len may run concurrently
// with each other but not with Insert, Remove or RemoveValue; the owner of
// the table serialises writers against readers (the device uses one
// sync.RWMutex, read-locked once per packet batch).
type Table[T comparable] struct {
	_ noCopy

	// Locking: every field below, and every node, index entry and jump
	// entry reachable from it, is written only by Insert, Remove and
	// RemoveValue (callers hold their write lock) and read by the other
	// methods (callers hold at least their read lock).

	// root4 and root6 are the permanent length-0 roots, allocated by the
	// first insertion into each family.
	root4, root6 *node[T]
	// jump4 and jump6 are the jump indexes of large families, nil for
	// small ones (jump.go).
	jump4, jump6 *jumpIndex[T]
	// owners indexes every value that owns at least one prefix.
	owners map[T]*owner[T]
	// count4 and count6 are the numbers of stored prefixes per family.
	count4, count6 int
	// jumpMin overrides jumpMinPrefixes when non-zero (tests); a negative
	// value disables the jump index.
	jumpMin int
}

// noCopy makes go vet's copylocks check report copies of a Table: its
// nodes point at each other and at index entries owned by the table.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// key converts a valid prefix into its masked 128-bit key, length and
// family.
func key(p netip.Prefix) (hi, lo uint64, length uint8, v6 bool) {
	p = p.Masked()
	a := p.Addr()
	if a.Is4() {
		b := a.As4()
		return uint64(binary.BigEndian.Uint32(b[:])) << 32, 0, uint8(p.Bits()), false
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]), uint8(p.Bits()), true
}

// prefix returns the prefix stored at n.
func (n *node[T]) prefix() netip.Prefix {
	if !n.v6 {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(n.hi>>32))
		return netip.PrefixFrom(netip.AddrFrom4(b), int(n.bits))
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], n.hi)
	binary.BigEndian.PutUint64(b[8:], n.lo)
	return netip.PrefixFrom(netip.AddrFrom16(b), int(n.bits))
}

// Insert stores p, masked to its length, with owner v. If the prefix is
// already present it is moved to v. An invalid prefix (the zero Prefix, or
// one whose length is out of range) is ignored; callers parse and reject
// such input before it gets here. Insert walks at most the address width
// in nodes and allocates at most two nodes, plus amortised growth of v's
// index entry and, when the family size doubles, a new jump index. When a jump index exists and the
// prefix is no longer than its depth, the entries under the prefix are
// patched too (a few for long prefixes, the whole index for /0), and
// index rebuilds add amortised O(1) per change.
func (t *Table[T]) Insert(p netip.Prefix, v T) {
	if !p.IsValid() {
		return
	}
	hi, lo, length, v6 := key(p)
	root := &t.root4
	if v6 {
		root = &t.root6
	}
	if *root == nil {
		*root = &node[T]{v6: v6}
	}
	n, top := place(*root, hi, lo, length, v6)
	j := t.jump(v6)
	if top != nil && j != nil {
		j.linked(top)
		if top != n {
			j.linked(n)
		}
	}
	gained := n.owner == nil
	if gained {
		t.adjust(v6, 1)
	} else {
		if n.owner.value == v {
			return
		}
		t.disown(n) // index entries hold nodes: nothing to update
	}
	o := t.owners[v]
	if o == nil {
		if t.owners == nil {
			t.owners = make(map[T]*owner[T])
		}
		o = &owner[T]{value: v}
		t.owners[v] = o
	}
	o.push(n)
	if gained && j != nil {
		j.gained(n)
	}
	t.resize(v6)
}

// disown unlinks n from its owner's list, dropping the index entry when it
// becomes empty. It does not touch the trie or the prefix count.
func (t *Table[T]) disown(n *node[T]) {
	o := n.owner
	o.unlink(n)
	if len(o.nodes) == 0 {
		delete(t.owners, o.value)
	}
}

// Remove deletes p (masked) if it is present and owned by v, and reports
// whether it did. A prefix owned by another value is left alone. Its cost
// is that of Insert.
func (t *Table[T]) Remove(p netip.Prefix, v T) bool {
	if !p.IsValid() {
		return false
	}
	hi, lo, length, v6 := key(p)
	root := t.root4
	if v6 {
		root = t.root6
	}
	n := find(root, hi, lo, length)
	if n == nil || n.owner == nil || n.owner.value != v {
		return false
	}
	t.disown(n)
	t.adjust(v6, -1)
	if j := t.jump(v6); j != nil {
		j.lost(n)
	}
	t.prune(n)
	t.resize(v6)
	return true
}

// RemoveValue deletes every prefix owned by v. Its cost is proportional
// to the number of prefixes v owns (each as for Remove); when v owns at
// least an eighth of the table, the jump indexes are rebuilt once at the
// end instead.
func (t *Table[T]) RemoveValue(v T) {
	o := t.owners[v]
	if o == nil {
		return
	}
	if 8*len(o.nodes) >= t.Len() {
		// A large share of the table goes: rebuilding the jump indexes
		// afterwards (O(table)) is cheaper than patching them for each
		// prefix.
		t.jump4, t.jump6 = nil, nil
	}
	for _, n := range o.nodes {
		n.owner, n.idx = nil, 0
		t.adjust(n.v6, -1)
		if j := t.jump(n.v6); j != nil {
			j.lost(n)
		}
		t.prune(n)
	}
	o.nodes = nil
	delete(t.owners, v)
	t.resize(false)
	t.resize(true)
}

// adjust changes a family's prefix count by d.
func (t *Table[T]) adjust(v6 bool, d int) {
	if v6 {
		t.count6 += d
	} else {
		t.count4 += d
	}
}

// jump returns the jump index of a family, or nil.
func (t *Table[T]) jump(v6 bool) *jumpIndex[T] {
	if v6 {
		return t.jump6
	}
	return t.jump4
}

// unlinked reports to the jump index that n left the trie, p being its
// former parent.
func (t *Table[T]) unlinked(n, p *node[T]) {
	if j := t.jump(n.v6); j != nil {
		j.unlinked(n, p)
	}
}

// resize builds, rebuilds or drops a family's jump index when the family
// has grown to twice or shrunk to half the size it had at the last
// build, so rebuilding costs O(1) amortised per change.
func (t *Table[T]) resize(v6 bool) {
	j, root, count, width := &t.jump4, t.root4, t.count4, uint8(32)
	if v6 {
		j, root, count, width = &t.jump6, t.root6, t.count6, 128
	}
	least := jumpMinPrefixes
	if t.jumpMin != 0 {
		least = t.jumpMin
	}
	switch {
	case least < 0 || count < least:
		*j = nil
	case *j == nil || count >= 2*(*j).builtAt || 2*count <= (*j).builtAt:
		*j = buildJump(root, count, width)
	}
}

// Lookup returns the owner of the longest stored prefix containing a. An
// IPv4-mapped IPv6 address (::ffff:a.b.c.d) is looked up as the IPv4
// address a.b.c.d; a zone is ignored. It reports false when no prefix
// matches or a is invalid. Lookup does not allocate.
func (t *Table[T]) Lookup(a netip.Addr) (T, bool) {
	var o *owner[T]
	switch {
	case a.Is4() || a.Is4In6():
		b := a.Unmap().As4()
		o = lookup4(t.root4, t.jump4, uint64(binary.BigEndian.Uint32(b[:]))<<32)
	case a.Is6():
		b := a.As16()
		o = lookup6(t.root6, t.jump6, binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:]))
	}
	if o == nil {
		var zero T
		return zero, false
	}
	return o.value, true
}

// LookupBytes is Lookup for an address taken straight from a packet
// header: 4 bytes are looked up as IPv4 and 16 bytes as IPv6, without
// unmapping (an IPv6 header is routed by the IPv6 table). Any other
// length reports false. LookupBytes does not allocate and does not retain
// ip.
func (t *Table[T]) LookupBytes(ip []byte) (T, bool) {
	var o *owner[T]
	switch len(ip) {
	case 4:
		o = lookup4(t.root4, t.jump4, uint64(binary.BigEndian.Uint32(ip))<<32)
	case 16:
		o = lookup6(t.root6, t.jump6, binary.BigEndian.Uint64(ip[:8]), binary.BigEndian.Uint64(ip[8:]))
	}
	if o == nil {
		var zero T
		return zero, false
	}
	return o.value, true
}

// Prefixes calls yield for each prefix owned by v until yield returns
// false. The order is insertion order until one of v's prefixes is
// removed or moved away, and unspecified after that. Prefixes builds no
// list, so a value with many prefixes can be streamed (for example to a
// UAPI client) in constant memory. yield must not modify the table.
func (t *Table[T]) Prefixes(v T, yield func(netip.Prefix) bool) {
	o := t.owners[v]
	if o == nil {
		return
	}
	for _, n := range o.nodes {
		if !yield(n.prefix()) {
			return
		}
	}
}

// Count returns the number of prefixes owned by v.
func (t *Table[T]) Count(v T) int {
	if o := t.owners[v]; o != nil {
		return len(o.nodes)
	}
	return 0
}

// Len returns the number of prefixes in the table.
func (t *Table[T]) Len() int {
	return t.count4 + t.count6
}
