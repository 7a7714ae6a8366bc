package device

import (
	"sync"
	"sync/atomic"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
)

// packet is one datagram or one TUN packet moving through the pipeline. Its
// buffer is laid out as the transport message it becomes or came from:
//
//	[0:16)          transport header (type, receiver index, counter)
//	[16:16+n)       plaintext (TUN packets are read and written at offset 16)
//	then padding and the 16-byte tag
//
// A packet belongs to exactly one stage at a time, so its fields need no
// lock: a stage hands it on through a channel or a batch's done mutex.
type packet struct {
	buf     []byte        // len == cap == the pool's buffer size
	n       int           // bytes of buf in use (see the stage)
	counter uint64        // transport counter (nonce)
	ok      bool          // receive: authenticated by the decrypt worker
	ep      conn.Endpoint // receive: where the datagram came from
	// src is, on receive, the datagram where it landed (the receive
	// goroutine's own buffer, valid until its next read) while buf does
	// not hold it yet: a batch opened by the receive goroutine decrypts
	// from src straight into buf, sparing a copy; any other batch copies
	// src into buf before it leaves the goroutine (materialize). nil once
	// buf holds the datagram, and in the pool.
	src []byte
}

// batch is up to one Bind batch of packets for one peer and one keypair.
// The producer locks done before handing the batch to both the peer's
// ordered queue and the crypto workers; the worker unlocks it after sealing
// or opening every packet, and the peer's sequential goroutine waits on it.
// That is one mutex hand-off per batch, never per packet.
type batch struct {
	done sync.Mutex
	send bool      // encrypt (true) or decrypt (false)
	peer *peer     // owner
	kp   *keypair  // session whose keys the packets use
	pkts []*packet // in order
	bufs [][]byte  // scratch for Bind.Send / tun.Write
	// nonce is scratch for sealing or opening the batch inline.
	nonce [12]byte
}

// pools recycles packets and batches. Buffers are sized to the TUN MTU plus
// the transport overhead rather than to 64 KiB; packets of an older size are
// dropped on return after an MTU change. The free lists are plain slices
// under a mutex taken once per batch, so the garbage collector never
// empties them and steady state allocates nothing.
//
// A few "large" packets (largeBufferSize, enough for any UDP datagram)
// carry what does not fit the MTU-sized buffers: a datagram from a peer
// whose MTU is larger than ours. They have their own short free list, and
// at most maxLarge of them are ever made: when all are in use, the
// datagram that needs one is dropped rather than allocated for (receive.go
// asks for one only once the datagram's type and session are known).
type pools struct {
	size atomic.Int64 // buffer size for new packets

	mu      sync.Mutex   // guards the free lists
	packets []*packet    // guarded by mu
	large   []*packet    // guarded by mu; buffers of largeBufferSize
	made    int          // guarded by mu; large packets made by exchangeLarge
	batches []*batch     // guarded by mu
	maxFree atomic.Int64 // free packets kept: about poolBytes worth
}

// largeBufferSize holds the largest UDP payload (a transport message of
// up to 65535 bytes) and the largest IP packet read from a TUN device at
// tun.Offset.
const largeBufferSize = noise.MessageTransportHeaderSize + 1<<16 + noise.AEADTagSize

// maxLarge bounds the large packets made for received datagrams: two full
// receive batches (16 MiB at most, made only as a larger-MTU peer needs
// them).
const maxLarge = 2 * conn.IdealBatchSize

// maxFreeLarge bounds the free list of large packets.
const maxFreeLarge = maxLarge

// poolBytes bounds the memory the free list keeps, so that jumbo MTUs do
// not pin thousands of 64 KiB buffers.
const poolBytes = 64 << 20

// bufferSize returns the packet buffer size for an MTU.
func bufferSize(mtu int) int {
	if mtu < MinBufferMTU {
		mtu = MinBufferMTU
	}
	padded := (mtu + PaddingMultiple - 1) &^ (PaddingMultiple - 1)
	return noise.MessageTransportHeaderSize + padded + noise.AEADTagSize
}

func newPools(mtu int) *pools {
	p := &pools{}
	p.setMTU(mtu)
	return p
}

// setMTU makes new buffers fit mtu.
func (p *pools) setMTU(mtu int) {
	size := bufferSize(mtu)
	p.size.Store(int64(size))
	p.maxFree.Store(int64(max(512, poolBytes/size)))
}

// getPackets fills the nil entries of dst, and those whose buffer has an
// old size after an MTU change, with packets.
func (p *pools) getPackets(dst []*packet) {
	size := int(p.size.Load())
	p.mu.Lock()
	for i := range dst {
		if dst[i] != nil {
			if len(dst[i].buf) == size {
				continue
			}
			if len(dst[i].buf) == largeBufferSize && len(p.large) < maxFreeLarge {
				p.large = append(p.large, dst[i])
			}
			dst[i] = nil
		}
		if pk := pop(&p.packets); pk != nil && len(pk.buf) == size {
			dst[i] = pk
			continue
		}
		dst[i] = &packet{buf: make([]byte, size)}
	}
	p.mu.Unlock()
}

// exchangeLarge returns a packet whose buffer holds largeBufferSize bytes
// and takes pk back, or returns nil (and keeps nothing) when every large
// packet the budget allows is in use.
func (p *pools) exchangeLarge(pk *packet) *packet {
	size := int(p.size.Load())
	maxFree := int(p.maxFree.Load())
	p.mu.Lock()
	defer p.mu.Unlock()
	lp := pop(&p.large)
	if lp == nil {
		if p.made >= maxLarge {
			return nil
		}
		p.made++
		lp = &packet{buf: make([]byte, largeBufferSize)}
	}
	if len(pk.buf) == size && len(p.packets) < maxFree {
		pk.n, pk.ok, pk.counter, pk.ep, pk.src = 0, false, 0, conn.Endpoint{}, nil
		p.packets = append(p.packets, pk)
	}
	return lp
}

// putPackets returns packets to the pool.
func (p *pools) putPackets(pkts []*packet) {
	size := int(p.size.Load())
	maxFree := int(p.maxFree.Load())
	p.mu.Lock()
	for _, pk := range pkts {
		if pk == nil {
			continue
		}
		switch {
		case len(pk.buf) == size && len(p.packets) < maxFree:
			pk.n, pk.ok, pk.counter, pk.ep, pk.src = 0, false, 0, conn.Endpoint{}, nil
			p.packets = append(p.packets, pk)
		case len(pk.buf) == largeBufferSize && len(p.large) < maxFreeLarge:
			pk.n, pk.ok, pk.counter, pk.ep, pk.src = 0, false, 0, conn.Endpoint{}, nil
			p.large = append(p.large, pk)
		}
	}
	p.mu.Unlock()
}

// getBatch returns an empty batch.
func (p *pools) getBatch() *batch {
	p.mu.Lock()
	b := pop(&p.batches)
	p.mu.Unlock()
	if b == nil {
		b = &batch{pkts: make([]*packet, 0, conn.IdealBatchSize), bufs: make([][]byte, 0, conn.IdealBatchSize)}
	}
	return b
}

// putBatch returns a batch and its packets to the pool.
func (p *pools) putBatch(b *batch) {
	p.putPackets(b.pkts)
	clear(b.pkts)
	clear(b.bufs[:cap(b.bufs)])
	b.pkts, b.bufs = b.pkts[:0], b.bufs[:0]
	b.peer, b.kp = nil, nil
	p.mu.Lock()
	if len(p.batches) < 1024 {
		p.batches = append(p.batches, b)
	}
	p.mu.Unlock()
}

// pop removes and returns the last element of a free list (nil when it is
// empty), clearing its slot so the list keeps nothing alive.
func pop[T any](list *[]*T) *T {
	n := len(*list)
	if n == 0 {
		return nil
	}
	x := (*list)[n-1]
	(*list)[n-1] = nil
	*list = (*list)[:n-1]
	return x
}
