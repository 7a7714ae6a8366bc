package server

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/tun/memtun"
)

// failingTUN is an in-memory device whose Reads run scripted steps.
type failingTUN struct {
	*memtun.Device
	steps chan func(bufs [][]byte, sizes []int, offset int) (int, error)
}

func (d *failingTUN) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	return (<-d.steps)(bufs, sizes, offset)
}

// AttachTUN follows the one TUN pump's rule: a read that dropped a packet
// is counted and reading goes on (the server's own loop used to end
// there); only a closed or broken device ends it, with the error.
func TestAttachTUNReadsOnAfterADroppedPacket(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	d := &failingTUN{Device: memtun.New("tun-fail", 1500), steps: make(chan func([][]byte, []int, int) (int, error), 4)}
	defer d.Close()
	pkt := testnet.ICMPEcho(0, s.TunnelAddress().Addr(), netip.MustParseAddr("10.8.0.99"), 1, 1, []byte("nobody"))
	read := make(chan struct{}, 4)
	d.steps <- func([][]byte, []int, int) (int, error) {
		read <- struct{}{}
		return 0, fmt.Errorf("tun: packet of 70000 bytes fits no buffer")
	}
	d.steps <- func(bufs [][]byte, sizes []int, offset int) (int, error) {
		read <- struct{}{}
		sizes[0] = copy(bufs[0][offset:], pkt)
		return 1, nil
	}
	d.steps <- func([][]byte, []int, int) (int, error) {
		read <- struct{}{}
		return 0, os.NewSyscallError("read", syscall.EBADFD)
	}
	done := make(chan error, 1)
	go func() { done <- s.AttachTUN(d) }()
	for i := 0; i < 3; i++ {
		select {
		case <-read:
		case <-time.After(3 * time.Second):
			t.Fatalf("read %d never came: the loop ended early", i+1)
		}
	}
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EBADFD) {
			t.Fatalf("AttachTUN returned %v, want the device's error", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("AttachTUN did not end on a broken device")
	}
	if got := s.Stats().TUNErrors.Load(); got != 1 {
		t.Fatalf("TUNErrors %d, want 1 (the dropped read)", got)
	}
	if got := s.Stats().NoRoute.Load(); got != 1 {
		t.Fatalf("NoRoute %d, want 1 (the packet read after the drop)", got)
	}
}
