// Package pktqueue hands received IP packets from receive goroutines to
// readers (ReadPacket/ReadPackets of the client and the server) through a
// bounded queue of recycled buffers.
//
//	receive goroutine: Put -> free buffer (none: drop, like a NIC ring)
//	    -> copy -> queue
//	reader: Read / ReadBatch <- queue (the first blocks, the rest only if
//	    already queued) -> copy out -> buffer back to the free list
package pktqueue

// buf is one queued packet.
type buf struct {
	b []byte
	n int
}

// Queue is a bounded packet queue. Its methods may be called from any
// goroutine.
type Queue struct {
	q      chan *buf // queued packets
	free   chan *buf // empty buffers
	bufLen int       // a grown buffer is cut back to this size on return
}

// New returns a queue of n buffers of bufLen bytes (larger packets get a
// larger buffer for the time they are queued).
func New(n, bufLen int) *Queue {
	q := &Queue{q: make(chan *buf, n), free: make(chan *buf, n), bufLen: bufLen}
	for range n {
		q.free <- &buf{b: make([]byte, bufLen)}
	}
	return q
}

// Put queues a copy of p. It reports false, dropping p, when every buffer
// is in use.
func (q *Queue) Put(p []byte) bool {
	var b *buf
	select {
	case b = <-q.free:
	default:
		return false
	}
	if len(p) > len(b.b) {
		b.b = make([]byte, len(p))
	}
	b.n = copy(b.b, p)
	q.q <- b
	return true
}

// Len returns how many packets are queued.
func (q *Queue) Len() int { return len(q.q) }

// take copies b's packet to dst and recycles b.
func (q *Queue) take(dst []byte, b *buf) int {
	n := copy(dst, b.b[:b.n])
	if len(b.b) > q.bufLen {
		b.b = b.b[:q.bufLen:q.bufLen]
	}
	q.free <- b
	return n
}

// Read copies the next packet into dst, waiting for one until done is
// closed (then it reports false).
func (q *Queue) Read(dst []byte, done <-chan struct{}) (int, bool) {
	select {
	case b := <-q.q:
		return q.take(dst, b), true
	case <-done:
		return 0, false
	}
}

// ReadBatch waits (until done is closed, then it reports false) for at
// least one packet, then copies it and whatever else is already queued,
// up to len(bufs), into bufs[i][offset:] and sets sizes[i].
func (q *Queue) ReadBatch(bufs [][]byte, sizes []int, offset int, done <-chan struct{}) (int, bool) {
	if len(bufs) == 0 {
		return 0, true
	}
	var b *buf
	select {
	case b = <-q.q:
	case <-done:
		return 0, false
	}
	n := 0
	for {
		sizes[n] = q.take(bufs[n][offset:], b)
		n++
		if n == len(bufs) {
			return n, true
		}
		select {
		case b = <-q.q:
		default:
			return n, true
		}
	}
}
