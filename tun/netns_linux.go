//go:build linux

package tun

// Following a TUN interface into other network namespaces.
//
// The usual userspace topology creates the interface in one namespace and
// moves it into another at once (`ip link set wg0 netns ns1`), while the
// daemon and its UDP sockets stay behind. The underlying device asks the
// kernel for the MTU by name and listens for link changes in the
// namespace it was created in, so after the move it no longer sees MTU
// changes (or sees a different interface that happens to bear the name).
//
//	nsDevice.Events  <- underlying device's events (up/down work anywhere)
//	                 <- follow(): TUNGETDEVNETNS -> the interface's current
//	                    namespace -> link subscription there:
//	                      RTM_NEWLINK with a new MTU  -> EventMTUUpdate
//	                      RTM_DELLINK (moved/deleted) -> look again
//	nsDevice.MTU     -> netlink query in the interface's current namespace
//
// TUNGETDEVNETNS (Linux 5.2) returns a descriptor of the namespace the
// interface lives in; on older kernels the wrapper behaves exactly like
// the underlying device.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// tunGetDevNetns is _IO('T', 227): a descriptor of the interface's
// current network namespace.
const tunGetDevNetns = 0x54e3

// nsDevice is a Linux TUN device whose MTU and MTU events follow the
// interface across network namespaces.
type nsDevice struct {
	wgtun.Device

	events chan Event    // merged events; closed once both sources stop
	stop   chan struct{} // closed by Close
	once   sync.Once     // guards closing stop
}

// followNamespaces wraps d and starts the goroutines that merge its events
// with those seen in the interface's current namespace.
func followNamespaces(d wgtun.Device) *nsDevice {
	n := &nsDevice{Device: d, events: make(chan Event, 8), stop: make(chan struct{})}
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

// Events returns the merged event channel; it is closed after Close.
func (n *nsDevice) Events() <-chan Event { return n.events }

// Close stops the followers and closes the underlying device.
func (n *nsDevice) Close() error {
	n.once.Do(func() { close(n.stop) })
	return n.Device.Close()
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
func (n *nsDevice) devNetns() (int, error) {
	rc, err := n.File().SyscallConn()
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

// MTU returns the interface's MTU as seen in the namespace it lives in now.
func (n *nsDevice) MTU() (int, error) {
	name, err := n.Name()
	if err != nil {
		return 0, err
	}
	nsfd, err := n.devNetns()
	if err != nil {
		// Older kernel, or the interface is gone: ask by name here.
		return n.Device.MTU()
	}
	defer unix.Close(nsfd)
	h, err := netlink.NewHandleAt(netns.NsHandle(nsfd), unix.NETLINK_ROUTE)
	if err != nil {
		return 0, fmt.Errorf("tun: MTU of %s: %w", name, err)
	}
	defer h.Close()
	link, err := h.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("tun: MTU of %s: %w", name, err)
	}
	return link.Attrs().MTU, nil
}

// follow subscribes to link changes in the interface's namespace and
// starts over whenever the interface leaves that namespace. It returns
// when the interface is gone or the device is closed.
func (n *nsDevice) follow() {
	misses := 0
	for {
		nsfd, err := n.devNetns()
		if err != nil {
			return // deleted, closed, or a kernel without TUNGETDEVNETNS
		}
		moved, err := n.watch(nsfd)
		unix.Close(nsfd)
		switch {
		case moved:
			misses = 0
			if !n.emit(EventMTUUpdate) {
				return
			}
		case errors.Is(err, errNotHere):
			// The interface moved between the two look-ups; try again,
			// but do not spin if it keeps failing.
			if misses++; misses > 20 {
				return
			}
			select {
			case <-time.After(50 * time.Millisecond):
			case <-n.stop:
				return
			}
		default:
			return
		}
	}
}

var errNotHere = errors.New("tun: interface not found in its namespace")

// watch reports MTU changes of the interface inside namespace nsfd. It
// returns moved=true when the interface leaves the namespace (moved away
// or deleted; the caller tells which), and false with the reason otherwise.
func (n *nsDevice) watch(nsfd int) (moved bool, err error) {
	name, err := n.Name()
	if err != nil {
		return false, err
	}
	ns := netns.NsHandle(nsfd)
	updates := make(chan netlink.LinkUpdate, 16)
	done := make(chan struct{})
	// Subscribe before looking the interface up, so that a move right
	// after the look-up still arrives as RTM_DELLINK.
	if err := netlink.LinkSubscribeWithOptions(updates, done, netlink.LinkSubscribeOptions{Namespace: &ns}); err != nil {
		close(done)
		return false, err
	}
	defer func() {
		close(done)
		// The subscription's reader blocks on a full channel; drain it
		// until it notices done and closes the channel.
		go func() {
			for range updates {
			}
		}()
	}()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return false, err
	}
	link, err := h.LinkByName(name)
	h.Close()
	if err != nil {
		return false, errNotHere
	}
	index, mtu := link.Attrs().Index, link.Attrs().MTU
	for {
		select {
		case <-n.stop:
			return false, nil
		case u, ok := <-updates:
			if !ok {
				return false, errors.New("tun: link subscription ended")
			}
			if int(u.Index) != index {
				continue
			}
			if u.Header.Type == unix.RTM_DELLINK {
				return true, nil
			}
			if u.Link != nil && u.Link.Attrs().MTU != mtu {
				mtu = u.Link.Attrs().MTU
				if !n.emit(EventMTUUpdate) {
					return false, nil
				}
			}
		}
	}
}
