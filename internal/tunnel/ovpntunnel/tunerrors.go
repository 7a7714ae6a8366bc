package ovpntunnel

// A client tunnel's TUN errors (TunnelStatus.TUNErrors, the service's
// wirelane_tun_errors_total): the device Connect creates is wrapped once,
// so every write to it (the sessions' receive batches, block-ipv6's
// replies) and every read that dropped a packet is counted, across
// reconnects, as the server counts its own (ovpn/server Stats.TUNErrors).
// Nothing is added to a call that succeeds.

import (
	"errors"
	"os"
	"sync/atomic"

	"github.com/wirelane/wirelane/tun"
)

// countedTUN is a TUN device whose failed calls are counted.
type countedTUN struct {
	tun.Device
	errs   atomic.Uint64
	closed atomic.Bool // set by Close: the writes that fail after it are not errors of the tunnel
}

// Write writes a batch; a failure (a packet the kernel refused, the
// device down) loses the batch and is counted once.
func (d *countedTUN) Write(bufs [][]byte, offset int) (int, error) {
	n, err := d.Device.Write(bufs, offset)
	if err != nil && !d.closed.Load() && !errors.Is(err, os.ErrClosed) {
		d.errs.Add(1)
	}
	return n, err
}

// Close closes the device.
func (d *countedTUN) Close() error {
	d.closed.Store(true)
	return d.Device.Close()
}

// readDropped counts a read that dropped a packet (tun.ReaderConfig.Dropped).
func (d *countedTUN) readDropped(error) { d.errs.Add(1) }

// count returns the failed calls so far.
func (d *countedTUN) count() uint64 { return d.errs.Load() }
