// Package mmsg is Linux's batched datagram I/O at its lowest level: the
// kernel's struct mmsghdr and non-blocking sendmmsg and recvmmsg. conn's
// UDP bind and the OpenVPN server's receive loop both fill these headers
// in place, so a batch costs one system call and no allocation.
package mmsg

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Hdr is struct mmsghdr: one message of a sendmmsg/recvmmsg batch.
type Hdr struct {
	Hdr unix.Msghdr
	Len uint32 // bytes sent or received, set by the kernel
	_   [unsafe.Sizeof(uintptr(0)) - 4]byte
}

// Both calls are made without telling the Go scheduler (RawSyscall6). They
// never block (MSG_DONTWAIT, and the descriptors are non-blocking), but a
// send on a local path runs the receiver's UDP stack in place, often for
// longer than the scheduler's 20 µs syscall check: a call the scheduler
// knows about would then have its P handed to another thread, which spins,
// finds nothing and sleeps again, on a CPU the kernel needs.

// Send sends hdrs on fd without blocking and returns how many messages the
// kernel took.
func Send(fd int, hdrs []Hdr) (int, unix.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	return int(n), e
}

// Recv receives into hdrs from fd without blocking and returns how many
// messages arrived.
func Recv(fd int, hdrs []Hdr) (int, unix.Errno) {
	n, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	return int(n), e
}
