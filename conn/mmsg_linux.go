package conn

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mmsghdr is struct mmsghdr: one message of a sendmmsg/recvmmsg batch.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [unsafe.Sizeof(uintptr(0)) - 4]byte
}

// sendmmsg sends hdrs on fd without blocking and returns how many messages
// the kernel took.
func sendmmsg(fd int, hdrs []mmsghdr) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	return int(n), e
}

// recvmmsg receives into hdrs from fd without blocking.
func recvmmsg(fd int, hdrs []mmsghdr) (int, unix.Errno) {
	n, _, e := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&hdrs[0])), uintptr(len(hdrs)), unix.MSG_DONTWAIT, 0, 0)
	return int(n), e
}
