package conn

// Kernel receive timestamps (SO_TIMESTAMPNS), turned on only while a caller
// needs to know how long datagrams waited in the socket's buffer (the
// device, while a handshake flood keeps it under load). Off, the kernel
// attaches no control message and the receive path parses nothing more.

import (
	"encoding/binary"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// timestampSpace is the aligned size of an SCM_TIMESTAMPNS control message
// (a 64-bit timespec).
const timestampSpace = (cmsgHdrLen + 16 + cmsgAlign - 1) &^ (cmsgAlign - 1)

var _ Timestamper = (*StdBind)(nil)

// OpenStamped is Open with receive functions that report each datagram's
// kernel receive timestamp (see Timestamper).
func (b *StdBind) OpenStamped(port uint16) ([]StampedReceiveFunc, uint16, error) {
	rss, actual, err := b.open(port)
	if err != nil {
		return nil, 0, err
	}
	fns := make([]StampedReceiveFunc, len(rss))
	for i, rs := range rss {
		fns[i] = rs.receiveStamped
	}
	return fns, actual, nil
}

// SetReceiveTimestamps turns SO_TIMESTAMPNS on or off on the open sockets
// (the 64-bit SO_TIMESTAMPNS_NEW where the kernel has it, 5.1 on). It is
// cheap enough to call at runtime (one setsockopt per socket) and safe
// while the sockets are being read.
func (b *StdBind) SetReceiveTimestamps(on bool) error {
	s := b.socks.Load()
	if s == nil {
		return nil
	}
	v := 0
	if on {
		v = 1
	}
	for _, u := range []*udpSocket{s.v4, s.v6} {
		if u == nil {
			continue
		}
		var serr error
		if err := u.rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_NEW, v)
			if serr != nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS_OLD, v)
			}
		}); err != nil {
			return nil // closed meanwhile
		}
		if serr != nil {
			return fmt.Errorf("conn: receive timestamps: %w", os.NewSyscallError("setsockopt SO_TIMESTAMPNS", serr))
		}
	}
	return nil
}

// parseTimestamp reads the data of an SCM_TIMESTAMPNS control message of
// type typ as Unix nanoseconds; 0 when it is not one.
func parseTimestamp(typ int32, data []byte) int64 {
	var sec, nsec int64
	switch {
	case len(data) >= 16 && (typ == unix.SO_TIMESTAMPNS_NEW || typ == unix.SO_TIMESTAMPNS_OLD):
		// __kernel_timespec, or the native timespec of a 64-bit kernel.
		sec = int64(binary.NativeEndian.Uint64(data[0:8]))
		nsec = int64(binary.NativeEndian.Uint64(data[8:16]))
	case len(data) >= 8 && typ == unix.SO_TIMESTAMPNS_OLD:
		// The native timespec of a 32-bit kernel.
		sec = int64(int32(binary.NativeEndian.Uint32(data[0:4])))
		nsec = int64(int32(binary.NativeEndian.Uint32(data[4:8])))
	default:
		return 0
	}
	return sec*1e9 + nsec
}
