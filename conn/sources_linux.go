package conn

// Sticky-source invalidation:
//
//	netlink socket (RTMGRP_IPV4/IPV6_IFADDR, _ROUTE) ─┐
//	Send refused for its source ──────────────────────┼─> signal() (never blocks)
//	SetMark ──────────────────────────────────────────┘
//	    -> invalidator goroutine: wait until the burst is quiet
//	    -> run every OnSourceInvalid hook once
//
// One address change produces several netlink messages (the address, its
// local route, its prefix route); they are one event and the hooks run once
// for it, so each peer rebuilds its route once per event, never per packet.

import (
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// invalidator coalesces source-invalid signals and runs the hooks.
type invalidator struct {
	kick  chan struct{} // capacity 1: a pending event
	fired atomic.Uint64 // hook rounds run so far

	mu     sync.Mutex     // guards hooks, nextID, quit
	hooks  map[int]func() // registered hooks
	nextID int            //
	quit   chan struct{}  // closed to stop the running goroutine; nil when none runs
	wg     sync.WaitGroup // the running goroutine
	quiet  time.Duration  // immutable after construction
}

func newInvalidator() *invalidator {
	return &invalidator{kick: make(chan struct{}, 1), hooks: make(map[int]func()), quiet: sourceQuiet}
}

func (v *invalidator) add(fn func()) (remove func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	id := v.nextID
	v.nextID++
	v.hooks[id] = fn
	return func() {
		v.mu.Lock()
		delete(v.hooks, id)
		v.mu.Unlock()
	}
}

// signal records that an event happened; it never blocks.
func (v *invalidator) signal() {
	select {
	case v.kick <- struct{}{}:
	default:
	}
}

// start runs the hook goroutine unless it runs already.
func (v *invalidator) start() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.quit != nil {
		return
	}
	v.quit = make(chan struct{})
	v.wg.Add(1)
	go v.run(v.quit)
}

// stop ends the hook goroutine and waits for it.
func (v *invalidator) stop() {
	v.mu.Lock()
	q := v.quit
	v.quit = nil
	v.mu.Unlock()
	if q != nil {
		close(q)
		v.wg.Wait()
	}
}

func (v *invalidator) run(quit chan struct{}) {
	defer v.wg.Done()
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-v.kick:
		}
		// Let the burst end: every further kick restarts the quiet wait,
		// up to ten quiet periods in all.
		deadline := time.Now().Add(10 * v.quiet)
	settle:
		for {
			t.Reset(v.quiet)
			select {
			case <-quit:
				t.Stop()
				return
			case <-v.kick:
				t.Stop()
				if time.Now().After(deadline) {
					break settle
				}
			case <-t.C:
				break settle
			}
		}
		v.mu.Lock()
		fns := make([]func(), 0, len(v.hooks))
		for _, fn := range v.hooks {
			fns = append(fns, fn)
		}
		v.mu.Unlock()
		for _, fn := range fns {
			fn()
		}
		v.fired.Add(1)
	}
}

// sourceWatch is a netlink route socket subscribed to address and route
// changes.
type sourceWatch struct {
	f    *os.File
	done chan struct{}
}

// watchSources opens the netlink socket in the calling thread's network
// namespace and calls signal for every message that may invalidate a
// sticky source.
func watchSources(signal func()) (*sourceWatch, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return nil, os.NewSyscallError("socket netlink", err)
	}
	sa := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR | unix.RTMGRP_IPV4_ROUTE | unix.RTMGRP_IPV6_ROUTE}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("bind netlink", err)
	}
	w := &sourceWatch{f: os.NewFile(uintptr(fd), "netlink-route"), done: make(chan struct{})}
	go w.run(signal)
	return w, nil
}

func (w *sourceWatch) run(signal func()) {
	defer close(w.done)
	buf := make([]byte, 1<<16)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			if os.IsTimeout(err) {
				continue
			}
			if err == unix.ENOBUFS {
				signal() // messages were lost: assume the worst
				continue
			}
			if pe, ok := err.(*os.PathError); ok && pe.Err == unix.ENOBUFS {
				signal()
				continue
			}
			return // closed
		}
		if invalidatesSources(buf[:n]) {
			signal()
		}
	}
}

func (w *sourceWatch) close() {
	w.f.Close()
	<-w.done
}

// invalidatesSources reports whether a netlink datagram holds a message
// that may make a sticky source stale: an address removed, or a route
// added or removed. Malformed input yields false at the first bad header.
func invalidatesSources(b []byte) bool {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := binary.NativeEndian.Uint32(b[0:4])
		typ := binary.NativeEndian.Uint16(b[4:6])
		if l < unix.NLMSG_HDRLEN || uint64(l) > uint64(len(b)) {
			return false
		}
		switch typ {
		case unix.RTM_DELADDR, unix.RTM_NEWROUTE, unix.RTM_DELROUTE:
			return true
		}
		next := (l + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
		if uint64(next) >= uint64(len(b)) {
			return false
		}
		b = b[next:]
	}
	return false
}
