package device

// ICMP errors for packets the device cannot send: a packet read from the
// TUN device whose destination is in no peer's allowed IPs, or whose peer
// has no endpoint, is answered with an ICMP "host unreachable" (ICMPv6
// "address unreachable") written back into the TUN device, as the kernel's
// WireGuard does (for the second case the kernel returns -EDESTADDRREQ
// from wg_xmit, then sends the same error). The sender sees the error at
// once instead of waiting for a timeout.
//
// The error's source address is the unreachable destination: the device
// has no address of its own on the interface it can know of (the address
// belongs to the interface's namespace), and an error from the destination
// passes the reverse-path check of the interface that receives it (the
// destination is routed through it). When the kernel NATed the offending
// packet on its way into the tunnel, its connection tracking rewrites the
// error back towards the original sender (RELATED), so the error follows
// the right route. The kernel's own error to a sender on the same host
// comes from the sender's address (the route back to a local address
// picks it); written into a TUN device, an IPv4 packet from a local
// address is a martian and dropped, so that choice is not open here
// (internal/testkit/e2e TestICMPErrorSourceThroughTUN; docs/security.md,
// "Still open").
//
// No error answers an ICMP error, a fragment other than the first, or a
// packet from or to a multicast, broadcast or unspecified address. The
// errors are written by the TUN reader only, from its own buffer, and
// limited to icmpBurst at once and icmpPerSecond on average: nothing is
// allocated or locked per packet.

import (
	"encoding/binary"
	"time"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
	"github.com/wirelane/wirelane/tun"
)

const (
	// icmpPerSecond and icmpBurst bound the ICMP errors a device writes
	// (the kernel's own limit is 1000 a second with a burst of 50).
	icmpPerSecond = 1000
	icmpBurst     = 50
	// icmp4Max and icmp6Max are the largest errors (RFC 1812 4.3.2.3,
	// RFC 4443 2.4 (c)): as much of the offending packet as fits.
	icmp4Max = 576
	icmp6Max = 1280
)

// icmpErrors is the TUN reader's ICMP error writer. Only the TUN reader
// goroutine uses it (no lock).
type icmpErrors struct {
	buf    []byte   // tun.Offset + icmp6Max
	bufs   [][]byte // one element, over buf
	tokens float64  // errors that may be written now
	last   time.Time
}

func newICMPErrors() *icmpErrors {
	e := &icmpErrors{buf: make([]byte, tun.Offset+icmp6Max), tokens: icmpBurst}
	e.bufs = [][]byte{nil}
	return e
}

// allow takes one token, refilled at icmpPerSecond up to icmpBurst.
func (e *icmpErrors) allow(now time.Time) bool {
	if !e.last.IsZero() {
		e.tokens += now.Sub(e.last).Seconds() * icmpPerSecond
		if e.tokens > icmpBurst {
			e.tokens = icmpBurst
		}
	}
	e.last = now
	if e.tokens < 1 {
		return false
	}
	e.tokens--
	return true
}

// unreachable returns the ICMP error answering pkt, built in e's buffer at
// tun.Offset (the returned slice starts at the buffer's beginning), or nil
// when pkt gets no error.
func (e *icmpErrors) unreachable(pkt []byte) []byte {
	var n int
	switch {
	case len(pkt) >= 20 && pkt[0]>>4 == 4:
		n = unreachable4(e.buf[tun.Offset:], pkt)
	case len(pkt) >= 40 && pkt[0]>>4 == 6:
		n = unreachable6(e.buf[tun.Offset:], pkt)
	}
	if n == 0 {
		return nil
	}
	return e.buf[:tun.Offset+n]
}

// unreachable4 writes into out the ICMP host unreachable answering the
// IPv4 packet pkt and returns its length, or 0 when none is due.
func unreachable4(out, pkt []byte) int {
	ihl := int(pkt[0]&0x0f) * 4
	if ihl < 20 || ihl > len(pkt) {
		return 0
	}
	if binary.BigEndian.Uint16(pkt[6:8])&0x1fff != 0 {
		return 0 // not the first fragment
	}
	src, dst := pkt[12:16], pkt[16:20]
	if !unicast4(src) || !unicast4(dst) {
		return 0
	}
	if pkt[9] == 1 { // ICMP: only informational messages get an error
		if len(pkt) < ihl+1 {
			return 0
		}
		switch pkt[ihl] {
		case 0, 8, 13, 14, 15, 16, 17, 18:
		default:
			return 0
		}
	}
	if tl := int(binary.BigEndian.Uint16(pkt[2:4])); tl >= ihl && tl < len(pkt) {
		pkt = pkt[:tl] // TUN reads can carry nothing past the total length, but be sure
	}
	quoted := min(len(pkt), icmp4Max-28, len(out)-28)
	n := 28 + quoted
	h := out[:n]
	h[0], h[1] = 0x45, 0
	binary.BigEndian.PutUint16(h[2:4], uint16(n))
	binary.BigEndian.PutUint32(h[4:8], 0) // id 0, no flags
	h[8], h[9] = 64, 1
	h[10], h[11] = 0, 0
	copy(h[12:16], dst)
	copy(h[16:20], src)
	binary.BigEndian.PutUint16(h[10:12], inetsum.Checksum(h[:20]))
	m := h[20:]
	m[0], m[1] = 3, 1 // destination unreachable, host unreachable
	m[2], m[3] = 0, 0
	binary.BigEndian.PutUint32(m[4:8], 0)
	copy(m[8:], pkt[:quoted])
	binary.BigEndian.PutUint16(m[2:4], inetsum.Checksum(m))
	return n
}

// unicast4 reports whether a is neither unspecified, nor limited
// broadcast, nor multicast (class D) or reserved (class E).
func unicast4(a []byte) bool {
	return a[0] != 0 && a[0] < 224
}

// unreachable6 writes into out the ICMPv6 address unreachable answering
// the IPv6 packet pkt and returns its length, or 0 when none is due.
func unreachable6(out, pkt []byte) int {
	src, dst := pkt[8:24], pkt[24:40]
	if !unicast6(src) || !unicast6(dst) {
		return 0
	}
	// An ICMPv6 error right after the fixed header gets no error (errors
	// are types 0 to 127); one behind extension headers is not looked for.
	if pkt[6] == 58 && (len(pkt) < 41 || pkt[40] < 128) {
		return 0
	}
	if pl := 40 + int(binary.BigEndian.Uint16(pkt[4:6])); pl < len(pkt) {
		pkt = pkt[:pl]
	}
	quoted := min(len(pkt), icmp6Max-48, len(out)-48)
	n := 48 + quoted
	h := out[:n]
	binary.BigEndian.PutUint32(h[0:4], 6<<28)
	binary.BigEndian.PutUint16(h[4:6], uint16(n-40))
	h[6], h[7] = 58, 64
	copy(h[8:24], dst)
	copy(h[24:40], src)
	m := h[40:]
	m[0], m[1] = 1, 3 // destination unreachable, address unreachable
	m[2], m[3] = 0, 0
	binary.BigEndian.PutUint32(m[4:8], 0)
	copy(m[8:], pkt[:quoted])
	// Pseudo-header: addresses, upper-layer length, next header.
	acc := inetsum.Add(0, h[8:40])
	var ph [8]byte
	binary.BigEndian.PutUint32(ph[0:4], uint32(len(m)))
	ph[7] = 58
	acc = inetsum.Add(acc, ph[:])
	acc = inetsum.Add(acc, m)
	binary.BigEndian.PutUint16(m[2:4], ^inetsum.Fold(acc))
	return n
}

// unicast6 reports whether a is neither unspecified nor multicast.
func unicast6(a []byte) bool {
	if a[0] == 0xff {
		return false
	}
	for _, b := range a {
		if b != 0 {
			return true
		}
	}
	return false
}

// sendUnreachable writes the ICMP error answering pkt into the TUN device,
// within the rate limit. Called by the TUN reader only.
func (d *Device) sendUnreachable(e *icmpErrors, pkt []byte) {
	b := e.unreachable(pkt)
	if b == nil || !e.allow(d.clock.Now()) {
		return
	}
	e.bufs[0] = b
	if _, err := d.tun.Write(e.bufs, tun.Offset); err != nil {
		d.log.Debug("TUN write of an ICMP error failed", "err", err)
	}
}
