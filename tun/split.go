package tun

// Splitting what a TUN device with virtio-net headers hands out (the
// send-side counterpart of trusted_gro.go).
//
//	one read: virtio-net header + packet (a TSO/USO train up to 64 KiB)
//	  -> GSO_NONE: the packet as it is; with NEEDS_CSUM its transport
//	     checksum is completed (the field holds the pseudo-header sum)
//	  -> GSO TCPV4/TCPV6/UDP_L4: cut into segments of gso_size payload
//	     bytes, each with the train's headers made its own: IPv4 total
//	     length, identification (+1 per segment) and header checksum, or
//	     the IPv6 payload length; the TCP sequence number (CWR only on
//	     the first segment, FIN and PSH only on the last) or the UDP
//	     length; and a full transport checksum, which the peer needs
//
// The header's own lengths are checked against the packet, never trusted:
// hdr_len can cover a whole forwarded packet, so the transport header's
// length comes from the TCP data offset (or is 8 for UDP). Anything
// inconsistent is an error and nothing is handed out.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
)

const (
	virtioGSOUDPL4 = 5    // VIRTIO_NET_HDR_GSO_UDP_L4
	virtioGSOECN   = 0x80 // VIRTIO_NET_HDR_GSO_ECN: never asked for (no TUN_F_TSO_ECN)
	tcpFlagFIN     = 0x01
	tcpFlagCWR     = 0x80
	udpCsumOffset  = 6 // checksum field within the UDP header
)

// split turns one read from a TUN device (in: the virtio-net header, then
// the packet) into packets at bufs[i][offset:], sizes[i] long, and returns
// how many. It may modify in. A train with more segments than bufs gives
// ErrTooManySegments, and nothing.
func split(in []byte, bufs [][]byte, sizes []int, offset int) (int, error) {
	if len(in) < VirtioHeaderLen {
		return 0, fmt.Errorf("tun: read of %d bytes is shorter than the virtio-net header", len(in))
	}
	flags, gsoType := in[0], in[1]
	gsoSize := int(binary.NativeEndian.Uint16(in[4:6]))
	csumStart := int(binary.NativeEndian.Uint16(in[6:8]))
	csumOffset := int(binary.NativeEndian.Uint16(in[8:10]))
	pkt := in[VirtioHeaderLen:]
	if len(bufs) == 0 {
		return 0, ErrTooManySegments
	}

	if gsoType == virtioGSONone {
		if flags&virtioNeedsCsum != 0 {
			at := csumStart + csumOffset
			if at+2 > len(pkt) {
				return 0, fmt.Errorf("tun: checksum at %d+%d is past the packet's %d bytes", csumStart, csumOffset, len(pkt))
			}
			// The field holds the pseudo-header sum, so summing from
			// csum_start over it gives the whole checksum.
			binary.BigEndian.PutUint16(pkt[at:], finishSum(inetsum.Add(0, pkt[csumStart:])))
		}
		if offset+len(pkt) > len(bufs[0]) {
			return 0, fmt.Errorf("tun: packet of %d bytes does not fit a %d-byte buffer at offset %d", len(pkt), len(bufs[0]), offset)
		}
		sizes[0] = copy(bufs[0][offset:], pkt)
		return 1, nil
	}

	// A train: find its headers.
	if len(pkt) == 0 {
		return 0, errors.New("tun: empty GSO packet")
	}
	v6 := pkt[0]>>4 == 6
	var l4, l4Csum int
	switch gsoType &^ virtioGSOECN {
	case virtioGSOTCPv4, virtioGSOTCPv6:
		if v6 != (gsoType&^virtioGSOECN == virtioGSOTCPv6) {
			return 0, fmt.Errorf("tun: GSO type %d on an IPv%d packet", gsoType, pkt[0]>>4)
		}
		l4, l4Csum = 6, tcpCsumOffset
	case virtioGSOUDPL4:
		l4, l4Csum = 17, udpCsumOffset
	default:
		return 0, fmt.Errorf("tun: unsupported GSO type %d", gsoType)
	}
	iphLen := csumStart
	switch {
	case pkt[0]>>4 == 4:
		if iphLen < 20 || iphLen != int(pkt[0]&0xf)*4 {
			return 0, fmt.Errorf("tun: csum_start %d is not the IPv4 header's length", csumStart)
		}
	case v6:
		if iphLen < 40 {
			return 0, fmt.Errorf("tun: csum_start %d is inside the IPv6 header", csumStart)
		}
	default:
		return 0, fmt.Errorf("tun: IP version %d in a GSO packet", pkt[0]>>4)
	}
	if csumOffset != l4Csum {
		return 0, fmt.Errorf("tun: csum_offset %d, want %d", csumOffset, l4Csum)
	}
	thLen := 8
	if l4 == 6 {
		if len(pkt) < iphLen+20 {
			return 0, fmt.Errorf("tun: GSO packet of %d bytes ends inside its TCP header", len(pkt))
		}
		thLen = int(pkt[iphLen+12]>>4) * 4
		if thLen < 20 {
			return 0, fmt.Errorf("tun: TCP header length %d", thLen)
		}
	}
	hdrLen := iphLen + thLen
	if hdrLen > len(pkt) {
		return 0, fmt.Errorf("tun: GSO packet of %d bytes is shorter than its %d header bytes", len(pkt), hdrLen)
	}
	if gsoSize == 0 {
		return 0, errors.New("tun: GSO packet with segment size 0")
	}
	payload := len(pkt) - hdrLen
	n := max(1, (payload+gsoSize-1)/gsoSize)
	if n > len(bufs) {
		return 0, ErrTooManySegments
	}
	for i := 0; i < n; i++ {
		if offset+hdrLen+min(gsoSize, payload-i*gsoSize) > len(bufs[i]) {
			return 0, fmt.Errorf("tun: segment of %d bytes does not fit a %d-byte buffer at offset %d", hdrLen+gsoSize, len(bufs[i]), offset)
		}
	}

	// The pseudo-header's addresses and protocol, summed once.
	ps := addrSum(pkt, v6) + uint64(l4)
	var id uint16
	var seq uint32
	if !v6 {
		id = binary.BigEndian.Uint16(pkt[4:6])
	}
	if l4 == 6 {
		seq = binary.BigEndian.Uint32(pkt[iphLen+4:])
	}
	for i := 0; i < n; i++ {
		from := hdrLen + i*gsoSize
		to := min(from+gsoSize, len(pkt))
		out := bufs[i][offset : offset+hdrLen+to-from]
		copy(out, pkt[:hdrLen])
		copy(out[hdrLen:], pkt[from:to])
		if v6 {
			binary.BigEndian.PutUint16(out[4:6], uint16(len(out)-40))
		} else {
			binary.BigEndian.PutUint16(out[2:4], uint16(len(out)))
			binary.BigEndian.PutUint16(out[4:6], id+uint16(i))
			out[10], out[11] = 0, 0
			binary.BigEndian.PutUint16(out[10:12], inetsum.Checksum(out[:iphLen]))
		}
		th := out[iphLen:]
		if l4 == 6 {
			binary.BigEndian.PutUint32(th[4:8], seq+uint32(i*gsoSize))
			if i > 0 {
				th[tcpFlagsOffset] &^= tcpFlagCWR
			}
			if i < n-1 {
				th[tcpFlagsOffset] &^= tcpFlagFIN | tcpFlagPSH
			}
		} else {
			binary.BigEndian.PutUint16(th[4:6], uint16(len(th)))
		}
		th[l4Csum], th[l4Csum+1] = 0, 0
		binary.BigEndian.PutUint16(th[l4Csum:], finishSum(inetsum.Add(ps+uint64(len(th)), th)))
		sizes[i] = len(out)
	}
	return n, nil
}

// finishSum is the checksum field for a transport sum: its complement,
// except that zero is sent as 0xffff, as the kernel does, since a UDP
// checksum of zero means none (the two are the same to TCP).
func finishSum(acc uint64) uint16 {
	if c := ^inetsum.Fold(acc); c != 0 {
		return c
	}
	return 0xffff
}
