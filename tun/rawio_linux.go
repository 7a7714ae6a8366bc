//go:build linux

package tun

import (
	"os"
	"syscall"
	"unsafe"

	"github.com/wirelane/wirelane/internal/sys/uring"
	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// rawIO makes one read(2) or write(2) at a time on a TUN device's
// non-blocking descriptor without telling the Go scheduler
// (unix.RawSyscall), inside RawConn.Read or Write so that an empty queue
// still parks the goroutine in the poller.
//
// Why raw: a system call the scheduler knows about wakes sysmon, and one
// that runs longer than a sysmon tick (20 µs; a TUN write runs the
// receiving TCP stack in place for that long) has its P handed to a fresh
// thread that spins, finds nothing and sleeps again, on a CPU the kernel
// needs. internal/sys/mmsg makes the same choice for sendmmsg and recvmmsg;
// architecture.md ("Threads and system calls") has the measurements.
//
// A rawIO is used by one goroutine at a time; its owner serializes calls.
type rawIO struct {
	rc   syscall.RawConn                   // the descriptor; immutable
	nr   uintptr                           // unix.SYS_READ or unix.SYS_WRITE; immutable
	name string                            // "read" or "write", for errors; immutable
	fn   func(fd uintptr) bool             // r.once, made once so that calls allocate nothing
	done func(func(fd uintptr) bool) error // rc.Read or rc.Write; immutable

	buf   []byte // what the call reads into or writes
	n     int    // its result: bytes moved
	errno syscall.Errno

	// For writeBatch: the ring, what one call writes and its results.
	ring    *uring.Ring
	bufs    [][]byte
	res     []int32
	ringErr error
	batchFn func(fd uintptr) bool // r.batchOnce, made once
}

// newRawIO returns a rawIO making system call nr on d's descriptor, or
// nil when d's file does not carry virtio-net headers (offloads off: then
// the tun package's own Read and Write are all there is) or is blocking.
func newRawIO(d wgtun.Device, nr uintptr) *rawIO {
	f := d.File()
	if f == nil || !hasVnetHdr(f) {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil || !nonBlocking(rc) {
		return nil
	}
	r := &rawIO{rc: rc, nr: nr, name: "write", done: rc.Write}
	if nr == unix.SYS_READ {
		r.name, r.done = "read", rc.Read
	}
	r.fn = r.once
	r.batchFn = r.batchOnce
	return r
}

// once makes the call on fd; false asks the poller to wait until fd is
// ready (EAGAIN).
func (r *rawIO) once(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall(r.nr, fd, uintptr(unsafe.Pointer(&r.buf[0])), uintptr(len(r.buf)))
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

// batchOnce writes r.bufs through r.ring on fd; it never asks the poller
// to wait (writes that found fd not ready say so in r.res).
func (r *rawIO) batchOnce(fd uintptr) bool {
	r.ringErr = r.ring.Write(int(fd), r.bufs, r.res)
	return true
}

// writeBatch writes bufs with one io_uring_enter through ring, inside the
// descriptor's RawConn.Write so that a concurrent Close waits for it. res
// (len(res) >= len(bufs)) gets each write's bytes or negated errno. An
// error is the poller's (the file is closed: os.ErrClosed) or the ring's.
func (r *rawIO) writeBatch(ring *uring.Ring, bufs [][]byte, res []int32) error {
	r.ring, r.bufs, r.res, r.ringErr = ring, bufs, res, nil
	err := r.done(r.batchFn)
	r.ring, r.bufs, r.res = nil, nil, nil // keep no caller buffer alive
	if err != nil {
		return os.ErrClosed
	}
	return r.ringErr
}

// do reads into or writes buf (not empty) and returns the bytes moved.
// A device that went away (EBADFD: its interface was deleted) or was
// closed gives os.ErrClosed, as the tun package's Read and Write do.
func (r *rawIO) do(buf []byte) (int, error) {
	r.buf, r.errno = buf, 0
	err := r.done(r.fn)
	r.buf = nil // keep no caller buffer alive
	if err != nil {
		// The poller's own errors all mean the file is closed or
		// closing (it returns them unwrapped, as "use of closed file",
		// where os.File's Read and Write say os.ErrClosed).
		return 0, os.ErrClosed
	}
	if r.errno == syscall.EBADFD {
		return 0, os.ErrClosed
	}
	if r.errno != 0 {
		return 0, os.NewSyscallError(r.name, r.errno)
	}
	return r.n, nil
}

// nonBlocking reports whether the descriptor behind rc is non-blocking.
// A raw call must never wait: on a blocking descriptor (a TUN file handed
// over with WG_TUN_FD without O_NONBLOCK, which os.NewFile then leaves out
// of the poller) a raw read would hold its thread, and with one Go thread
// the whole process, until a packet came.
func nonBlocking(rc syscall.RawConn) bool {
	ok := false
	if err := rc.Control(func(fd uintptr) {
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		ok = err == nil && flags&unix.O_NONBLOCK != 0
	}); err != nil {
		return false
	}
	return ok
}
