package server

// The UDP transport: one socket for every client.
//
//	socket -> data opcode -> peer by peer-id (DATA_V2) or address -> handleData
//	                         (a known peer-id from a new address floats the peer)
//	       -> control from a known address -> ctrlSession.handle
//	       -> control from an unknown address -> stateless cookie (cookie.go)

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// readUDP is the UDP receive loop.
func (s *Server) readUDP() {
	defer s.wg.Done()
	buf := make([]byte, maxPkt+data.Tailroom)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf[:maxPkt])
		if err != nil {
			if s.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.logf("openvpn server: UDP read: %v", err)
			return
		}
		if n == 0 {
			continue
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		pkt := buf[:n]
		op, _ := wire.Header(pkt[0])
		if op.IsData() {
			s.udpData(from, pkt)
			continue
		}
		s.mu.RLock()
		p := s.byAddr[from]
		s.mu.RUnlock()
		if p != nil {
			err := p.ctrl.handle(pkt)
			if err == nil {
				p.touch()
				continue
			}
			if !errors.Is(err, errNewSession) {
				s.stats.BadControl.Add(1)
				continue
			}
			p.close("the client started a new session")
		}
		s.udpUnknown(from, pkt)
	}
}

func (s *Server) udpData(from netip.AddrPort, pkt []byte) {
	op, _, pid, _, err := wire.DecodeDataHeader(pkt)
	if err != nil {
		s.stats.BadData.Add(1)
		return
	}
	var p *peer
	s.mu.RLock()
	if op == wire.DataV2 && pid != wire.UndefinedPeerID {
		p = s.byID[pid]
	} else {
		p = s.byAddr[from]
	}
	s.mu.RUnlock()
	if p == nil {
		s.stats.BadData.Add(1)
		return
	}
	if p.remote() == from {
		s.handleData(p, pkt)
		return
	}
	// A DATA_V2 packet of a known peer-id from a new address: the client's
	// NAT mapping changed. Follow it once the packet authenticates.
	if op != wire.DataV2 || !s.handleData(p, pkt) {
		return
	}
	s.float(p, from)
}

// float moves p to a new transport address, unless another client has it.
func (s *Server) float(p *peer, to netip.AddrPort) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := p.remote()
	if s.byID[p.id] != p || s.byAddr[to] != nil || old == to {
		return
	}
	delete(s.byAddr, old)
	s.byAddr[to] = p
	p.addr.Store(&to)
	s.logf("openvpn server: %s: floated from %s", p.label(), old)
}

// udpUnknown handles a control packet from an address without a client:
// the stateless part of the handshake.
func (s *Server) udpUnknown(from netip.AddrPort, raw []byte) {
	w, err := s.newWrapper()
	if err != nil {
		return
	}
	plain, err := w.Unwrap(nil, raw)
	if err != nil {
		s.stats.BadControl.Add(1)
		return
	}
	var p wire.ControlPacket
	if err := wire.DecodeControl(plain, &p); err != nil || p.KeyID != 0 {
		s.stats.BadControl.Add(1)
		return
	}
	now := time.Now()
	switch p.Op {
	case wire.HardResetClientV2:
		reply := wire.ControlPacket{Op: wire.HardResetServerV2, Session: s.cookies.sessionID(from, p.Session, now),
			NumAcks: 1, Remote: p.Session, ID: 0}
		reply.Acks[0] = p.ID
		b, err := wire.AppendControl(nil, &reply)
		if err != nil {
			return
		}
		if b, err = w.Wrap(nil, b); err != nil {
			return
		}
		_, _ = s.udp.WriteToUDPAddrPort(b, from)
	case wire.ControlV1, wire.AckV1:
		acked := false
		for _, a := range p.AckList() {
			acked = acked || a == 0
		}
		if !acked || !s.cookies.valid(from, p.Session, p.Remote, now) || s.buried(from, p.Session, now) {
			s.stats.BadControl.Add(1)
			return
		}
		pw, err := s.newWrapper()
		if err != nil {
			return
		}
		// The stateless reset went out with the wrapper's first packet id;
		// start this client's wrapper past it so the client's replay
		// check accepts what follows.
		if _, err := pw.Wrap(nil, make([]byte, 9)); err != nil {
			return
		}
		peer, err := s.newPeer(from, p.Remote, p.Session, pw, nil, true)
		if err != nil {
			s.logf("openvpn server: %s: %v", from, err)
			return
		}
		if err := peer.ctrl.handle(raw); err != nil {
			s.stats.BadControl.Add(1)
		}
		peer.touch()
	default:
		s.stats.BadControl.Add(1)
	}
}

// graveKey names one client session.
type graveKey struct {
	from    netip.AddrPort
	session wire.SessionID
}

// maxGraves bounds the memory of refused sessions.
const maxGraves = 4096

// bury remembers a refused UDP session until its cookie can no longer be
// valid, so that its retransmissions do not start it again.
func (s *Server) bury(p *peer) {
	if _, ok := p.tx.(udpTransport); !ok {
		return
	}
	now := time.Now()
	s.graveMu.Lock()
	defer s.graveMu.Unlock()
	if s.graves == nil {
		s.graves = map[graveKey]time.Time{}
	}
	if len(s.graves) >= maxGraves {
		for k, until := range s.graves {
			if now.After(until) || len(s.graves) >= maxGraves {
				delete(s.graves, k)
			}
		}
	}
	s.graves[graveKey{p.remote(), p.ctrl.remote}] = now.Add(2 * s.cookies.slot)
}

func (s *Server) buried(from netip.AddrPort, session wire.SessionID, now time.Time) bool {
	s.graveMu.Lock()
	defer s.graveMu.Unlock()
	until, ok := s.graves[graveKey{from, session}]
	return ok && now.Before(until)
}

// udpTransport sends to the peer's current address (it may float).
type udpTransport struct{ p *peer }

func (t udpTransport) send(buf []byte, off, n int) error {
	_, err := t.p.s.udp.WriteToUDPAddrPort(buf[off:off+n], t.p.remote())
	return err
}

func (t udpTransport) close() {}

func (t udpTransport) name() string {
	if t.p.s.addr.Addr().Is6() {
		return "UDPv6"
	}
	return "UDPv4"
}
