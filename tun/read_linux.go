//go:build linux

package tun

import (
	"sync"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// rawReader reads a TUN device that carries virtio-net headers itself:
// one raw read(2) into its own buffer (rawio_linux.go), then split
// (split.go). The wireguard tun package's Read goes through the
// scheduler's system-call path; with it, the other raw calls left sysmon
// waking at every read. Counted over 4 s of one TCP stream through
// namespaces, the daemon's task switches halved once this read was raw.
//
// What the tun package's Read also does and this one does not: return the
// errors of its netlink listener goroutine. Events still arrive.
type rawReader struct {
	batch int // the device's batch size; immutable

	mu  sync.Mutex // serializes Reads; guards the fields below
	io  *rawIO
	buf []byte // virtio-net header and packet: one whole train
}

// newRawReader returns a reader for d, or nil when d's file does not
// carry virtio-net headers (then d's own Read is all there is).
func newRawReader(d wgtun.Device) *rawReader {
	io := newRawIO(d, unix.SYS_READ)
	if io == nil {
		return nil
	}
	return &rawReader{batch: d.BatchSize(), io: io, buf: make([]byte, VirtioHeaderLen+maxIPPacket)}
}

// Read reads one packet or train and splits it into bufs: the tun
// package's Device.Read contract.
func (r *rawReader) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.io.do(r.buf)
	if err != nil {
		return 0, err
	}
	return split(r.buf[:n], bufs, sizes, offset)
}

// BatchSize is the underlying device's.
func (r *rawReader) BatchSize() int { return r.batch }
