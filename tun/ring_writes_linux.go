//go:build linux

package tun

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"

	"github.com/wirelane/wirelane/internal/sys/uring"
)

// EnvIOURing names the environment variable that says how a TUN device
// writes a batch of packets it could not merge into one: "auto" (or unset)
// with one io_uring_enter for the batch where the kernel allows io_uring,
// "off" with one write(2) per packet. It is read when a device is opened.
const EnvIOURing = "WIRELANE_IO_URING"

// EnvError reports a bad EnvIOURing value, for commands to refuse to start
// with it (nil when the variable is unset or valid). A device opened with
// a bad value writes each packet with write(2).
func EnvError() error {
	switch v := os.Getenv(EnvIOURing); v {
	case "", "auto", "off":
		return nil
	default:
		return fmt.Errorf("%s=%q: want auto or off", EnvIOURing, v)
	}
}

// newWriteRing returns a ring for a device's batched writes, or nil where
// EnvIOURing turns it off or the kernel refuses one (then every packet
// gets its own write(2), as before rings existed).
func newWriteRing() *uring.Ring {
	if v := os.Getenv(EnvIOURing); v != "" && v != "auto" {
		return nil
	}
	r, err := uring.New()
	if err != nil {
		slog.Debug("tun: batched writes off", "err", err)
		return nil
	}
	return r
}

// WritesBatched reports whether a device of this process would write a
// batch of packets with one system call (io_uring allowed and not turned
// off), for the data path's start-up log.
func WritesBatched() bool {
	r := newWriteRing()
	if r == nil {
		return false
	}
	r.Close()
	return true
}

// writeRaw writes each of bufs (packets with their virtio-net headers)
// to the device raw and returns the bytes written. Two or more go through
// the ring with one system call, when there is one; a packet the ring
// found the device not ready for is written again the waiting way. A
// closed device gives os.ErrClosed, at once.
func (w *groWriter) writeRaw(bufs [][]byte) (int, error) {
	total := 0
	var errs error
	if w.ring != nil && len(bufs) > 1 {
		if cap(w.res) < len(bufs) {
			w.res = make([]int32, len(bufs), max(len(bufs), uring.Size))
		}
		res := w.res[:len(bufs)]
		err := w.io.writeBatch(w.ring, bufs, res)
		if err == os.ErrClosed {
			return 0, err
		}
		if err != nil {
			// The ring failed as a whole: no more rings for this
			// device, and what it did not write goes the plain way.
			slog.Warn("tun: batched writes failed, writing each packet", "err", err)
			w.ring.Close()
			w.ring = nil
		}
		k := 0
		for i, r := range res {
			switch e := syscall.Errno(-r); {
			case r >= 0:
				total += int(r)
				continue
			case e == syscall.EBADFD:
				return total, os.ErrClosed
			case e == syscall.EAGAIN || err != nil:
				bufs[k] = bufs[i] // retried below, in order
				k++
			default:
				errs = errors.Join(errs, os.NewSyscallError("write", e))
			}
		}
		bufs = bufs[:k]
	}
	for _, b := range bufs {
		n, err := w.io.do(b)
		switch {
		case err == os.ErrClosed:
			return total, err
		case err != nil:
			errs = errors.Join(errs, err)
		default:
			total += n
		}
	}
	return total, errs
}
