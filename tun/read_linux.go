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

// rawReader reads a TUN device that carries virtio-net headers itself:
// one read(2) into its own buffer, then split (split.go).
//
// Why not the wireguard tun package's Read: its read goes through the Go
// scheduler's system call path, and so do the engine's other hot calls
// unless made raw. A P that sits in a known system call for a sysmon tick
// (20 µs) with nothing else to run is handed to a fresh thread that spins
// and sleeps, and every such call wakes sysmon from its long sleep. Made
// raw, the TUN read, the TUN write (trusted_gro_linux.go) and sendmmsg and
// recvmmsg (internal/mmsg) leave sysmon asleep: through namespaces, task
// switches per GB halved and one TCP stream gained 8%. The descriptor is
// non-blocking, so a raw read never waits: an empty queue gives EAGAIN
// and the goroutine parks in the poller as before.
//
// What the tun package's Read also does and this one does not: return the
// errors of its netlink listener goroutine. Events still arrive.
type rawReader struct {
	rc     syscall.RawConn       // the TUN device's descriptor; immutable
	readFn func(fd uintptr) bool // r.readOne, made once so that reads allocate nothing
	batch  int                   // the device's batch size; immutable

	mu    sync.Mutex // serializes Reads; guards the fields below
	buf   []byte     // virtio-net header and packet: one whole train
	n     int        // readOne's result: bytes read
	errno syscall.Errno
}

// newRawReader returns a reader for d, or nil when d's file does not
// carry virtio-net headers (then d's own Read is all there is).
func newRawReader(d wgtun.Device) *rawReader {
	f := d.File()
	if f == nil || !hasVnetHdr(f) {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawReader{rc: rc, batch: d.BatchSize(), buf: make([]byte, VirtioHeaderLen+maxIPPacket)}
	r.readFn = r.readOne
	return r
}

// readOne reads one packet from fd into r.buf; false asks the poller to
// wait until fd is readable (RawConn.Read). Called with r.mu held.
func (r *rawReader) readOne(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.n, r.errno = int(n), e
		return true
	}
}

// Read reads one packet or train and splits it into bufs: the tun
// package's Device.Read contract.
func (r *rawReader) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errno = 0
	err := r.rc.Read(r.readFn)
	if err == nil && r.errno != 0 {
		err = os.NewSyscallError("read", r.errno)
	}
	if errors.Is(err, syscall.EBADFD) || errors.Is(err, os.ErrClosed) {
		return 0, os.ErrClosed // the interface went away, or Close
	}
	if err != nil {
		return 0, err
	}
	return split(r.buf[:r.n], bufs, sizes, offset)
}

// BatchSize is the underlying device's.
func (r *rawReader) BatchSize() int { return r.batch }
