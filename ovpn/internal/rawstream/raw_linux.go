//go:build linux

package rawstream

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// raw is the Linux Stream of a *net.TCPConn.
type raw struct {
	rc syscall.RawConn // immutable

	// The reader's state; only the goroutine in Read uses it.
	rfn   func(fd uintptr) bool // readOnce, made once so that calls allocate nothing
	rbuf  []byte
	rn    int
	rerrn syscall.Errno

	// The writer's state; only the goroutine in Write or WriteBuffers
	// uses it.
	wfn   func(fd uintptr) bool // writeOnce
	iov   []unix.Iovec          // the vector still to write; grown, never shrunk
	wn    int64                 // bytes written by this call so far
	werrn syscall.Errno
	one   [1][]byte // Write's vector
}

func newRaw(c net.Conn) Stream {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return nil
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &raw{rc: rc}
	r.rfn, r.wfn = r.readOnce, r.writeOnce
	return r
}

// readOnce makes one read(2); false asks the poller to wait (EAGAIN).
func (r *raw) readOnce(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&r.rbuf[0])), uintptr(len(r.rbuf)))
		switch e {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		}
		r.rn, r.rerrn = int(n), e
		return true
	}
}

// Read reads what the socket has, up to len(p) bytes, waiting for at
// least one; 0 bytes are io.EOF.
func (r *raw) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.rbuf, r.rn, r.rerrn = p, 0, 0
	err := r.rc.Read(r.rfn)
	r.rbuf = nil // keep no caller buffer alive
	switch {
	case err != nil:
		return 0, err // closed, or a deadline: net's own errors
	case r.rerrn != 0:
		return 0, os.NewSyscallError("read", r.rerrn)
	case r.rn == 0:
		return 0, io.EOF
	}
	return r.rn, nil
}

// writeOnce writes r.iov with writev(2) until it is empty, an error or
// EAGAIN (false: the poller waits until the socket takes more and calls
// again).
func (r *raw) writeOnce(fd uintptr) bool {
	for len(r.iov) > 0 {
		n, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&r.iov[0])), uintptr(len(r.iov)))
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			r.werrn = e
			return true
		}
		r.wn += int64(n)
		// Drop what was written: whole elements, then the front of the
		// one the write ended in.
		for n > 0 && len(r.iov) > 0 {
			l := uintptr(r.iov[0].Len)
			if n < l {
				r.iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(r.iov[0].Base), n))
				r.iov[0].SetLen(int(l - n))
				break
			}
			n -= l
			r.iov = r.iov[1:]
		}
	}
	return true
}

// Write writes all of p.
func (r *raw) Write(p []byte) (int, error) {
	r.one[0] = p
	n, err := r.WriteBuffers(r.one[:])
	r.one[0] = nil
	return int(n), err
}

// maxIOV is the most elements one writev(2) takes (UIO_MAXIOV).
const maxIOV = 1024

// WriteBuffers writes all of bufs, at most maxIOV elements per vector.
func (r *raw) WriteBuffers(bufs [][]byte) (int64, error) {
	var total int64
	for len(bufs) > 0 {
		chunk := bufs[:min(len(bufs), maxIOV)]
		bufs = bufs[len(chunk):]
		iov := r.iov[:0]
		for _, b := range chunk {
			if len(b) == 0 {
				continue
			}
			v := unix.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
		if len(iov) == 0 {
			continue
		}
		full := iov[:cap(iov)] // r.iov keeps its capacity for the next call
		r.iov, r.wn, r.werrn = iov, 0, 0
		err := r.rc.Write(r.wfn)
		clear(full[:len(iov)]) // keep no caller buffer alive
		r.iov = full[:0]
		total += r.wn
		if err != nil {
			return total, err
		}
		if r.werrn != 0 {
			return total, os.NewSyscallError("writev", r.werrn)
		}
	}
	return total, nil
}
