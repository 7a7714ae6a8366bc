package tun

// Merging authenticated TCP segments on their way into a TUN device
// (receive-side GRO), without verifying their checksums.
//
//	Write(bufs) on a Linux TUN device with virtio-net headers (linux.go):
//	  -> each packet classified: TCP over IPv4 (not a fragment) or over
//	     IPv6 (TCP right after the fixed header) is ours; anything else
//	     goes to golang.zx2c4.com/wireguard/tun's Write unchanged
//	  -> a TCP segment with payload, flags ACK or ACK|PSH and (over IPv4)
//	     no IP options is appended
//	     to the open run of its flow when the kernel's own GRO would
//	     merge the two: same addresses, ports, acknowledgment, window and
//	     options; same TOS, TTL and DF (IPv4) or first word and hop limit
//	     (IPv6); the next sequence number; not past a PSH or a short
//	     segment; room in the run's buffer and at most 64 KiB
//	  -> every TCP packet is written once, as CHECKSUM_PARTIAL: its
//	     checksum field holds the pseudo-header sum and its virtio-net
//	     header says where the checksum goes; a merged run also carries
//	     GSO TCPV4/TCPV6 and its segment size
//
// UDP takes the same path when the device takes UDP segmentation offload
// (trustedGRO.udp, TUN_F_USO4/USO6): a datagram of a flow (same
// addresses and ports; same TOS, TTL and DF, or first word and hop
// limit) is appended to its flow's open run when it is no longer than the
// run's first (the segment size) and the run has room (64 KiB, at most
// udpMaxSegments); a shorter one ends the run, as UDP GSO requires. IPv4
// datagrams without a checksum are not ours (the fallback writes them
// as they are). Every UDP datagram written here is CHECKSUM_PARTIAL too;
// a merged run carries GSO UDP_L4.
//
// Why no checksum is verified: the packets written here were just opened
// by the tunnel's AEAD, which proves they are what the peer sent. The
// kernel's WireGuard marks such packets CHECKSUM_UNNECESSARY for the same
// reason; the wireguard tun package instead sums every segment before it
// merges it. Marked CHECKSUM_PARTIAL, a packet delivered locally is
// accepted as the peer sent it, and a packet forwarded on leaves with a
// checksum computed from its contents. Like the wireguard tun package, a
// run only grows in place: a head packet whose buffer has no room is
// written unmerged, never copied.

import (
	"encoding/binary"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
)

// virtio-net header fields (include/uapi/linux/virtio_net.h), in the
// host's byte order as the TUN device uses them.
const (
	virtioNeedsCsum = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
	virtioGSONone   = 0 // VIRTIO_NET_HDR_GSO_NONE
	virtioGSOTCPv4  = 1 // VIRTIO_NET_HDR_GSO_TCPV4
	virtioGSOTCPv6  = 4 // VIRTIO_NET_HDR_GSO_TCPV6
)

const (
	tcpFlagsOffset = 13   // flags byte within the TCP header
	tcpCsumOffset  = 16   // checksum field within the TCP header
	tcpFlagACK     = 0x10 // acknowledgment
	tcpFlagPSH     = 0x08 // push: ends a run
	udpHeaderLen   = 8
	// udpMaxSegments bounds a UDP run: the kernel refuses to segment
	// more (UDP_MAX_SEGMENTS).
	udpMaxSegments = 64
	maxIPPacket    = 1<<16 - 1
	// maxOpenRuns bounds the flows one Write merges at the same time; a
	// flow beyond it is written unmerged.
	maxOpenRuns = 16
)

// tcpSeg is what classify (or classifyUDP) learns about one TCP (or UDP)
// packet.
type tcpSeg struct {
	v6        bool
	udp       bool // a UDP datagram (classifyUDP); tcphLen is then udpHeaderLen
	iphLen    int
	tcphLen   int
	payload   int
	seq       uint32
	mergeable bool // flags ACK or ACK|PSH, with payload
	psh       bool
	gso       int // a run's head once others merged into it: the segment size; else 0
}

// classify reports whether pkt is a TCP packet this path writes, and its
// shape. Truncated, inconsistent or fragmented packets are not ours.
func classify(pkt []byte) (s tcpSeg, ok bool) {
	if len(pkt) < 20 {
		return s, false
	}
	switch pkt[0] >> 4 {
	case 4:
		ihl := int(pkt[0]&0xf) * 4
		if ihl < 20 || len(pkt) < ihl+20 || pkt[9] != 6 {
			return s, false
		}
		if int(binary.BigEndian.Uint16(pkt[2:4])) != len(pkt) {
			return s, false
		}
		if binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 {
			return s, false // MF or a fragment offset
		}
		s.iphLen = ihl
	case 6:
		if len(pkt) < 60 || pkt[6] != 6 {
			return s, false
		}
		if int(binary.BigEndian.Uint16(pkt[4:6]))+40 != len(pkt) {
			return s, false
		}
		s.v6 = true
		s.iphLen = 40
	default:
		return s, false
	}
	th := pkt[s.iphLen:]
	s.tcphLen = int(th[12]>>4) * 4
	if s.tcphLen < 20 || s.tcphLen > len(th) {
		return s, false
	}
	s.payload = len(th) - s.tcphLen
	s.seq = binary.BigEndian.Uint32(th[4:8])
	switch th[tcpFlagsOffset] {
	case tcpFlagACK:
		s.mergeable = s.payload > 0
	case tcpFlagACK | tcpFlagPSH:
		s.mergeable = s.payload > 0
		s.psh = true
	}
	if !s.v6 && s.iphLen != 20 {
		s.mergeable = false // the kernel's GRO does not merge IPv4 options either
	}
	return s, true
}

// classifyUDP reports whether pkt is a UDP datagram this path writes
// (when the device takes UDP segmentation offload), and its shape:
// IPv4 without options and not a fragment, or IPv6 with UDP right after
// the fixed header; lengths consistent; a checksum (IPv4 UDP without one
// is left to the fallback, which writes it unchanged).
func classifyUDP(pkt []byte) (s tcpSeg, ok bool) {
	switch {
	case len(pkt) >= 28 && pkt[0] == 0x45 && pkt[9] == 17:
		if int(binary.BigEndian.Uint16(pkt[2:4])) != len(pkt) || binary.BigEndian.Uint16(pkt[6:8])&0x3fff != 0 {
			return s, false
		}
		s.iphLen = 20
	case len(pkt) >= 48 && pkt[0]>>4 == 6 && pkt[6] == 17:
		if int(binary.BigEndian.Uint16(pkt[4:6]))+40 != len(pkt) {
			return s, false
		}
		s.v6, s.iphLen = true, 40
	default:
		return s, false
	}
	uh := pkt[s.iphLen:]
	if int(binary.BigEndian.Uint16(uh[4:6])) != len(uh) || binary.BigEndian.Uint16(uh[6:8]) == 0 {
		return s, false
	}
	s.udp, s.tcphLen = true, udpHeaderLen
	s.payload = len(uh) - udpHeaderLen
	s.mergeable = s.payload > 0
	return s, true
}

// groRun is one flow's run being merged into the packet bufs[head].
type groRun struct {
	head    int    // index of the run's first packet in bufs
	segs    int    // segments in the run (UDP's bound)
	gso     int    // payload of the first segment: the segment size
	nextSeq uint32 // sequence number the next segment must carry
	closed  bool   // after a PSH or a short segment
}

// trustedGRO is the state of one Write. It is reused from Write to Write
// by one writer at a time (linux.go holds the lock).
type trustedGRO struct {
	// udp says the device takes UDP segmentation offload: UDP is merged
	// here too. Set once, before the first plan.
	udp  bool
	runs []groRun
	segs []tcpSeg // per packet of bufs; valid where ours
	ours []int    // indexes into bufs of the packets written here, in order
	rest [][]byte // packets for the fallback writer, in order
}

// sameFlow reports whether a and b (TCP or UDP packets shaped as s) would
// be merged by the kernel's GRO as far as their headers go.
func sameFlow(a, b []byte, s *tcpSeg) bool {
	if s.v6 {
		// Version, traffic class, flow label; next header, hop limit;
		// addresses.
		if binary.BigEndian.Uint32(a[0:4]) != binary.BigEndian.Uint32(b[0:4]) ||
			a[7] != b[7] || string(a[8:40]) != string(b[8:40]) {
			return false
		}
	} else {
		// TOS; DF and the reserved bit; TTL; addresses (no options:
		// classify leaves those unmerged).
		if a[1] != b[1] || a[6]>>5 != b[6]>>5 || a[8] != b[8] || string(a[12:20]) != string(b[12:20]) {
			return false
		}
	}
	ta, tb := a[s.iphLen:], b[s.iphLen:]
	if s.udp {
		return string(ta[0:4]) == string(tb[0:4]) // ports
	}
	// Ports; acknowledgment; data offset (flags are checked by the
	// caller); window; then the options. Urgent pointer and checksum are
	// not compared: merged segments carry ACK or ACK|PSH only, and the
	// checksum is recomputed.
	return string(ta[0:4]) == string(tb[0:4]) &&
		string(ta[8:13]) == string(tb[8:13]) &&
		string(ta[14:16]) == string(tb[14:16]) &&
		string(ta[20:s.tcphLen]) == string(tb[20:s.tcphLen])
}

// plan merges what it can in bufs (packets at offset), fills in the
// virtio-net header in the vnetLen bytes before offset of every packet
// it keeps, and records them in g.ours; every other packet lands in
// g.rest.
func (g *trustedGRO) plan(bufs [][]byte, offset int) {
	g.runs, g.ours, g.rest = g.runs[:0], g.ours[:0], g.rest[:0]
	if cap(g.segs) < len(bufs) {
		g.segs = make([]tcpSeg, len(bufs))
	}
	g.segs = g.segs[:len(bufs)]
	for i, b := range bufs {
		pkt := b[offset:]
		s, ok := classify(pkt)
		if !ok && g.udp {
			s, ok = classifyUDP(pkt)
		}
		if !ok {
			g.rest = append(g.rest, b)
			continue
		}
		g.segs[i] = s
		if s.mergeable && g.appendTo(bufs, offset, i, &s) {
			continue
		}
		g.ours = append(g.ours, i)
		if s.mergeable && !s.psh {
			g.open(i, &s)
		}
	}
	for _, i := range g.ours {
		finish(bufs[i], offset, &g.segs[i])
	}
}

// appendTo appends packet i to its flow's open run if it can; when the
// flow's run cannot take it, that run is closed.
func (g *trustedGRO) appendTo(bufs [][]byte, offset, i int, s *tcpSeg) bool {
	pkt := bufs[i][offset:]
	for j := range g.runs {
		r := &g.runs[j]
		if r.closed {
			continue
		}
		head := bufs[r.head][offset:]
		hs := &g.segs[r.head]
		if hs.udp != s.udp || hs.v6 != s.v6 || hs.iphLen != s.iphLen || hs.tcphLen != s.tcphLen || !sameFlow(head, pkt, s) {
			continue
		}
		n := len(head)
		if (!s.udp && s.seq != r.nextSeq) || (s.udp && r.segs >= udpMaxSegments) || s.payload > r.gso ||
			n+s.payload > maxIPPacket || cap(bufs[r.head]) < offset+n+s.payload {
			r.closed = true
			return false
		}
		copy(head[n:n+s.payload], pkt[s.iphLen+s.tcphLen:])
		bufs[r.head] = bufs[r.head][:offset+n+s.payload]
		hs.gso = r.gso
		r.segs++
		r.nextSeq += uint32(s.payload)
		if s.psh {
			head[s.iphLen+tcpFlagsOffset] |= tcpFlagPSH
			r.closed = true
		}
		if s.payload < r.gso {
			r.closed = true
		}
		return true
	}
	return false
}

// open starts a run at packet i, replacing a closed run if the table is
// full.
func (g *trustedGRO) open(i int, s *tcpSeg) {
	r := groRun{head: i, segs: 1, gso: s.payload, nextSeq: s.seq + uint32(s.payload)}
	if len(g.runs) < maxOpenRuns {
		g.runs = append(g.runs, r)
		return
	}
	for j := range g.runs {
		if g.runs[j].closed {
			g.runs[j] = r
			return
		}
	}
}

// finish fixes up a packet this path writes: lengths (and the IPv4 header
// checksum) after a merge, the pseudo-header sum in the TCP (or UDP)
// checksum field, and the virtio-net header before offset (GSO when s.gso
// is set).
func finish(b []byte, offset int, s *tcpSeg) {
	pkt := b[offset:]
	gso := s.gso
	if gso > 0 {
		if s.v6 {
			binary.BigEndian.PutUint16(pkt[4:6], uint16(len(pkt)-40))
		} else {
			binary.BigEndian.PutUint16(pkt[2:4], uint16(len(pkt)))
			pkt[10], pkt[11] = 0, 0
			binary.BigEndian.PutUint16(pkt[10:12], inetsum.Checksum(pkt[:s.iphLen]))
		}
	}
	proto, csumOffset := uint64(6), tcpCsumOffset
	if s.udp {
		proto, csumOffset = 17, udpCsumOffset
		binary.BigEndian.PutUint16(pkt[s.iphLen+4:], uint16(len(pkt)-s.iphLen)) // the run's length
	}
	ps := addrSum(pkt, s.v6) + proto + uint64(len(pkt)-s.iphLen)
	binary.BigEndian.PutUint16(pkt[s.iphLen+csumOffset:], inetsum.Fold(ps))

	h := b[offset-VirtioHeaderLen : offset]
	h[0] = virtioNeedsCsum
	h[1] = virtioGSONone
	binary.NativeEndian.PutUint16(h[2:4], uint16(s.iphLen+s.tcphLen)) // hdr_len
	binary.NativeEndian.PutUint16(h[4:6], uint16(gso))                // gso_size
	binary.NativeEndian.PutUint16(h[6:8], uint16(s.iphLen))           // csum_start
	binary.NativeEndian.PutUint16(h[8:10], uint16(csumOffset))        // csum_offset
	switch {
	case gso > 0 && s.udp:
		h[1] = virtioGSOUDPL4
	case gso > 0:
		h[1] = virtioGSOTCPv4
		if s.v6 {
			h[1] = virtioGSOTCPv6
		}
	}
}

// addrSum is the part of a transport pseudo-header sum that comes from
// the IP header: the source and destination addresses of pkt.
func addrSum(pkt []byte, v6 bool) uint64 {
	if v6 {
		return inetsum.Add(0, pkt[8:40])
	}
	return inetsum.Add(0, pkt[12:20])
}
