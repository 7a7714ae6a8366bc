package server

// Routing between clients and the host side.
//
//	client packet -> data.Decrypt (primary, or the prepared/lame-duck key)
//	    -> ping / OCC exit -> source must be the client's pool address
//	       (IPv4, or its server-ipv6 address for IPv6)
//	    -> client-to-client and the destination is a client? encrypt to it
//	    -> else the UDP reader's TUN batch (AttachTUN; one device write per
//	       receive batch) or the rx queue -> ReadPacket
//	WritePacket -> destination pool address (IPv4 or IPv6) -> client -> encrypt -> send
//	WritePackets -> the same per packet into a batch -> runs of equal-size
//	    packets to one client become UDP_SEGMENT (GSO) messages -> one sendmmsg
//	ReadPackets <- the rx queue, everything already queued at once

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/ovpn/data"
)

// handleData decrypts a data packet of p and routes its payload: to
// another client, to sink when it is not nil (the UDP reader's batch for
// the attached TUN device), else to the rx queue. It reports whether the
// packet authenticated.
func (s *Server) handleData(p *peer, pkt []byte, sink *tunSink) bool {
	ch := p.data.Load()
	if ch == nil {
		s.stats.BadData.Add(1)
		return false
	}
	payload, kind, err := ch.Decrypt(pkt)
	if err != nil {
		s.stats.BadData.Add(1)
		return false
	}
	p.touch()
	switch kind {
	case data.KindPing, data.KindOCC:
		return true
	case data.KindExit:
		p.close("the client sent an exit notification")
		return true
	}
	src, dst, ok := ipAddrs(payload)
	if !ok || (src != p.vaddrLoad() && (!src.Is6() || src != p.vaddr6Load())) {
		s.stats.Spoofed.Add(1)
		return true
	}
	p.rxBytes.Add(uint64(len(payload)))
	if s.cfg.ClientToClient {
		s.mu.RLock()
		q := s.byVaddr[dst]
		s.mu.RUnlock()
		if q != nil {
			if q != p && q.sendData(payload) == nil {
				q.txBytes.Add(uint64(len(payload)))
			}
			return true
		}
	}
	if sink != nil {
		sink.add(s, payload)
		return true
	}
	s.deliver(payload)
	return true
}

// deliver queues a packet for ReadPacket, dropping it when the queue is
// full (like a NIC ring).
func (s *Server) deliver(payload []byte) {
	if !s.rx.Put(payload) {
		s.stats.RxFull.Add(1)
	}
}

// ipAddrs returns the source and destination of an IPv4 or IPv6 packet.
func ipAddrs(p []byte) (src, dst netip.Addr, ok bool) {
	if len(p) == 0 {
		return src, dst, false
	}
	switch p[0] >> 4 {
	case 4:
		return ipv4Addrs(p)
	case 6:
		if len(p) < 40 {
			return src, dst, false
		}
		return netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40])), true
	}
	return src, dst, false
}

// ipv4Addrs returns the source and destination of an IPv4 packet.
func ipv4Addrs(p []byte) (src, dst netip.Addr, ok bool) {
	if len(p) < 20 || p[0]>>4 != 4 {
		return src, dst, false
	}
	return netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20])), true
}

// ReadPacket reads one IP packet that a client sent to the host side
// into b. It returns ErrClosed after Close.
func (s *Server) ReadPacket(b []byte) (int, error) {
	n, ok := s.rx.Read(b, s.done)
	if !ok {
		return 0, ErrClosed
	}
	return n, nil
}

// WritePacket sends an IP packet from the host side to the client whose
// tunnel address is its destination. It may be called concurrently.
func (s *Server) WritePacket(pkt []byte) error {
	if len(pkt) > maxPkt-64 {
		return fmt.Errorf("server: packet of %d bytes too large", len(pkt))
	}
	_, dst, ok := ipAddrs(pkt)
	if !ok {
		s.stats.NoRoute.Add(1)
		return ErrNoRoute
	}
	s.mu.RLock()
	p := s.byVaddr[dst]
	s.mu.RUnlock()
	if p == nil {
		s.stats.NoRoute.Add(1)
		return ErrNoRoute
	}
	err := p.sendData(pkt)
	if err == nil {
		p.txBytes.Add(uint64(len(pkt)))
	}
	return err
}

// ReadPackets waits for at least one IP packet for the host side, then
// copies it and whatever else is already queued (up to len(bufs)) into
// bufs[i][offset:], setting sizes[i]. It returns ErrClosed after Close.
func (s *Server) ReadPackets(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, ok := s.rx.ReadBatch(bufs, sizes, offset, s.done)
	if !ok {
		return 0, ErrClosed
	}
	return n, nil
}

// maxWriteBatch is how many packets WritePackets encrypts before one
// sendmmsg.
const maxWriteBatch = 64

// Limits of one UDP_SEGMENT (GSO) message: the kernel takes at most 64
// segments and one UDP datagram's worth of bytes.
const (
	maxGSOSegments = 64
	maxGSOBytes    = 65000
)

// txBatch holds the buffers of one WritePackets call.
type txBatch struct {
	bufs [maxWriteBatch][]byte // grown to the largest packet seen
	segs [maxWriteBatch][]byte // encrypted packets, in order
	msgs [maxWriteBatch]ipv4.Message
	oob  [maxWriteBatch][]byte // UDP_SEGMENT cmsg space per message
}

// WritePackets sends host-side IP packets to the clients whose tunnel
// addresses are their destinations, like WritePacket for each, except
// that packets for UDP clients are encrypted into a batch and leave in
// one sendmmsg, consecutive equal-size packets to one client as a single
// UDP_SEGMENT (GSO) message where the kernel supports it. It returns the
// first error; the other packets are still sent. It may be called
// concurrently.
func (s *Server) WritePackets(pkts [][]byte) error {
	b := s.batches.Get().(*txBatch)
	defer s.batches.Put(b)
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	gso := s.gso.Load()
	n, m := 0, 0 // packets and messages in the batch
	var segSize, msgBytes int
	var lastAddr *net.UDPAddr
	flush := func() {
		if m == 0 {
			return
		}
		for i := range m {
			if len(b.msgs[i].Buffers) > 1 {
				b.msgs[i].OOB = putUDPSegment(b.oob[i][:0], len(b.msgs[i].Buffers[0]))
			} else {
				b.msgs[i].OOB = nil
			}
		}
		keep(s.writeBatch(b.msgs[:m]))
		clear(b.segs[:n])
		for i := range m {
			b.msgs[i].Buffers, b.msgs[i].Addr = nil, nil
		}
		n, m = 0, 0
		lastAddr = nil
	}
	now := time.Now().UnixNano()
	for _, pkt := range pkts {
		if len(pkt) > maxPkt-64 {
			keep(fmt.Errorf("server: packet of %d bytes too large", len(pkt)))
			continue
		}
		_, dst, ok := ipAddrs(pkt)
		var p *peer
		if ok {
			s.mu.RLock()
			p = s.byVaddr[dst]
			s.mu.RUnlock()
		}
		if p == nil {
			s.stats.NoRoute.Add(1)
			keep(ErrNoRoute)
			continue
		}
		if _, udp := p.tx.(udpTransport); !udp || s.ubatch == nil {
			if err := p.sendData(pkt); err != nil {
				keep(err)
			} else {
				p.txBytes.Add(uint64(len(pkt)))
			}
			continue
		}
		ch := p.data.Load()
		if ch == nil {
			keep(data.ErrNoKey)
			continue
		}
		need := data.Headroom + len(pkt) + data.Tailroom
		if cap(b.bufs[n]) < need {
			b.bufs[n] = make([]byte, max(need, 2048))
		}
		buf := b.bufs[n][:cap(b.bufs[n])]
		copy(buf[data.Headroom:], pkt)
		out, err := ch.Encrypt(buf, len(pkt))
		if err != nil {
			keep(err)
			continue
		}
		b.segs[n] = out
		addr := p.uaddr.Load()
		// Join the previous message when it goes to the same address, all
		// its segments so far have this one's size or more (only the last
		// may be shorter) and the limits allow.
		if cur := &b.msgs[max(m-1, 0)]; gso && m > 0 && addr == lastAddr && len(out) <= segSize && segSize < int(s.gsoLimit.Load()) &&
			len(cur.Buffers[len(cur.Buffers)-1]) == segSize && len(cur.Buffers) < maxGSOSegments && msgBytes+len(out) <= maxGSOBytes {
			cur.Buffers = b.segs[n-len(cur.Buffers) : n+1]
			msgBytes += len(out)
		} else {
			b.msgs[m].Buffers = b.segs[n : n+1]
			b.msgs[m].Addr = addr
			m++
			segSize, msgBytes, lastAddr = len(out), len(out), addr
		}
		n++
		p.txBytes.Add(uint64(len(pkt)))
		p.lastSend.Store(now)
		if n == maxWriteBatch {
			flush()
		}
	}
	flush()
	return first
}

// putUDPSegment appends a UDP_SEGMENT control message for segments of
// size bytes to b.
func putUDPSegment(b []byte, size int) []byte {
	space := unix.CmsgSpace(2)
	if cap(b) < space {
		b = make([]byte, 0, space)
	}
	b = b[:space]
	clear(b)
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(size))
	return b
}

// writeBatch sends msgs with as few sendmmsg calls as the kernel allows.
// A segmented message the kernel refuses (segments above the path MTU
// give EINVAL or EMSGSIZE, a device without checksum offload EIO) is sent
// as single datagrams instead, and segments of its size are not joined
// again.
func (s *Server) writeBatch(msgs []ipv4.Message) error {
	for len(msgs) > 0 {
		k, err := s.ubatch.WriteBatch(msgs, 0)
		if err == nil && k == 0 {
			err = fmt.Errorf("server: sendmmsg sent nothing")
		}
		if err != nil {
			m := &msgs[0]
			if len(m.Buffers) < 2 {
				return err
			}
			if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EMSGSIZE) && !errors.Is(err, unix.EIO) {
				return err
			}
			if size := int64(len(m.Buffers[0])); size < s.gsoLimit.Load() {
				s.gsoLimit.Store(size)
				s.log.Warn("UDP segmentation refused; sending datagrams singly", "size", size, "err", err)
			}
			single := make([]ipv4.Message, len(m.Buffers))
			for i := range single {
				single[i] = ipv4.Message{Buffers: m.Buffers[i : i+1], Addr: m.Addr}
			}
			if err := s.writeBatch(single); err != nil {
				return err
			}
			k = 1
		}
		msgs = msgs[k:]
	}
	return nil
}
