//go:build linux

package tun

// Gathering single packets into one Read.
//
//	Read(bufs)
//	  -> packets left over from the last Read come first, and alone
//	  -> otherwise the device's Read (blocking; read_linux.go, or the
//	     wireguard tun package's without virtio-net headers): one TSO
//	     train split into segments, or one single packet
//	  -> a single packet, the caller's buffers at most 16 KiB, and the
//	     device still readable (poll, no wait): more reads into the
//	     gatherer's own buffers (the caller's size, so each read can take
//	     a whole train), their packets copied into bufs; what does not fit
//	     waits for the next Read
//
// Why: a sender that does not use TSO (UDP applications, small writes)
// puts one packet in the TUN queue per write, and the tun package returns
// one packet per Read. Batched, those packets leave in one sendmmsg with
// UDP segmentation instead of one system call each, and the peer receives
// them as one GRO train. A TSO train is already a batch: nothing changes
// for it.

import (
	"io"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// maxGatherBuf bounds the buffers a caller may use and still have single
// packets gathered: the spare buffers are the caller's size, so a caller
// with 64 KiB buffers everywhere would need 8 MiB of spares (such a caller
// reads one packet at a time, as before).
const maxGatherBuf = 16 << 10

// gatherer holds the extra reads of one device. Read is called by one
// goroutine at a time (the engine's TUN reader), which owns all fields.
type gatherer struct {
	rc    syscall.RawConn  // the TUN device's descriptor; immutable
	poll  func(fd uintptr) // sets ready; made once, so that polling allocates nothing
	fds   [1]unix.PollFd
	zero  unix.Timespec // ppoll's timeout: none
	ready bool
	more  func() bool // readable, or a test's stand-in; immutable

	spare [][]byte // extra reads land here: spare[0] takes any packet, the rest are the caller's size
	sizes []int    // sizes of the packets in spare
	next  int      // first packet of spare not yet handed out
	n     int      // packets in spare
}

// batchReader is what the gatherer reads from: the tun package's
// Device.Read contract and batch size.
type batchReader interface {
	Read(bufs [][]byte, sizes []int, offset int) (int, error)
	BatchSize() int
}

// newGatherer returns a gatherer for d, or nil when d has no file or
// reads one packet at a time anyway.
func newGatherer(d wgtun.Device) *gatherer {
	f := d.File()
	if f == nil || d.BatchSize() < 2 {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil || !nonBlocking(rc) {
		return nil // a blocking descriptor: extra reads could wait
	}
	g := &gatherer{rc: rc}
	g.more = g.readable
	g.poll = func(fd uintptr) {
		// ppoll with a zero timeout never waits: raw, like the reads.
		g.fds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
		n, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&g.fds[0])), 1, uintptr(unsafe.Pointer(&g.zero)), 0, 0, 0)
		g.ready = e == 0 && n == 1 && g.fds[0].Revents&unix.POLLIN != 0
	}
	return g
}

// read is Device.Read with single packets gathered (see above).
func (g *gatherer) read(d batchReader, bufs [][]byte, sizes []int, offset int) (int, error) {
	if g.next < g.n {
		if k := g.handOut(bufs, sizes, offset, 0); k > 0 {
			return k, nil
		}
		g.next++ // fits no buffer the caller has: dropped, as the tun package would
		return 0, io.ErrShortBuffer
	}
	k, err := d.Read(bufs, sizes, offset)
	if err != nil || k != 1 || len(bufs[len(bufs)-1]) > offset+maxGatherBuf {
		return k, err
	}
	for k < len(bufs) && g.more() {
		g.prepare(d.BatchSize(), len(bufs[len(bufs)-1]), offset)
		m, _ := d.Read(g.spare, g.sizes, offset)
		if m == 0 {
			break // a packet the tun package refused; the next Read goes on
		}
		g.next, g.n = 0, m
		k = g.handOut(bufs, sizes, offset, k)
		if g.next < g.n || m > 1 {
			break // bufs are full, or a train came: enough for one batch
		}
	}
	return k, nil
}

// handOut copies waiting packets into bufs from index k on, while they
// fit, and returns the new count.
func (g *gatherer) handOut(bufs [][]byte, sizes []int, offset, k int) int {
	for ; g.next < g.n && k < len(bufs); g.next++ {
		pkt := g.spare[g.next][offset : offset+g.sizes[g.next]]
		if offset+len(pkt) > len(bufs[k]) {
			break // too big for this buffer: the next Read gives it bufs[0]
		}
		sizes[k] = copy(bufs[k][offset:], pkt)
		k++
	}
	return k
}

// prepare sizes the spare buffers: one for any packet, batch-1 of size
// bufSize (the caller's buffers, sized for the MTU).
func (g *gatherer) prepare(batch, bufSize, offset int) {
	if len(g.spare) != batch {
		g.spare = make([][]byte, batch)
		g.sizes = make([]int, batch)
		g.spare[0] = make([]byte, offset+1<<16)
	}
	for i := 1; i < batch; i++ {
		if len(g.spare[i]) < bufSize {
			g.spare[i] = make([]byte, bufSize)
		}
	}
}

// readable reports whether a read would find a packet now, without
// waiting. It never calls File.Fd, which would make the descriptor
// blocking.
func (g *gatherer) readable() bool {
	g.ready = false
	if g.rc.Control(g.poll) != nil {
		return false
	}
	return g.ready
}
