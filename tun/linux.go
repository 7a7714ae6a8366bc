//go:build linux

package tun

// Linux TUN devices. Creation and most of the data path (virtio-net
// header, TSO splitting, UDP GRO and segmentation offload) are delegated to
// golang.zx2c4.com/wireguard/tun; this file only adapts its constructors to
// Wirelane's Device and makes inherited file descriptors safe to use. Two
// parts are done here: writing TCP (trusted_gro.go merges and marks TCP
// segments without verifying their checksums, because every packet
// Wirelane writes has just been authenticated by its tunnel), and
// gathering single packets into one Read while more are waiting
// (gather_linux.go).
//
// What the returned devices guarantee:
//   - Read and Write move batches of up to BatchSize packets; with offloads
//     on (the usual case) BatchSize is 128 and a single Read may split one
//     large TSO segment into many packets, or gather single packets that
//     were waiting.
//   - Read and Write need offset >= VirtioHeaderLen: the bytes before offset
//     hold the virtio-net header.
//   - Events reports EventUp/EventDown/EventMTUUpdate, and MTU answers,
//     for the namespace the interface is in now, even after it has been
//     moved away from the daemon's namespace (netns_linux.go).
//   - When the interface is deleted, Read returns an error; that is the
//     signal for its owner to shut down.

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// VirtioHeaderLen is the smallest offset Read and Write accept on a Linux
// TUN device: the space for the virtio-net header that carries offload
// metadata in front of each packet.
const VirtioHeaderLen = 10

// CreateTUN creates (or attaches to) the Linux TUN interface name, sets its
// MTU, and enables the TSO/GRO offloads the kernel supports. name may hold a
// %d pattern (for example "wl%d") for the kernel to fill in; Name reports the
// result. It needs CAP_NET_ADMIN and /dev/net/tun.
func CreateTUN(name string, mtu int) (Device, error) {
	if name == "" || len(name) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tun: create %q: interface name must be 1 to %d bytes", name, unix.IFNAMSIZ-1)
	}
	if mtu <= 0 || mtu > 65535 {
		return nil, fmt.Errorf("tun: create %q: MTU %d out of range 1..65535", name, mtu)
	}
	d, err := wgtun.CreateTUN(name, mtu)
	if err != nil {
		return nil, fmt.Errorf("tun: create %q: %w", name, err)
	}
	return followNamespaces(d), nil
}

// CreateTUNFromFile wraps an already open TUN file descriptor (for example
// one inherited through WG_TUN_FD) and sets the interface's MTU. It takes
// ownership of f: on success the returned Device closes it, on failure it is
// closed before returning. A descriptor in blocking mode is duplicated into
// non-blocking mode first, so that reads go through the runtime's poller
// instead of parking an OS thread each.
func CreateTUNFromFile(f *os.File, mtu int) (Device, error) {
	if f == nil {
		return nil, fmt.Errorf("tun: create from file: nil file")
	}
	if mtu <= 0 || mtu > 65535 {
		f.Close()
		return nil, fmt.Errorf("tun: create from file %s: MTU %d out of range 1..65535", f.Name(), mtu)
	}
	nf, err := nonblocking(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("tun: create from file %s: %w", f.Name(), err)
	}
	d, err := wgtun.CreateTUNFromFile(nf, mtu)
	if err != nil {
		nf.Close()
		return nil, fmt.Errorf("tun: create from file %s: %w", f.Name(), err)
	}
	return followNamespaces(d), nil
}

// nonblocking returns f itself when its descriptor is already in
// non-blocking mode, and otherwise a non-blocking duplicate (closing f).
// It never calls f.Fd, which would switch the descriptor to blocking mode.
func nonblocking(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var flags, dup int
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		flags, opErr = unix.FcntlInt(fd, unix.F_GETFL, 0)
		if opErr != nil || flags&unix.O_NONBLOCK != 0 {
			return
		}
		dup, opErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if opErr != nil {
			return
		}
		if opErr = unix.SetNonblock(dup, true); opErr != nil {
			unix.Close(dup)
		}
	}); err != nil {
		return nil, err
	}
	if opErr != nil {
		return nil, opErr
	}
	if flags&unix.O_NONBLOCK != 0 {
		return f, nil
	}
	name := f.Name()
	f.Close()
	return os.NewFile(uintptr(dup), name), nil
}
