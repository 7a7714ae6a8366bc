//go:build linux

package tun

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// groWriter writes TCP packets to a TUN device with virtio-net headers
// itself (trusted_gro.go) and hands every other packet to the wireguard
// tun package's Write.
//
// Each packet is one write(2) made without telling the Go scheduler
// (unix.RawSyscall): the descriptor is non-blocking and a TUN write never
// waits, but it can run the receiving TCP stack in place for tens of
// microseconds, and a write the scheduler knows about that long is taken
// for a blocked one: its P is handed to another thread, which spins and
// sleeps again. See internal/mmsg for the same choice on the UDP side.
type groWriter struct {
	rc      syscall.RawConn       // the TUN device's descriptor; immutable
	writeFn func(fd uintptr) bool // w.writeOne, made once so that writes allocate nothing

	mu    sync.Mutex // serializes Writes; guards the fields below
	g     trustedGRO
	pkt   []byte        // the packet writeOne writes
	n     int           // writeOne's result: bytes written
	errno syscall.Errno // and its error
}

// newGROWriter returns a writer for d, or nil when d's file does not carry
// virtio-net headers (offloads off): then d's own Write is all there is.
func newGROWriter(d wgtun.Device) *groWriter {
	f := d.File()
	if f == nil || !hasVnetHdr(f) {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	w := &groWriter{rc: rc}
	w.writeFn = w.writeOne
	return w
}

// writeOne writes w.pkt to fd; false asks the poller to wait until fd is
// writable (RawConn.Write). Called with w.mu held.
func (w *groWriter) writeOne(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(&w.pkt[0])), uintptr(len(w.pkt)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		w.n, w.errno = int(n), e
		return true
	}
}

// hasVnetHdr reports whether the TUN file f was set up with IFF_VNET_HDR.
// It never calls f.Fd, which would make the descriptor blocking.
func hasVnetHdr(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var flags uint16
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		var ifr *unix.Ifreq
		if ifr, opErr = unix.NewIfreq(""); opErr != nil {
			return
		}
		if opErr = unix.IoctlIfreq(int(fd), unix.TUNGETIFF, ifr); opErr == nil {
			flags = ifr.Uint16()
		}
	}); err != nil || opErr != nil {
		return false
	}
	return flags&unix.IFF_VNET_HDR != 0
}

// write writes bufs (packets at offset, offset >= VirtioHeaderLen): TCP
// merged and marked by this package, the rest through fallback. It
// returns the bytes written, virtio-net headers included.
func (w *groWriter) write(fallback wgtun.Device, bufs [][]byte, offset int) (int, error) {
	if offset < VirtioHeaderLen {
		return 0, errors.New("tun: write offset smaller than the virtio-net header")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	g := &w.g
	g.plan(bufs, offset)
	var errs error
	total := 0
	for _, i := range g.ours {
		w.pkt = bufs[i][offset-VirtioHeaderLen:]
		err := w.rc.Write(w.writeFn)
		w.pkt = nil
		if err == nil && w.errno != 0 {
			err = os.NewSyscallError("write", w.errno)
		}
		if errors.Is(err, syscall.EBADFD) || errors.Is(err, os.ErrClosed) {
			return total, os.ErrClosed
		}
		if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		total += w.n
	}
	if len(g.rest) > 0 {
		n, err := fallback.Write(g.rest, offset)
		total += n
		if err != nil {
			errs = errors.Join(errs, err)
		}
		clear(g.rest) // drop the references to the caller's buffers
	}
	return total, errs
}
