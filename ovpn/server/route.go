package server

// Routing between clients and the host side.
//
//	client packet -> data.Decrypt (pending renegotiated key as fallback)
//	    -> ping / OCC exit -> source must be the client's pool address
//	    -> client-to-client and the destination is a client? encrypt to it
//	    -> else the rx queue -> ReadPacket
//	WritePacket -> destination pool address -> client -> encrypt -> send

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/wirelane/wirelane/ovpn/data"
)

// handleData decrypts a data packet of p and routes its payload. It
// reports whether the packet authenticated.
func (s *Server) handleData(p *peer, pkt []byte) bool {
	ch := p.data.Load()
	if ch == nil {
		s.stats.BadData.Add(1)
		return false
	}
	payload, kind, err := ch.Decrypt(pkt)
	if errors.Is(err, data.ErrNoKey) {
		if pch := p.pending.Load(); pch != nil {
			payload, kind, err = pch.Decrypt(pkt)
		}
	}
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
	src, dst, ok := ipv4Addrs(payload)
	if !ok || src != p.vaddrLoad() {
		s.stats.Spoofed.Add(1)
		return true
	}
	if s.cfg.ClientToClient {
		s.mu.RLock()
		q := s.byVaddr[dst]
		s.mu.RUnlock()
		if q != nil {
			if q != p {
				_ = q.sendData(payload)
			}
			return true
		}
	}
	s.deliver(payload)
	return true
}

// deliver queues a packet for ReadPacket, dropping it when the queue is
// full (like a NIC ring).
func (s *Server) deliver(payload []byte) {
	var rb *rxBuf
	select {
	case rb = <-s.free:
	default:
		s.stats.RxFull.Add(1)
		return
	}
	if len(payload) > len(rb.b) {
		rb.b = make([]byte, len(payload))
	}
	rb.n = copy(rb.b, payload)
	s.rx <- rb
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
	select {
	case rb := <-s.rx:
		n := copy(b, rb.b[:rb.n])
		if len(rb.b) > rxBufLen {
			rb.b = rb.b[:rxBufLen:rxBufLen]
		}
		s.free <- rb
		return n, nil
	case <-s.done:
		return 0, ErrClosed
	}
}

// WritePacket sends an IP packet from the host side to the client whose
// tunnel address is its destination. It may be called concurrently.
func (s *Server) WritePacket(pkt []byte) error {
	if len(pkt) > maxPkt-64 {
		return fmt.Errorf("server: packet of %d bytes too large", len(pkt))
	}
	_, dst, ok := ipv4Addrs(pkt)
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
	return p.sendData(pkt)
}
