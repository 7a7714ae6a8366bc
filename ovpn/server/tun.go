package server

// Attaching a TUN device to the server.
//
//	device Read (batch) -> WritePackets -> client by destination address
//	ReadPackets (what is queued) -> device Write of the batch (virtio
//	    header room before each packet; the device coalesces with GRO)

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
