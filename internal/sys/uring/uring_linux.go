// Copyright 2026 The Wirelane Authors. SPDX-License-Identifier: MIT

// Package uring is Linux's io_uring at its lowest level, for one job:
// writing a batch of buffers to one non-blocking descriptor with one
// system call instead of one write(2) each.
//
// Why: a system call's entry and exit cost far more than the code between
// them on some machines (virtual machines whose guest kernel runs without
// its own privilege level pay a hypervisor round trip per crossing: 1-1.5
// µs where a write of a packet into a TUN device is another 1 µs). A
// gateway that delivers a receive batch of short runs from many peers
// makes one TUN write per run; with a ring it makes one io_uring_enter per
// batch, and the kernel runs the writes one after another inside it.
//
// The map of one Write:
//
//	caller's buffers ──> one submission entry each (IORING_OP_WRITE, in order)
//	                 ──> io_uring_enter(submit all, wait for all)
//	                        the kernel issues each write in place: a
//	                        descriptor that is non-blocking and says it
//	                        can be tried without waiting (TUN, sockets,
//	                        pipes) never goes to the kernel's worker threads
//	                 ──> one completion each: bytes written or -errno
//
// A Ring is not safe for concurrent use; its owner serializes calls.
package uring

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's ABI (include/uapi/linux/io_uring.h).
const (
	opWrite = 23 // IORING_OP_WRITE

	setupSubmitAll   = 1 << 7 // IORING_SETUP_SUBMIT_ALL: keep submitting after an entry fails
	setupCoopTaskrun = 1 << 8 // IORING_SETUP_COOP_TASKRUN: no interrupt to run completions

	featSingleMmap = 1 << 0 // IORING_FEAT_SINGLE_MMAP
	enterGetEvents = 1 << 0 // IORING_ENTER_GETEVENTS

	offSQRing = 0          // IORING_OFF_SQ_RING (and the CQ ring, with a single mmap)
	offSQEs   = 0x10000000 // IORING_OFF_SQES
)

// sqringOffsets is struct io_sqring_offsets.
type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

// cqringOffsets is struct io_cqring_offsets.
type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// sqe is struct io_uring_sqe (64 bytes), with the fields a write uses.
type sqe struct {
	opcode   uint8
	flags    uint8
	ioprio   uint16
	fd       int32
	off      uint64
	addr     uint64
	len      uint32
	rwFlags  uint32
	userData uint64
	_        [24]byte // buf_index, personality, splice_fd_in, addr3, pad
}

// cqe is struct io_uring_cqe (16 bytes).
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// Ring is one io_uring with its submission and completion queues mapped.
// It is used by one goroutine at a time.
type Ring struct {
	fd int // the ring's descriptor; -1 once closed

	sqHead, sqTail *uint32 // the kernel advances head, we advance tail
	sqMask         uint32
	sqes           []sqe
	cqHead, cqTail *uint32 // we advance head, the kernel advances tail
	cqMask         uint32
	cqes           []cqe

	rings, sqeMem []byte // the two mappings, unmapped by Close
}

// Size is the largest batch one Write submits at a time; longer ones go
// in several rounds.
const Size = 64

// New sets up a ring. It fails where the kernel has no io_uring or it is
// turned off (kernel.io_uring_disabled, a seccomp filter, as container
// runtimes often install): callers then write each buffer with write(2).
func New() (*Ring, error) {
	var p params
	p.flags = setupSubmitAll | setupCoopTaskrun
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, Size, uintptr(unsafe.Pointer(&p)), 0)
	if e == unix.EINVAL {
		// Kernels before 5.19 know neither flag; the ring works without.
		p = params{}
		fd, _, e = unix.Syscall(unix.SYS_IO_URING_SETUP, Size, uintptr(unsafe.Pointer(&p)), 0)
	}
	if e != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", e)
	}
	r := &Ring{fd: int(fd)}
	unix.CloseOnExec(r.fd)
	if err := r.mapQueues(&p); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// mapQueues maps the rings and the submission entries that p describes.
func (r *Ring) mapQueues(p *params) error {
	if p.features&featSingleMmap == 0 {
		return errors.New("io_uring: kernel too old (no single mapping of both queues, Linux 5.4)")
	}
	size := p.sqOff.array + p.sqEntries*4
	if c := p.cqOff.cqes + p.cqEntries*uint32(unsafe.Sizeof(cqe{})); c > size {
		size = c
	}
	rings, err := unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("io_uring: map queues: %w", err)
	}
	r.rings = rings
	sqeMem, err := unix.Mmap(r.fd, offSQEs, int(p.sqEntries)*int(unsafe.Sizeof(sqe{})), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return fmt.Errorf("io_uring: map entries: %w", err)
	}
	r.sqeMem = sqeMem
	base := unsafe.Pointer(&rings[0])
	at := func(off uint32) unsafe.Pointer { return unsafe.Add(base, off) }
	r.sqHead, r.sqTail = (*uint32)(at(p.sqOff.head)), (*uint32)(at(p.sqOff.tail))
	r.sqMask = *(*uint32)(at(p.sqOff.ringMask))
	r.sqes = unsafe.Slice((*sqe)(unsafe.Pointer(&sqeMem[0])), p.sqEntries)
	r.cqHead, r.cqTail = (*uint32)(at(p.cqOff.head)), (*uint32)(at(p.cqOff.tail))
	r.cqMask = *(*uint32)(at(p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*cqe)(at(p.cqOff.cqes)), p.cqEntries)
	// Entry i of the submission ring is always submission entry i.
	array := unsafe.Slice((*uint32)(at(p.sqOff.array)), p.sqEntries)
	for i := range array {
		array[i] = uint32(i)
	}
	return nil
}

// Close releases the ring. It is safe to call more than once.
func (r *Ring) Close() error {
	if r.fd < 0 {
		return nil
	}
	var errs error
	for _, m := range [][]byte{r.sqeMem, r.rings} {
		if m != nil {
			errs = errors.Join(errs, unix.Munmap(m))
		}
	}
	r.sqeMem, r.rings, r.sqes, r.cqes = nil, nil, nil, nil
	errs = errors.Join(errs, unix.Close(r.fd))
	r.fd = -1
	return errs
}

// ErrClosed is Write's error after Close.
var ErrClosed = errors.New("io_uring: ring closed")

// Write writes each of bufs to fd, in order, and waits for all of them:
// res[i] (len(res) >= len(bufs)) becomes the bytes bufs[i] wrote, or the
// negative errno it failed with (-EAGAIN where fd was not ready). fd must
// be non-blocking, or a write that waits holds the calling thread without
// the Go scheduler knowing (the system call is made raw, like
// internal/sys/mmsg's, for the same reason). The buffers must stay
// reachable and unchanged until Write returns, which they do when they are
// the caller's own slices.
//
// An error means the ring itself failed: the results of entries it never
// took are set to the negated errno, and the ring should not be used
// again.
func (r *Ring) Write(fd int, bufs [][]byte, res []int32) error {
	if r.fd < 0 {
		return ErrClosed
	}
	res = res[:len(bufs)]
	for len(bufs) > 0 {
		n := min(len(bufs), len(r.sqes))
		if err := r.round(fd, bufs[:n], res[:n]); err != nil {
			for i := n; i < len(bufs); i++ {
				res[i] = -int32(errnoOf(err))
			}
			return err
		}
		bufs, res = bufs[n:], res[n:]
	}
	return nil
}

// round submits bufs (at most the ring's size) and reaps their
// completions.
func (r *Ring) round(fd int, bufs [][]byte, res []int32) error {
	tail := atomic.LoadUint32(r.sqTail)
	for i, b := range bufs {
		r.sqes[(tail+uint32(i))&r.sqMask] = sqe{
			opcode:   opWrite,
			fd:       int32(fd),
			off:      ^uint64(0), // the file's position, none for a TUN device or socket
			addr:     uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))),
			len:      uint32(len(b)),
			userData: uint64(i),
		}
		res[i] = 0
	}
	end := tail + uint32(len(bufs))
	atomic.StoreUint32(r.sqTail, end)
	reaped := 0
	var failed error
	for reaped < len(bufs) {
		head := atomic.LoadUint32(r.sqHead)
		// Submit what the kernel has not taken yet and wait for every
		// completion still due; with all entries issued in place the
		// wait is over before the call returns.
		_, _, e := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), uintptr(end-head), uintptr(len(bufs)-reaped), enterGetEvents, 0, 0)
		got := r.reap(res)
		reaped += got
		switch e {
		case 0, unix.EINTR:
		case unix.EAGAIN, unix.EBUSY:
			// The kernel could not take more now (memory, or
			// completions it has yet to post): try again while
			// something moves.
			if got == 0 && atomic.LoadUint32(r.sqHead) == head {
				failed = e
			}
		default:
			failed = e
		}
		if failed != nil {
			break
		}
	}
	if failed != nil {
		// Take back what the kernel never took, so that no later call
		// submits entries pointing at these buffers, and wait for what
		// it took.
		head := atomic.LoadUint32(r.sqHead)
		atomic.StoreUint32(r.sqTail, head)
		for i := int(head - tail); i < len(bufs); i++ {
			res[i] = -int32(errnoOf(failed))
		}
		for reaped < int(head-tail) {
			_, _, e := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 0, uintptr(int(head-tail)-reaped), enterGetEvents, 0, 0)
			reaped += r.reap(res)
			if e != 0 && e != unix.EINTR {
				r.Close() // entries still in flight: the ring cannot be reused
				break
			}
		}
		runtime.KeepAlive(bufs)
		return fmt.Errorf("io_uring_enter: %w", failed)
	}
	runtime.KeepAlive(bufs)
	return nil
}

// reap copies the completions the kernel has posted into res and returns
// how many there were.
func (r *Ring) reap(res []int32) int {
	head := atomic.LoadUint32(r.cqHead)
	tail := atomic.LoadUint32(r.cqTail)
	n := 0
	for ; head != tail; head++ {
		c := &r.cqes[head&r.cqMask]
		if i := int(c.userData); i < len(res) {
			res[i] = c.res
		}
		n++
	}
	atomic.StoreUint32(r.cqHead, head)
	return n
}

// errnoOf is err's errno, or EIO.
func errnoOf(err error) unix.Errno {
	var e unix.Errno
	if errors.As(err, &e) {
		return e
	}
	return unix.EIO
}
