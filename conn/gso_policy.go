package conn

// The one policy for a datagram the kernel refused on send, shared by
// every user of StdBind (WireGuard peers, the OpenVPN client and server):
//
//	segmented, EIO            the device cannot checksum segments: GSO off
//	                          for the bind, the rest resent unsegmented
//	segmented, EMSGSIZE       segments of this size pass the path MTU:
//	                          that size and larger go singly from now on
//	segmented, EINVAL         with a sticky source: the source is suspected
//	                          first (below); without one: as EMSGSIZE
//	sticky source, EINVAL,    the source is gone: the rest of the batch
//	ENODEV, EADDRNOTAVAIL,    goes without it and the source-invalid hooks
//	ENETUNREACH               run once
//	single, EMSGSIZE          that datagram is skipped and reported; the
//	                          rest go on
//	anything else             the error is returned
//
// A sticky EINVAL that was really the segmentation costs one extra
// attempt: the resend without the source is refused again, now without
// one, and the size limit applies.

import (
	"math"

	"golang.org/x/sys/unix"
)

// noSegLimit is StdBind.segMax while the kernel has refused no segment
// size.
const noSegLimit = math.MaxInt64

// refusal is what the send path does about one refused message.
type refusal int

const (
	refuseFail    refusal = iota // return the error
	refuseGSOOff                 // GSO off for the bind; resend the rest
	refuseSegSize                // segments of this size or more go singly; resend
	refuseSource                 // resend the rest without the sticky source; run the hooks
	refuseSkip                   // skip this one datagram; send the rest
)

// classifyRefusal applies the policy to errno e for a message that was
// segmented (UDP_SEGMENT) or not and carried a sticky source or not.
func classifyRefusal(e unix.Errno, segmented, sticky bool) refusal {
	switch {
	case segmented && e == unix.EIO:
		return refuseGSOOff
	case segmented && e == unix.EMSGSIZE, segmented && e == unix.EINVAL && !sticky:
		return refuseSegSize
	case sticky && isSourceError(e):
		return refuseSource
	case e == unix.EMSGSIZE:
		return refuseSkip
	}
	return refuseFail
}

// isSourceError reports whether the kernel may have refused a datagram
// because of its sticky source (address gone, interface gone, no route
// from it).
func isSourceError(e unix.Errno) bool {
	return e == unix.EINVAL || e == unix.ENODEV || e == unix.EADDRNOTAVAIL || e == unix.ENETUNREACH
}

// lowerSegMax makes segments of size bytes or more go singly from now on.
// Only the refusing sender's goroutine stores; a lost race between two
// refusals only keeps the higher of two limits until the next refusal.
func (b *StdBind) lowerSegMax(size int64) {
	if size < b.segMax.Load() {
		b.segMax.Store(size)
	}
}
