package client

// Delivery of received packets straight to a writer (a TUN device):
//
//	receive goroutine: handlePacket -> payload -> rxBatch.add (copy behind
//	    the writer's headroom) -> ... -> rxBatch.flush at the end of the
//	    receive batch: one PacketWriter.Write for all of them
//
// Without a writer, payloads go to the rx queue for ReadPacket(s). The
// writer replaces a queue and a goroutine hand-off per packet with one
// copy; a slow writer holds the receive goroutine back and the socket
// buffer absorbs the burst instead of a queue dropping it.

// PacketWriter takes batches of IP packets, bufs[i][offset:] each, and may
// use the bytes before offset as scratch space. tun.Device has this Write.
type PacketWriter interface {
	Write(bufs [][]byte, offset int) (int, error)
}

// deliverBatch is how many packets one Write carries at most; a TUN
// device coalesces a batch (GRO) into as few writes as it can.
const deliverBatch = 128

// sink is the writer set by DeliverTo.
type sink struct {
	w      PacketWriter
	offset int
}

// DeliverTo makes the receive goroutines write the IP packets they
// decrypt to w, one Write per receive batch (at most 128 packets), with
// offset bytes free before each packet, instead of queueing them for
// ReadPacket(s). Each buffer has 65535 bytes after offset, so a device
// may coalesce later packets into an earlier one. Packets queued before
// the call stay for ReadPacket(s). Write is called from the receive
// goroutines (one per socket), possibly concurrently; a failed Write
// loses its batch, as a full device queue would, and is not fatal.
func (s *Session) DeliverTo(w PacketWriter, offset int) {
	s.sink.Store(&sink{w: w, offset: max(offset, 0)})
}

// rxBatch is one receive goroutine's state. Only that goroutine uses it.
type rxBatch struct {
	s    *Session
	k    *sink    // the writer of the current batch, nil when there is none
	bufs [][]byte // offset+maxPkt bytes each, allocated on first use
	out  [][]byte // bufs[:n] cut to their packets
	n    int
}

func (s *Session) newRxBatch() *rxBatch { return &rxBatch{s: s} }

// handle processes one packet from the server.
func (rb *rxBatch) handle(pkt []byte) { rb.s.handlePacket(pkt, rb) }

// add copies a received IP packet into the batch and reports true, or
// reports false when no writer is attached.
func (rb *rxBatch) add(p []byte) bool {
	if rb.n == 0 {
		rb.refresh()
	}
	if rb.k == nil {
		return false
	}
	if rb.n == len(rb.bufs) {
		if len(rb.bufs) < deliverBatch {
			rb.bufs = append(rb.bufs, make([]byte, rb.k.offset+maxPkt))
			rb.out = append(rb.out, nil)
		} else {
			rb.flush()
		}
	}
	b := rb.bufs[rb.n]
	rb.out[rb.n] = b[:rb.k.offset+copy(b[rb.k.offset:], p)]
	rb.n++
	return true
}

// flush writes the batch.
func (rb *rxBatch) flush() {
	if rb.n == 0 {
		return
	}
	_, _ = rb.k.w.Write(rb.out[:rb.n], rb.k.offset)
	clear(rb.out[:rb.n])
	rb.n = 0
}

// refresh picks up the writer DeliverTo set; the batch is empty.
func (rb *rxBatch) refresh() {
	if k := rb.s.sink.Load(); k != rb.k {
		if rb.k != nil && k != nil && k.offset != rb.k.offset {
			rb.bufs, rb.out = nil, nil // sized for the old offset
		}
		rb.k = k
	}
}
