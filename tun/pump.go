package tun

// The one TUN pump, used by the WireGuard device and both OpenVPN sides:
//
//	Reader:      Device.Read into [64 KiB first buffer, MTU-sized rest]
//	             -> packets at bufs[i][Offset:]
//	             -> ErrTooManySegments: the packets that fit, read on
//	             -> one packet the device could not deliver: dropped,
//	                the buffers follow the MTU, read on (a short pause
//	                after 64 drops in a row)
//	             -> ReadFatal: the device is gone, the error ends the loop
//	BatchWriter: packets copied behind Offset (or the caller's own, in
//	             place) -> HeadRoom.Prepare moves predicted run heads into
//	             64 KiB buffers -> one Device.Write per batch (GRO)
//
// Why the first read buffer is large and the others are not: a Linux
// device with offloads delivers a packet that is not a TSO train in
// bufs[0], and after a raised MTU that packet can be larger than any
// MTU-sized buffer; the segments of a train and gathered single packets
// land in the others, which stay small (about 250 KiB a batch instead of
// 8 MiB, and the device gathers only into buffers of at most 16 KiB).

import (
	"errors"
	"os"
	"time"
)

// maxDropsBeforePause is how many dropped reads in a row the Reader takes
// before pausing between reads, so that a device that keeps failing does
// not spin.
const maxDropsBeforePause = 64

// ReaderConfig tunes a Reader. The zero value reads dev.BatchSize()
// packets (at most MaxBatch) into the reader's own buffers with the
// ReadFatal policy.
type ReaderConfig struct {
	// Batch is the number of buffers per read; 0 means the device's
	// BatchSize (at most MaxBatch).
	Batch int
	// Fatal decides which read errors end the loop; nil means ReadFatal.
	Fatal func(error) bool
	// Dropped, when set, is called after a read that dropped a packet,
	// with its error, before the buffers follow the MTU.
	Dropped func(error)
	// CallerBuffers means the caller puts its own buffers in Buffers()[1:]
	// before every Read (the WireGuard device reads into its packet pool);
	// the reader then allocates only its first buffer.
	CallerBuffers bool
}

// Reader reads batches of packets from a Device with the one read policy.
// It is used by one goroutine.
type Reader struct {
	dev     Device
	cfg     ReaderConfig
	first   []byte   // Offset+MaxPacket bytes: any packet fits
	bufs    [][]byte // bufs[0] is first; the rest are own or the caller's
	sizes   []int
	size    int   // length of the own buffers after the first; 0 with CallerBuffers
	drops   int   // dropped reads in a row
	pending error // a fatal error that came with packets, returned next
}

// NewReader returns a Reader of dev.
func NewReader(dev Device, cfg ReaderConfig) *Reader {
	n := cfg.Batch
	if n <= 0 {
		n = min(max(dev.BatchSize(), 1), MaxBatch)
	}
	if cfg.Fatal == nil {
		cfg.Fatal = ReadFatal
	}
	r := &Reader{dev: dev, cfg: cfg, first: make([]byte, Offset+MaxPacket), bufs: make([][]byte, n), sizes: make([]int, n)}
	r.bufs[0] = r.first
	if !cfg.CallerBuffers {
		r.follow()
	}
	return r
}

// Buffers returns the read buffers: each packet lands at bufs[i][Offset:].
// With CallerBuffers the caller sets bufs[1:] before every Read; bufs[0]
// is always the reader's own large buffer.
func (r *Reader) Buffers() [][]byte { return r.bufs }

// Packet returns packet i of the last Read, valid until the next Read.
func (r *Reader) Packet(i int) []byte { return r.bufs[i][Offset : Offset+r.sizes[i]] }

// Read reads one batch and returns how many packets it holds (Packet(i)).
// It returns an error only when the device is gone or broken (Fatal): then
// the loop ends. A read that dropped a packet returns what was delivered
// (often nothing) and a nil error: read on.
func (r *Reader) Read() (int, error) {
	if err := r.pending; err != nil {
		r.pending = nil
		return 0, err
	}
	r.bufs[0] = r.first
	n, err := r.dev.Read(r.bufs, r.sizes, Offset)
	switch {
	case err == nil, errors.Is(err, ErrTooManySegments):
		r.drops = 0
		return n, nil
	case r.cfg.Fatal(err):
		if n > 0 {
			r.pending = err
			return n, nil
		}
		return 0, err
	}
	r.drops++
	if r.cfg.Dropped != nil {
		r.cfg.Dropped(err)
	}
	if !r.cfg.CallerBuffers {
		r.follow()
	}
	if r.drops > maxDropsBeforePause {
		time.Sleep(time.Millisecond)
	}
	return n, nil
}

// follow sizes the own buffers after the first for the device's MTU (at
// least 1500), growing them when it was raised.
func (r *Reader) follow() {
	m, err := r.dev.MTU()
	if err != nil || m < 1500 {
		m = 1500
	}
	size := Offset + min(m, MaxPacket)
	if size <= r.size {
		return
	}
	r.size = size
	for i := 1; i < len(r.bufs); i++ {
		r.bufs[i] = make([]byte, size)
	}
}

// Writer is the write half of a Device.
type Writer interface {
	Write(bufs [][]byte, offset int) (int, error)
}

// BatchWriter writes batches of packets to a device in one Write each,
// with the head room the device needs to coalesce them (GRO). It is used
// by one goroutine.
type BatchWriter struct {
	w      Writer
	offset int
	merges bool     // the device merges written packets (a kernel device)
	heads  HeadRoom // run heads' 64 KiB buffers
	bufs   [][]byte // own copies, grown to the largest packet seen
	out    [][]byte // the batch: bufs[:n] cut to their packets
	n      int
}

// copyBufSize is the smallest own buffer after the offset: an MTU-sized
// packet of the usual tunnels fits.
const copyBufSize = 2048

// NewBatchWriter returns a writer of batches of up to batch packets
// (at most MaxBatch; 0 means MaxBatch) to w, each at offset. Head room is
// prepared when w is a kernel device (File is not nil), the only kind
// that merges.
func NewBatchWriter(w Writer, offset, batch int) *BatchWriter {
	if batch <= 0 || batch > MaxBatch {
		batch = MaxBatch
	}
	bw := &BatchWriter{w: w, offset: max(offset, 0), bufs: make([][]byte, batch), out: make([][]byte, batch)}
	if f, ok := w.(interface{ File() *os.File }); ok && f.File() != nil {
		bw.merges = true
	}
	return bw
}

// Writer returns the writer the batches go to.
func (bw *BatchWriter) Writer() Writer { return bw.w }

// Len returns the number of packets waiting for Flush.
func (bw *BatchWriter) Len() int { return bw.n }

// Add copies pkt into the batch, writing the batch first when it is full
// (and returning that write's error).
func (bw *BatchWriter) Add(pkt []byte) error {
	var err error
	if bw.n == len(bw.bufs) {
		err = bw.Flush()
	}
	need := bw.offset + len(pkt)
	if cap(bw.bufs[bw.n]) < need {
		bw.bufs[bw.n] = make([]byte, max(need, bw.offset+copyBufSize))
	}
	b := bw.bufs[bw.n][:need]
	copy(b[bw.offset:], pkt)
	bw.out[bw.n] = b
	bw.n++
	return err
}

// Flush writes the batch in one Write.
func (bw *BatchWriter) Flush() error {
	if bw.n == 0 {
		return nil
	}
	err := bw.Write(bw.out[:bw.n])
	clear(bw.out[:bw.n])
	bw.n = 0
	return err
}

// Write writes bufs (packets at bufs[i][offset:], in the caller's
// buffers) in one Write, after moving the predicted first packets of runs
// into head room. It may replace elements of bufs.
func (bw *BatchWriter) Write(bufs [][]byte) error {
	if len(bufs) == 0 {
		return nil
	}
	if bw.merges {
		bw.heads.Prepare(bufs, bw.offset)
	}
	_, err := bw.w.Write(bufs, bw.offset)
	return err
}
