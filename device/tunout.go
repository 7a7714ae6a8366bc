package device

import "github.com/wirelane/wirelane/tun"

// A socket's receive goroutine writes what one read delivered directly
// with one TUN Write:
//
//	read (many peers' short runs)
//	  -> each peer's batch opened and checked in place (deliverDirect,
//	     under that peer's recvMu), its packets added here, heads for
//	     merging taken from this goroutine's own HeadRoom
//	  -> after the read's last batch (or before a batch of a peer with
//	     packets here goes to that peer's queue): one TUN Write of them
//	     all, which the TUN device sends down with one system call where
//	     it can (tun's ring writes)
//	  -> the batches back to the pool
//
// With 1,000 peers a read is a hundred batches of one or two packets; a
// Write per batch was a system call per batch.

// tunOut is one receive goroutine's deliveries waiting for the read's
// TUN write. It is used by that goroutine alone.
type tunOut struct {
	bufs    [][]byte     // packets at tun.Offset, in delivery order
	batches []*batch     // whose packets bufs holds, put back by flush
	heads   tun.HeadRoom // first packets of runs, for the TUN device's merging
}

// add takes b, whose checked packets are bufs, for the next flush.
func (o *tunOut) add(d *Device, b *batch, bufs [][]byte) {
	if d.tunMerges {
		o.heads.Add(bufs, tun.Offset)
	}
	o.bufs = append(o.bufs, bufs...)
	o.batches = append(o.batches, b)
}

// holds reports whether packets of p wait here.
func (o *tunOut) holds(p *peer) bool {
	for _, b := range o.batches {
		if b.peer == p {
			return true
		}
	}
	return false
}

// flush writes what waits with one TUN Write and returns the batches to
// the pool.
func (o *tunOut) flush(d *Device) {
	if len(o.batches) == 0 {
		return
	}
	if len(o.bufs) > 0 {
		if _, err := d.tun.Write(o.bufs, tun.Offset); err != nil {
			d.ctr.tunWriteErrors.Add(1)
			d.log.Debug("TUN write failed", "err", err)
		}
	}
	clear(o.bufs)
	o.bufs = o.bufs[:0]
	o.heads.Reset()
	for i, b := range o.batches {
		d.pool.putBatch(b)
		o.batches[i] = nil
	}
	o.batches = o.batches[:0]
}
