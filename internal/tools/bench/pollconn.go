package bench

import (
	"fmt"
	"net"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// pollConn is a socket taken out of Go's netpoller: a syscall.RawConn
// whose Read and Write wait with poll(2), and only while the socket is
// not ready. The netpeers peers send through one (netpeers_side.go).
//
// Why: a socket in the netpoller stays registered with the runtime's
// epoll instance for its whole life, and that entry on the socket's wait
// queue makes the kernel take the queue's lock (with interrupts off,
// which this guest's hypervisor charges dearly) and call epoll back each
// time a sent datagram's buffer space returns (EPOLLOUT), that is, for
// every datagram the peers send, as the gateway's side takes it in. The
// edges also wake the harness's idle thread, which then competes with
// the gateway for the two CPUs, more or less often depending on the
// gateway's timing: the peer side cost more per GB with one gateway
// engine than with the other. Out of the netpoller, a socket has a waiter
// only while a goroutine waits in poll, which a sender rarely does.
//
// Not for a socket that mostly waits, such as the sink: a goroutine in a
// blocking poll(2) costs a thread switch per wake-up and keeps the
// runtime's sysmon polling every 20 µs, more than the netpoller's wait.
type pollConn struct {
	fd     int
	closed atomic.Bool // set by shut; Read and Write return within pollConnTick
}

// pollConnTick is how long a wait sleeps at the most before it looks
// whether the conn was shut (milliseconds).
const pollConnTick = 20

// detachConn moves c's socket out of the netpoller: it duplicates the
// descriptor, closes c (which removes c's descriptor from the runtime's
// epoll instance) and returns the duplicate. c is closed even on error.
func detachConn(c *net.UDPConn) (*pollConn, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		c.Close()
		return nil, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		derr = err
	}
	c.Close()
	if derr != nil {
		return nil, fmt.Errorf("detach socket from the netpoller: %w", derr)
	}
	return &pollConn{fd: fd}, nil
}

// Control calls f with the descriptor.
func (p *pollConn) Control(f func(fd uintptr)) error {
	if p.closed.Load() {
		return net.ErrClosed
	}
	f(uintptr(p.fd))
	return nil
}

// Read calls f until it returns true, waiting for the socket to be
// readable between calls, as syscall.RawConn's Read does.
func (p *pollConn) Read(f func(fd uintptr) bool) error { return p.wait(f, unix.POLLIN) }

// Write calls f until it returns true, waiting for room to send between
// calls.
func (p *pollConn) Write(f func(fd uintptr) bool) error { return p.wait(f, unix.POLLOUT) }

func (p *pollConn) wait(f func(fd uintptr) bool, events int16) error {
	for {
		if p.closed.Load() {
			return net.ErrClosed
		}
		if f(uintptr(p.fd)) {
			return nil
		}
		fds := [1]unix.PollFd{{Fd: int32(p.fd), Events: events}}
		if _, err := unix.Poll(fds[:], pollConnTick); err != nil && err != unix.EINTR {
			return err
		}
	}
}

// shut makes every Read, Write and Control return net.ErrClosed from now
// on (a waiting one within pollConnTick). The descriptor stays open until
// release.
func (p *pollConn) shut() { p.closed.Store(true) }

// release closes the descriptor; call it after shut, once no goroutine
// uses the conn.
func (p *pollConn) release() { unix.Close(p.fd) }

var _ syscall.RawConn = (*pollConn)(nil)
