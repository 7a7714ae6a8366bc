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
//	WritePackets -> the same per packet into a batch, each with its client's
//	    borrowed route -> conn.StdBind.SendEach (runs of equal-size packets
//	    to one client become UDP_SEGMENT messages; one sendmmsg); a run to
//	    one TCP client -> one framed writev (wire.TCPWriter.WriteBatch)
//	ReadPackets <- the rx queue, everything already queued at once

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/internal/sys/mono"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/tun"
)

// handleData decrypts a data packet of p and routes its payload: to
// another client, to sink when it is not nil (the UDP reader's batch for
// the attached TUN device), else to the rx queue. It reports whether the
// packet authenticated.
func (s *Server) handleData(p *peer, pkt []byte, sink *tun.BatchWriter) bool {
	ch := p.data.Load()
	if ch == nil {
		s.stats.BadData.Add(1)
		return false
	}
	payload, kind, err := ch.Decrypt(pkt)
	if err != nil {
		if errors.Is(err, data.ErrCompressed) || errors.Is(err, data.ErrDecompress) {
			s.dropCompressed(p, err)
			return true
		}
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
	if !ok || (src != p.vaddrLoad() && (!src.Is6() || src != p.vaddr6Load()) && !p.ownsSource(src)) {
		s.stats.Spoofed.Add(1)
		return true
	}
	p.rxBytes.Add(uint64(len(payload)))
	if s.live.Load().cfg.ClientToClient { // one atomic load
		s.mu.RLock()
		q := s.routeLocked(dst)
		s.mu.RUnlock()
		if q != nil {
			if q != p && q.sendData(payload) == nil {
				q.txBytes.Add(uint64(len(payload)))
			}
			return true
		}
	}
	if sink != nil {
		if sink.Add(payload) != nil {
			s.stats.TUNErrors.Add(1)
		}
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
	p := s.routeLocked(dst)
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
// send (at most conn.IdealBatchSize).
const maxWriteBatch = 64

// txBatch holds the buffers of one WritePackets call.
type txBatch struct {
	bufs   [maxWriteBatch][]byte      // send buffers, grown by data.Channel.EncryptInto
	segs   [maxWriteBatch][]byte      // encrypted packets, in order
	routes [maxWriteBatch]*conn.Route // segs[i]'s client route, borrowed for this batch

	// A run of packets to one TCP client, sent with one writev.
	tbufs [maxWriteBatch][]byte // the same for the TCP run
	tsegs [maxWriteBatch][]byte // framed packets: sendHeadroom bytes, then the packet
	tpeer *peer                 // the client of tsegs
}

// WritePackets sends host-side IP packets to the clients whose tunnel
// addresses are their destinations, like WritePacket for each, except
// that packets for UDP clients are encrypted into a batch and leave in
// one conn.StdBind.SendEach: one sendmmsg, consecutive equal-size packets
// to one client as a single UDP_SEGMENT (GSO) message where the kernel
// takes it (the transport's one GSO policy). A run of packets to one TCP
// client is framed into one writev. It returns the first error; the other
// packets are still sent. It may be called concurrently.
func (s *Server) WritePackets(pkts [][]byte) error {
	b := s.batches.Get().(*txBatch)
	defer s.batches.Put(b)
	var first error
	keep := func(err error) {
		if first == nil {
			first = err
		}
	}
	now := mono.Now()
	n := 0 // packets in the batch
	flush := func() {
		if n == 0 {
			return
		}
		if err := s.bind.SendEach(b.segs[:n], b.routes[:n]); err != nil {
			s.stats.SocketSendErrors.Add(1)
			keep(err)
		}
		clear(b.segs[:n])
		clear(b.routes[:n])
		n = 0
	}
	m, mBytes := 0, 0 // packets and payload bytes in the TCP run
	flushTCP := func() {
		if m == 0 {
			return
		}
		if err := b.tpeer.tx.(*tcpTransport).w.WriteBatch(b.tsegs[:m]); err != nil {
			keep(err)
		} else {
			b.tpeer.txBytes.Add(uint64(mBytes))
			b.tpeer.lastSend.Store(now)
		}
		clear(b.tsegs[:m])
		b.tpeer, m, mBytes = nil, 0, 0
	}
	// The client of the previous packet: a batch from the TUN reader is
	// mostly runs to one destination (the segments of one TSO train), so
	// a run takes the lock and the lookup once.
	var lastDst netip.Addr
	var last *peer
	for _, pkt := range pkts {
		if len(pkt) > maxPkt-64 {
			keep(fmt.Errorf("server: packet of %d bytes too large", len(pkt)))
			continue
		}
		_, dst, ok := ipAddrs(pkt)
		var p *peer
		switch {
		case !ok:
		case last != nil && dst == lastDst:
			p = last
		default:
			s.mu.RLock()
			p = s.routeLocked(dst)
			s.mu.RUnlock()
			lastDst, last = dst, p
		}
		if p == nil {
			s.stats.NoRoute.Add(1)
			keep(ErrNoRoute)
			continue
		}
		if _, tcp := p.tx.(*tcpTransport); tcp {
			if p != b.tpeer || m == maxWriteBatch {
				flushTCP()
			}
			ch := p.data.Load()
			if ch == nil {
				keep(data.ErrNoKey)
				continue
			}
			frame, err := ch.EncryptInto(&b.tbufs[m], sendHeadroom, pkt)
			if err != nil {
				keep(err)
				continue
			}
			b.tsegs[m] = frame
			b.tpeer = p
			m++
			mBytes += len(pkt)
			continue
		}
		if _, udp := p.tx.(udpTransport); !udp || s.bind == nil {
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
		out, err := ch.EncryptInto(&b.bufs[n], 0, pkt)
		if err != nil {
			keep(err)
			continue
		}
		b.segs[n] = out
		b.routes[n] = p.route.Borrow()
		n++
		p.txBytes.Add(uint64(len(pkt)))
		p.lastSend.Store(now)
		if n == maxWriteBatch {
			flush()
		}
	}
	flush()
	flushTCP()
	return first
}
