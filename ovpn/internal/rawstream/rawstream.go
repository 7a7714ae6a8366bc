// Package rawstream reads and writes a TCP connection with raw system
// calls (unix.RawSyscall) inside its syscall.RawConn, the way the tun
// package and internal/sys/mmsg move TUN and UDP packets.
//
// Why raw: a system call the Go scheduler knows about (net.Conn's Read and
// Write) wakes sysmon, and one that runs longer than a sysmon tick (20 µs;
// a TCP write runs the receiving side's TCP stack in place for that long
// on a veth or loopback path) has its P handed to a fresh thread that
// spins, finds nothing and sleeps again, on a CPU the kernel needs. A
// flood ping through OpenVPN over TCP spent a third of the server's and
// the client's CPU in sysmon and those hand-offs (docs/benchmarks-history.md).
// An empty receive queue or a full send buffer still parks the goroutine
// in the poller (the raw call returns EAGAIN and RawConn waits), and the
// connection's deadlines and Close still end a wait.
package rawstream

import (
	"io"
	"net"
)

// Stream is a connection with raw reads and writes. Read is used by one
// goroutine at a time, and so are Write and WriteBuffers (callers
// serialize them); a read and a write may run concurrently.
type Stream interface {
	io.ReadWriter
	// WriteBuffers writes all of bufs with as few writev(2) calls as the
	// socket takes, like net.Buffers.WriteTo on a *net.TCPConn. It may
	// modify bufs.
	WriteBuffers(bufs [][]byte) (int64, error)
}

// New returns a Stream on c: raw system calls when c is a *net.TCPConn on
// Linux, else c's own Read and Write.
func New(c net.Conn) Stream {
	if s := newRaw(c); s != nil {
		return s
	}
	return plain{c}
}

// plain is a Stream over a connection's own methods.
type plain struct{ net.Conn }

func (p plain) WriteBuffers(bufs [][]byte) (int64, error) {
	b := net.Buffers(bufs)
	return b.WriteTo(p.Conn)
}
