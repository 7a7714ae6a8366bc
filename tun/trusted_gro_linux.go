//go:build linux

package tun

import (
	"errors"
	"os"
	"sync"

	"github.com/wirelane/wirelane/internal/sys/uring"
	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// groWriter writes TCP packets (and UDP, when the device takes UDP
// segmentation offload) to a TUN device with virtio-net headers itself
// (trusted_gro.go), each with one raw write(2) (rawio_linux.go), and hands
// every other packet to the wireguard tun package's Write, except a lone
// one, or several it could not merge (rest_flows.go), which it also
// writes raw.
type groWriter struct {
	mu sync.Mutex // serializes Writes; guards the fields below
	g  trustedGRO
	ft flowTable // restFlowsDistinct's scratch
	io *rawIO

	// ring writes a call's raw writes with one system call when there is
	// more than one (ring_writes.go); nil where io_uring is unavailable
	// or turned off, and after close.
	ring  *uring.Ring
	batch [][]byte // scratch: one call's raw writes, in order
	res   []int32  // scratch: their results
}

// newGROWriter returns a writer for d, or nil when d's file does not carry
// virtio-net headers (offloads off): then d's own Write is all there is.
func newGROWriter(d wgtun.Device) *groWriter {
	io := newRawIO(d, unix.SYS_WRITE)
	if io == nil {
		return nil
	}
	w := &groWriter{io: io, ring: newWriteRing()}
	w.g.udp = takesUSO(d.File())
	return w
}

// close releases the ring. The device must be closed first, so that no
// write still waits for it to be writable while holding mu.
func (w *groWriter) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ring != nil {
		w.ring.Close()
		w.ring = nil
	}
}

// takesUSO reports whether the TUN file f takes UDP segmentation offload
// (Linux 6.2 and later), the way the wireguard tun package finds out:
// setting the TCP and UDP offloads together succeeds. The kernel checks
// every flag before it applies any, so a refusal changes nothing, and
// where the tun package already set them this sets them again.
func takesUSO(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		opErr = unix.IoctlSetInt(int(fd), unix.TUNSETOFFLOAD,
			unix.TUN_F_CSUM|unix.TUN_F_TSO4|unix.TUN_F_TSO6|unix.TUN_F_USO4|unix.TUN_F_USO6)
	}); err != nil {
		return false
	}
	return opErr == nil
}

// hasVnetHdr reports whether the TUN file f was set up with IFF_VNET_HDR.
// It never calls f.Fd, which would make the descriptor blocking.
func hasVnetHdr(f *os.File) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var flags uint16
	var opErr error
	if err := rc.Control(func(fd uintptr) {
		var ifr *unix.Ifreq
		if ifr, opErr = unix.NewIfreq(""); opErr != nil {
			return
		}
		if opErr = unix.IoctlIfreq(int(fd), unix.TUNGETIFF, ifr); opErr == nil {
			flags = ifr.Uint16()
		}
	}); err != nil || opErr != nil {
		return false
	}
	return flags&unix.IFF_VNET_HDR != 0
}

// write writes bufs (packets at offset, offset >= VirtioHeaderLen): TCP
// merged and marked by this package, the rest through fallback, or here
// when the rest is a single packet. It returns the bytes written,
// virtio-net headers included.
func (w *groWriter) write(fallback wgtun.Device, bufs [][]byte, offset int) (int, error) {
	if offset < VirtioHeaderLen {
		return 0, errors.New("tun: write offset smaller than the virtio-net header")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	g := &w.g
	g.plan(bufs, offset)
	// Everything written raw goes into w.batch, in order: the merged and
	// marked packets, then the rest when it is a single packet or several
	// the fallback could not merge (no two share a flow, or IPv4 UDP
	// without a checksum), each with the zero virtio-net header the
	// fallback would give it. The fallback's write(2) goes through the
	// runtime's system call bookkeeping, which wakes the runtime's
	// monitor thread (sysmon) from its idle sleep and, for a write that
	// runs the receiving stack longer than a sysmon tick, hands the P to
	// another thread: with request/response traffic (one packet per
	// batch) that was a wake-up and two task switches per packet, and on
	// a gateway receiving unmergeable UDP from many peers the same per
	// packet (rest_flows.go).
	batch := w.batch[:0]
	for _, i := range g.ours {
		batch = append(batch, bufs[i][offset-VirtioHeaderLen:])
	}
	var errs error
	total := 0
	switch {
	case len(g.rest) == 0:
	case len(g.rest) == 1 || w.ft.restFlowsDistinct(g.rest, offset):
		for i, p := range g.rest {
			b := p[offset-VirtioHeaderLen:]
			g.rest[i] = nil // drop the reference to the caller's buffer
			clear(b[:VirtioHeaderLen])
			batch = append(batch, b)
		}
	default:
		// Several packets the fallback merges: after this call's own,
		// which may belong to the same flows.
		n, err := w.writeRaw(batch)
		total += n
		clear(batch)
		batch = batch[:0]
		if err == os.ErrClosed {
			clear(g.rest)
			return total, err
		}
		errs = errors.Join(errs, err)
		n, err = fallback.Write(g.rest, offset)
		total += n
		if err != nil {
			errs = errors.Join(errs, err)
		}
		clear(g.rest) // drop the references to the caller's buffers
	}
	n, err := w.writeRaw(batch)
	total += n
	clear(batch) // drop the references to the caller's buffers
	w.batch = batch[:0]
	if err == os.ErrClosed {
		return total, err
	}
	return total, errors.Join(errs, err)
}
