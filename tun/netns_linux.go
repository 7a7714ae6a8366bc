//go:build linux

package tun

// Following a TUN interface into other network namespaces.
//
// The usual userspace topology creates the interface in one namespace and
// moves it into another at once (`ip link set wg0 netns ns1`), while the
// daemon and its UDP sockets stay behind. The underlying device asks the
// kernel for the MTU by name and listens for link changes in the
// namespace it was created in (its home), so after the move it no longer
// sees MTU changes (or sees a different interface that happens to bear the
// name). Up/down detection already works anywhere: the underlying device
// probes the TUN file itself.
//
//	nsDevice.Events  <- underlying device's events (home namespace)
//	                 <- follow(), every followInterval while the interface
//	                    is away from home: TUNGETDEVNETNS -> the interface's
//	                    namespace -> its MTU there -> close everything;
//	                    a new namespace or a new MTU -> EventMTUUpdate
//	nsDevice.MTU     -> the same look-up, on demand
//
// Why poll instead of subscribing to link changes in the other namespace:
// a descriptor of a namespace, and every socket opened in it, keeps that
// namespace alive. A subscription held there would stop `ip netns delete`
// from ever dismantling the namespace, so the kernel would never destroy
// the TUN interface in it, and the daemon (which ends when its interface
// goes) would run forever. Between two polls this package holds nothing in
// the other namespace; when the namespace dies the interface is destroyed,
// Read fails, and the owner shuts down as after `ip link del`.
//
// TUNGETDEVNETNS (Linux 5.2) returns a descriptor of the namespace the
// interface lives in; on older kernels the wrapper behaves exactly like
// the underlying device.

import (
	"errors"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// tunGetDevNetns is _IO('T', 227): a descriptor of the interface's
// current network namespace.
const tunGetDevNetns = 0x54e3

// followInterval is how often follow looks at an interface that lives
// outside the home namespace. MTU changes there are reported at most this
// late (the device also re-reads the MTU when a packet does not fit).
var followInterval = 500 * time.Millisecond

// nsID identifies a network namespace (the inode of its nsfs file).
type nsID struct{ dev, ino uint64 }

// nsDevice is a Linux TUN device whose MTU and MTU events follow the
// interface across network namespaces.
type nsDevice struct {
	wgtun.Device

	gro    *groWriter    // TCP written with trusted checksums, or nil; immutable
	reader batchReader   // rawReader, or the underlying device; immutable
	gather *gatherer     // single packets gathered into one Read, or nil; immutable
	home   nsID          // namespace the underlying device listens in; immutable
	events chan Event    // merged events; closed once both sources stop
	stop   chan struct{} // closed by Close
	once   sync.Once     // guards closing stop
}

// followNamespaces wraps d and starts the goroutines that merge its events
// with the MTU changes seen in the interface's current namespace.
func followNamespaces(d wgtun.Device) *nsDevice {
	n := &nsDevice{Device: d, reader: d, gro: newGROWriter(d), gather: newGatherer(d), events: make(chan Event, 8), stop: make(chan struct{})}
	if r := newRawReader(d); r != nil {
		n.reader = r
	}
	// The underlying device subscribed to link changes from the
	// namespace of the thread that created it, which is this process's.
	n.home, _ = statNS("/proc/thread-self/ns/net")
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		n.forward(d.Events())
	}()
	go func() {
		defer wg.Done()
		n.follow()
	}()
	go func() {
		wg.Wait()
		close(n.events)
	}()
	return n
}

// statNS identifies the namespace file at path.
func statNS(path string) (nsID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nsID{}, err
	}
	return nsID{st.Dev, st.Ino}, nil
}

// Read reads a batch: a TSO train split into packets, or single packets
// gathered while more are waiting (gather_linux.go).
func (n *nsDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	var k int
	var err error
	if n.gather == nil {
		k, err = n.reader.Read(bufs, sizes, offset)
	} else {
		k, err = n.gather.read(n.reader, bufs, sizes, offset)
	}
	if err == wgtun.ErrTooManySegments {
		err = ErrTooManySegments // the underlying device's, when it reads itself
	}
	return k, err
}

// Write writes the packets bufs[i][offset:]. With virtio-net headers on,
// TCP packets are merged and marked without verifying their checksums
// (trusted_gro.go): callers hand it only packets their tunnel has
// authenticated.
func (n *nsDevice) Write(bufs [][]byte, offset int) (int, error) {
	if n.gro == nil {
		return n.Device.Write(bufs, offset)
	}
	return n.gro.write(n.Device, bufs, offset)
}

// Events returns the merged event channel; it is closed after Close.
func (n *nsDevice) Events() <-chan Event { return n.events }

// Close stops the followers and closes the underlying device, then the
// writer's ring.
func (n *nsDevice) Close() error {
	n.once.Do(func() { close(n.stop) })
	err := n.Device.Close()
	if n.gro != nil {
		n.gro.close()
	}
	return err
}

// emit delivers ev unless the device is closing.
func (n *nsDevice) emit(ev Event) bool {
	select {
	case n.events <- ev:
		return true
	case <-n.stop:
		return false
	}
}

// forward copies the underlying device's events until it closes them. After
// Close it keeps draining, so the underlying listeners can finish.
func (n *nsDevice) forward(in <-chan Event) {
	for ev := range in {
		if !n.emit(ev) {
			for range in {
			}
			return
		}
	}
}

// devNetns returns a descriptor of the namespace the interface is in now.
// The caller must close it promptly: it keeps the namespace alive.
func (n *nsDevice) devNetns() (int, error) {
	f := n.File()
	if f == nil {
		return -1, os.ErrClosed
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	var fd int
	var opErr error
	if err := rc.Control(func(tfd uintptr) {
		r, _, errno := unix.Syscall(unix.SYS_IOCTL, tfd, tunGetDevNetns, 0)
		fd = int(r)
		if errno != 0 {
			opErr = errno
		}
	}); err != nil {
		return -1, err
	}
	if opErr != nil {
		return -1, opErr
	}
	unix.CloseOnExec(fd)
	return fd, nil
}

// where reports the interface's namespace and, when that is not home, its
// MTU there. It holds the namespace only for the duration of the call.
func (n *nsDevice) where() (ns nsID, mtu int, err error) {
	nsfd, err := n.devNetns()
	if err != nil {
		return nsID{}, 0, err
	}
	defer unix.Close(nsfd)
	var st unix.Stat_t
	if err := unix.Fstat(nsfd, &st); err != nil {
		return nsID{}, 0, err
	}
	ns = nsID{st.Dev, st.Ino}
	if ns == n.home {
		return ns, 0, nil
	}
	name, err := n.Name()
	if err != nil {
		return ns, 0, err
	}
	h, err := netlink.NewHandleAt(netns.NsHandle(nsfd), unix.NETLINK_ROUTE)
	if err != nil {
		return ns, 0, err
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	if err != nil {
		return ns, 0, err
	}
	return ns, link.Attrs().MTU, nil
}

// MTU returns the interface's MTU as seen in the namespace it lives in now.
func (n *nsDevice) MTU() (int, error) {
	ns, mtu, err := n.where()
	if err != nil || ns == n.home {
		// At home, an older kernel, or the interface is gone: the
		// underlying device asks by name here.
		return n.Device.MTU()
	}
	return mtu, nil
}

// follow polls the interface's namespace and MTU while it is away from
// home, and reports a move or an MTU change there as EventMTUUpdate. It
// returns when the kernel cannot tell the interface's namespace or the
// device is closed, and closes the device when the interface is gone.
func (n *nsDevice) follow() {
	t := time.NewTicker(followInterval)
	defer t.Stop()
	last, lastMTU := n.home, 0
	known := false // TUNGETDEVNETNS has answered at least once
	for {
		ns, mtu, err := n.where()
		switch {
		case err == nil:
			known = true
			if ns != last || (ns != n.home && mtu != lastMTU) {
				last, lastMTU = ns, mtu
				if !n.emit(EventMTUUpdate) {
					return
				}
			}
		case errors.Is(err, syscall.EBADFD):
			// The interface was deleted. The owner's Read learns that
			// too, but only if it is woken; a device must not outlive
			// its interface because a wake-up went missing, so it ends
			// here as well (Read then returns os.ErrClosed).
			n.Close()
			return
		case errors.Is(err, syscall.EINVAL) && known:
			// The interface's namespace is being dismantled; the
			// interface goes with it shortly: keep looking.
		case errors.Is(err, syscall.ENOTTY) || errors.Is(err, syscall.EINVAL) || errors.Is(err, os.ErrClosed):
			// No TUNGETDEVNETNS, or the device was closed: nothing left
			// to follow.
			return
		default:
			// The interface moved between the look-ups, or its name
			// changed under us: look again at the next tick.
		}
		select {
		case <-t.C:
		case <-n.stop:
			return
		}
	}
}
