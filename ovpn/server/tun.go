package server

// Attaching a TUN device to the server.
//
//	device Read (batch) -> WritePackets -> client by destination address
//	UDP reader: decrypted packets -> its tunSink (copied behind virtio
//	    header room) -> device Write of the batch at the end of each
//	    receive batch (the device coalesces with GRO)
//	TCP readers: rx queue -> ReadPackets (what is queued) -> device Write
//	    of the batch

import (
	"errors"
	"fmt"
	"os"

	"github.com/wirelane/wirelane/tun"
)

// tunOffset leaves room before each packet for the virtio-net header that
// Linux TUN devices with offloads put there.
const tunOffset = 16

// maxTUNBatch bounds the buffers of one device read or write (each 64
// KiB). It matches the Linux device batch: a TSO super-packet splits into
// up to about 45 segments at MTU 1500, and a smaller batch would drop it
// (tun.ErrTooManySegments).
const maxTUNBatch = 128

// AttachTUN moves packets between dev and the server until the server is
// closed or the device fails, and returns why (nil after Close). It does
// not close dev; closing dev afterwards ends its reader goroutine. Packets
// for addresses no client has are dropped (counted in Stats.NoRoute).
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
	n := min(max(dev.BatchSize(), 1), maxTUNBatch)
	bufs := make([][]byte, n)
	sizes := make([]int, n)
	for i := range bufs {
		bufs[i] = make([]byte, tunOffset+maxPkt)
	}
	pkts := make([][]byte, n)
	for {
		got, err := dev.Read(bufs, sizes, tunOffset)
		for i := 0; i < got; i++ {
			pkts[i] = bufs[i][tunOffset : tunOffset+sizes[i]]
		}
		if got > 0 {
			_ = s.WritePackets(pkts[:got])
		}
		if err != nil {
			if errors.Is(err, tun.ErrTooManySegments) {
				continue
			}
			if s.isClosed() {
				return ErrClosed
			}
			return fmt.Errorf("server: TUN read: %w", err)
		}
	}
}

func (s *Server) toTUN(dev tun.Device) error {
	n := min(max(dev.BatchSize(), 1), maxTUNBatch)
	bufs := make([][]byte, n)
	out := make([][]byte, n)
	sizes := make([]int, n)
	for i := range bufs {
		bufs[i] = make([]byte, tunOffset+maxPkt)
	}
	for {
		got, err := s.ReadPackets(bufs, sizes, tunOffset)
		if err != nil {
			return err
		}
		for i := 0; i < got; i++ {
			out[i] = bufs[i][:tunOffset+sizes[i]]
		}
		if _, err := dev.Write(out[:got], tunOffset); err != nil {
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

// tunSink is the UDP reader's batch of decrypted packets for the attached
// device. Only the reader goroutine uses it.
type tunSink struct {
	att  *attached
	bufs [][]byte // each tunOffset+maxPkt bytes, so the device can coalesce into it
	out  [][]byte // bufs[:n] cut to their packets
	n    int
}

// sinkFor returns the reader's sink for the device attached now: cur
// when it is still the one, nil when no device is attached.
func (s *Server) sinkFor(cur *tunSink) *tunSink {
	att := s.tun.Load()
	if att == nil {
		return nil
	}
	if cur != nil && cur.att == att {
		return cur
	}
	n := min(max(att.dev.BatchSize(), 1), maxTUNBatch)
	k := &tunSink{att: att, bufs: make([][]byte, n), out: make([][]byte, n)}
	for i := range k.bufs {
		k.bufs[i] = make([]byte, tunOffset+maxPkt)
	}
	return k
}

// add copies one packet into the batch, writing the batch out first when
// it is full.
func (k *tunSink) add(s *Server, pkt []byte) {
	if k.n == len(k.bufs) {
		k.flush(s)
	}
	b := k.bufs[k.n]
	k.out[k.n] = b[:tunOffset+copy(b[tunOffset:], pkt)]
	k.n++
}

// flush writes the batch to the device in one call.
func (k *tunSink) flush(s *Server) {
	if k.n == 0 {
		return
	}
	_, err := k.att.dev.Write(k.out[:k.n], tunOffset)
	clear(k.out[:k.n])
	k.n = 0
	if err != nil {
		// A packet the kernel refused, or the device is gone (AttachTUN
		// then returns and detaches it).
		s.stats.TUNErrors.Add(1)
	}
}
