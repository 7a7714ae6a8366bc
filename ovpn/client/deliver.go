package client

// Delivery of received packets straight to a writer (a TUN device):
//
//	receive goroutine: handlePacket -> payload -> rxBatch.add: the one TUN
//	    batch writer (tun.BatchWriter: copy behind the writer's offset)
//	    -> ... -> rxBatch.flush at the end of the receive batch: one
//	    PacketWriter.Write for all of them, run heads in 64 KiB head room
//	    so a TUN device can coalesce them (GRO)
//
// Without a writer, payloads go to the rx queue for ReadPacket(s). The
// writer replaces a queue and a goroutine hand-off per packet with one
// copy; a slow writer holds the receive goroutine back and the socket
// buffer absorbs the burst instead of a queue dropping it.

import (
	"github.com/wirelane/wirelane/internal/sys/mono"
	"github.com/wirelane/wirelane/tun"
)

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
// ReadPacket(s). The packets predicted to start a run of one flow sit in
// buffers with 65535 bytes after offset, so a TUN device may coalesce
// later packets into them (tun.BatchWriter). Packets queued before
// the call stay for ReadPacket(s). Write is called from the receive
// goroutines (one per socket), possibly concurrently; a failed Write
// loses its batch, as a full device queue would, and is not fatal.
func (s *Session) DeliverTo(w PacketWriter, offset int) {
	s.sink.Store(&sink{w: w, offset: max(offset, 0)})
}

// rxBatch is one receive goroutine's state. Only that goroutine uses it.
type rxBatch struct {
	s    *Session
	k    *sink            // the writer of the current batch, nil when there is none
	w    *tun.BatchWriter // the batch for k; nil when k is
	recv bool             // a data packet authenticated since the last flush
}

func (s *Session) newRxBatch() *rxBatch { return &rxBatch{s: s} }

// handle processes one packet from the server.
func (rb *rxBatch) handle(pkt []byte) { rb.s.handlePacket(pkt, rb) }

// add copies a received IP packet into the batch and reports true, or
// reports false when no writer is attached.
func (rb *rxBatch) add(p []byte) bool {
	if rb.w == nil || rb.w.Len() == 0 {
		rb.refresh()
	}
	if rb.k == nil {
		return false
	}
	_ = rb.w.Add(p) // a full batch written first; its failure is not fatal
	return true
}

// flush notes the receive time (one clock read per receive batch instead
// of one per packet) and writes the batch.
func (rb *rxBatch) flush() {
	if rb.recv {
		rb.recv = false
		rb.s.lastRecv.Store(mono.Now())
	}
	if rb.w == nil {
		return
	}
	_ = rb.w.Flush() // a failed Write loses its batch, not fatal
}

// refresh picks up the writer DeliverTo set; the batch is empty.
func (rb *rxBatch) refresh() {
	if k := rb.s.sink.Load(); k != rb.k {
		rb.k, rb.w = k, nil
		if k != nil {
			rb.w = tun.NewBatchWriter(k.w, k.offset, deliverBatch)
		}
	}
}
