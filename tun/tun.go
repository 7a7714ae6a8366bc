// Package tun provides the TUN devices Wirelane reads packets from and writes
// packets to: Linux TUN devices (with TSO/GRO offloads, through
// golang.zx2c4.com/wireguard/tun) and in-memory devices for tests and
// benchmarks.
package tun

import (
	"errors"
	"io"
	"os"
	"syscall"

	wgtun "golang.zx2c4.com/wireguard/tun"
)

// Event is a change of state reported by a Device.
type Event = wgtun.Event

// Events a Device reports.
const (
	EventUp        = wgtun.EventUp
	EventDown      = wgtun.EventDown
	EventMTUUpdate = wgtun.EventMTUUpdate
)

// Device is a TUN device that moves batches of IP packets. It has the same
// shape as golang.zx2c4.com/wireguard/tun.Device, so Linux devices created by
// that package satisfy it directly.
type Device interface {
	// File returns the device's file, or nil for an in-memory device.
	File() *os.File
	// Read reads one or more packets, each placed at bufs[i][offset:], and
	// sets sizes[i]. It returns the number of packets read.
	Read(bufs [][]byte, sizes []int, offset int) (n int, err error)
	// Write writes the packets bufs[i][offset:]. The device may use the
	// bytes before offset as scratch space (virtio header). A Linux device
	// with offloads does not verify TCP checksums (trusted_gro.go): write
	// only packets a tunnel has authenticated.
	Write(bufs [][]byte, offset int) (int, error)
	// MTU returns the device's MTU.
	MTU() (int, error)
	// Name returns the device's name.
	Name() (string, error)
	// Events returns the channel of device events; it is closed by Close.
	Events() <-chan Event
	// Close closes the device.
	Close() error
	// BatchSize is the largest number of packets one Read or Write moves.
	BatchSize() int
}

// ErrTooManySegments is returned by Read when one offloaded packet splits
// into more segments than the buffers passed in can hold. The packets that
// fit were delivered; the error is not fatal and reading should go on.
// Linux devices return it in place of wireguard-go's own.
var ErrTooManySegments = errors.New("tun: too many segments for the buffers")

// ReadFatal reports whether an error from Device.Read means the device is
// gone or broken (closed, at its end, or a failing system call) rather
// than one packet it could not deliver, which the caller drops before
// reading on.
func ReadFatal(err error) bool {
	var pe *os.PathError
	var errno syscall.Errno
	return errors.Is(err, os.ErrClosed) || errors.Is(err, io.EOF) ||
		errors.As(err, &pe) || errors.As(err, &errno)
}

// Offset is the room Wirelane keeps before every packet it reads from or
// writes to a device: the virtio-net header of a Linux device with
// offloads (VirtioHeaderLen) fits in it, and the WireGuard device seals
// its 16-byte transport header there in place.
const Offset = 16

// MaxPacket is the largest IP packet a device moves (and the size after
// Offset of a Reader's first buffer).
const MaxPacket = 65535

// MaxBatch bounds the packets of one Reader read or BatchWriter write. It
// matches the Linux device batch: a TSO super-packet splits into up to
// about 45 segments at MTU 1500, and a smaller batch would drop it
// (ErrTooManySegments).
const MaxBatch = 128
