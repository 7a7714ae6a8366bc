package ovpntunnel

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/tun"
)

// pumpDevice is a stand-in TUN device for pumpFromTUN: each Read runs the
// next step, which sees the pump's buffers.
type pumpDevice struct {
	tun.Device // unused methods
	mtu        int
	steps      []func(bufs [][]byte) (int, error)
}

func (d *pumpDevice) BatchSize() int                   { return 8 }
func (d *pumpDevice) MTU() (int, error)                { return d.mtu, nil }
func (d *pumpDevice) Write([][]byte, int) (int, error) { return 0, nil }
func (d *pumpDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	step := d.steps[0]
	d.steps = d.steps[1:]
	return step(bufs)
}

// The pump's buffers after the first are sized for the MTU (so that the
// device gathers for it); a packet that fit none is dropped, the buffers
// grow to the MTU the device has now, and only a device error ends it.
func TestPumpFromTUNBuffers(t *testing.T) {
	d := &pumpDevice{mtu: 1400}
	var sizes []int
	record := func(bufs [][]byte) {
		sizes = sizes[:0]
		for _, b := range bufs {
			sizes = append(sizes, len(b))
		}
	}
	d.steps = []func([][]byte) (int, error){
		func(bufs [][]byte) (int, error) {
			record(bufs)
			d.mtu = 9000 // raised while the pump runs
			return 0, fmt.Errorf("tun: segment of 9040 bytes does not fit a 1516-byte buffer")
		},
		func(bufs [][]byte) (int, error) {
			if len(bufs[1]) != tun.Offset+9000 {
				t.Errorf("after the error: buffer 1 has %d bytes, want %d", len(bufs[1]), tun.Offset+9000)
			}
			return 0, os.NewSyscallError("read", syscall.EBADFD)
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		pumpFromTUN(d, new(atomic.Pointer[client.Session]), new(atomic.Pointer[block6]))
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the pump did not end on a device error")
	}
	if len(sizes) != 8 || sizes[0] != tun.Offset+65535 || sizes[1] != tun.Offset+1500 || sizes[7] != tun.Offset+1500 {
		t.Fatalf("buffer sizes %v: want the first for 64 KiB, the rest for an MTU of 1500", sizes)
	}
}

// The pump ends on what tun.ReadFatal calls fatal, and reads on after
// errors about one packet.
func TestTUNReadFatal(t *testing.T) {
	for _, c := range []struct {
		err   error
		fatal bool
	}{
		{os.ErrClosed, true},
		{fmt.Errorf("read: %w", os.ErrClosed), true},
		{os.NewSyscallError("read", syscall.EIO), true},
		{&os.PathError{Op: "read", Path: "/dev/net/tun", Err: syscall.EBADFD}, true},
		{errors.New("tun: unsupported GSO type 3"), false},
		{fmt.Errorf("tun: packet of 70000 bytes does not fit"), false},
	} {
		if got := tun.ReadFatal(c.err); got != c.fatal {
			t.Errorf("tun.ReadFatal(%v) = %v, want %v", c.err, got, c.fatal)
		}
	}
}
