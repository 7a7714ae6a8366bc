package server

// Attaching a TUN device to the server, through the one TUN pump
// (tun.Reader, tun.BatchWriter):
//
//	tun.Reader (batch; the ReadFatal policy) -> WritePackets -> client by
//	    destination address
//	UDP reader: decrypted packets -> its tun.BatchWriter (copied behind
//	    tun.Offset) -> one device Write at the end of each receive batch,
//	    run heads in 64 KiB head room so the device coalesces (GRO)
//	TCP readers (one per connection): the same, each with its own
//	    tun.BatchWriter, one device write per run of frames already read
//	ReadPackets (what is queued: packets that arrived before a device was
//	    attached) -> the TUN writer goroutine's Write of the batch in place

import (
	"errors"
	"fmt"
	"os"

	"github.com/wirelane/wirelane/tun"
)

// AttachTUN moves packets between dev and the server until the server is
// closed or the device fails, and returns why (nil after Close). It does
// not close dev; closing dev afterwards ends its reader goroutine. Packets
// for addresses no client has are dropped (counted in Stats.NoRoute); a
// read that dropped a packet (tun.ReadFatal says it is not fatal) is
// counted in Stats.TUNErrors and reading goes on.
func (s *Server) AttachTUN(dev tun.Device) error {
	att := &attached{dev: dev}
	s.tun.Store(att)
	defer s.tun.CompareAndSwap(att, nil)
	errc := make(chan error, 2)
	go func() { errc <- s.fromTUN(dev) }()
	go func() { errc <- s.toTUN(dev) }()
	err := <-errc
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

func (s *Server) fromTUN(dev tun.Device) error {
	rd := tun.NewReader(dev, tun.ReaderConfig{Dropped: func(error) { s.stats.TUNErrors.Add(1) }})
	pkts := make([][]byte, len(rd.Buffers()))
	for {
		got, err := rd.Read()
		if err != nil {
			if s.isClosed() {
				return ErrClosed
			}
			return fmt.Errorf("server: TUN read: %w", err)
		}
		for i := 0; i < got; i++ {
			pkts[i] = rd.Packet(i)
		}
		if got > 0 {
			_ = s.WritePackets(pkts[:got])
		}
	}
}

func (s *Server) toTUN(dev tun.Device) error {
	n := min(max(dev.BatchSize(), 1), tun.MaxBatch)
	w := tun.NewBatchWriter(dev, tun.Offset, n)
	bufs := make([][]byte, n)
	out := make([][]byte, n)
	sizes := make([]int, n)
	for i := range bufs {
		bufs[i] = make([]byte, tun.Offset+maxPkt)
	}
	for {
		got, err := s.ReadPackets(bufs, sizes, tun.Offset)
		if err != nil {
			return err
		}
		for i := 0; i < got; i++ {
			out[i] = bufs[i][:tun.Offset+sizes[i]]
		}
		if err := w.Write(out[:got]); err != nil {
			if s.isClosed() {
				return ErrClosed
			}
			if errors.Is(err, os.ErrClosed) {
				return fmt.Errorf("server: TUN write: %w", err)
			}
			// A packet the kernel refused; keep going.
			s.stats.TUNErrors.Add(1)
		}
	}
}

// attached is the device of a running AttachTUN.
type attached struct{ dev tun.Device }

// sinkFor returns a receive goroutine's batch writer (the UDP reader's, a
// TCP connection's) for the device attached now: cur when it still writes
// to that device, nil when no device is attached. Only that goroutine uses
// it. A writer keeps its buffers (and, after bulk traffic, up to
// 16 x 64 KiB of GRO head room) for as long as its goroutine runs.
func (s *Server) sinkFor(cur *tun.BatchWriter) *tun.BatchWriter {
	att := s.tun.Load()
	if att == nil {
		return nil
	}
	if cur != nil && cur.Writer() == att.dev {
		return cur
	}
	return tun.NewBatchWriter(att.dev, tun.Offset, min(max(att.dev.BatchSize(), 1), tun.MaxBatch))
}

// flushTUN writes the reader's batch to the device in one call.
func (s *Server) flushTUN(k *tun.BatchWriter) {
	if err := k.Flush(); err != nil {
		// A packet the kernel refused, or the device is gone (AttachTUN
		// then returns and detaches it).
		s.stats.TUNErrors.Add(1)
	}
}
