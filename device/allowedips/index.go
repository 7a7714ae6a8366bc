package allowedips

// This file holds the per-value index: for every value that owns at least
// one prefix, the list of its nodes. It lets Count, Prefixes and
// RemoveValue cost in proportion to one value's prefixes rather than the
// whole table.

// owner is the index entry of one value. Nodes point at their owner, so a
// lookup reaches the value in one step and a change of owner needs no map
// access for the old value. nodes is kept dense by swap-removal; each node
// records its position in idx.
type owner[T comparable] struct {
	value T
	nodes []*node[T]
}

// push appends n to o's nodes and makes o its owner.
func (o *owner[T]) push(n *node[T]) {
	n.owner = o
	n.idx = uint32(len(o.nodes))
	o.nodes = append(o.nodes, n)
}

// unlink removes n from o's nodes and clears its owner. The last node
// takes n's place, so the order of o's nodes changes.
func (o *owner[T]) unlink(n *node[T]) {
	last := len(o.nodes) - 1
	moved := o.nodes[last]
	o.nodes[n.idx] = moved
	moved.idx = n.idx
	o.nodes[last] = nil
	o.nodes = o.nodes[:last]
	n.owner, n.idx = nil, 0
	if cap(o.nodes) > 64 && len(o.nodes) < cap(o.nodes)/4 {
		// Give memory back after a value loses most of its prefixes.
		o.nodes = append([]*node[T](nil), o.nodes...)
	}
}
