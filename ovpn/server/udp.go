package server

// The UDP transport: one socket for every client.
//
//	socket (conn.StdBind receive batches) -> data opcode -> peer by peer-id (DATA_V2) or address -> handleData
//	                         (a known peer-id from a new address floats the peer)
//	       -> decrypted packets for the host, with a TUN device attached:
//	          copied into the reader's TUN batch, one device write per
//	          receive batch (no queue, no goroutine hand-off; a slow
//	          device holds the reader back and the socket buffer absorbs it)
//	       -> control from a known address -> control.Channel.HandlePacket
//	       -> control from an unknown address -> stateless cookie (cookie.go)

import (
	"errors"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
	"github.com/wirelane/wirelane/tun"
)

// udpBatch is how many datagrams one receive call may return: with
// UDP_GRO a train of up to 64 segments is cut into separate buffers.
const udpBatch = 64

// openUDP opens the server's UDP socket on c.Listen through conn.StdBind:
// its batched receive and send, buffer sizes, GSO and GRO are the
// transport's, as for WireGuard and the OpenVPN client. The bind's
// source watcher is off: the server answers from the socket's address
// (routes carry no sticky source).
func (s *Server) openUDP(c *Config) error {
	s.bind = conn.NewStdBindOptions(conn.Options{Addr: c.Listen.Addr(), DisableSourceWatch: true})
	var err error
	open := func() { s.recv, _, err = s.bind.Open(c.Listen.Port()) }
	if s.opts.WrapSocket != nil {
		if werr := s.opts.WrapSocket(open); werr != nil {
			return werr
		}
	} else {
		open()
	}
	if err != nil {
		return err
	}
	s.addr = s.bind.LocalAddr()
	s.udpSends.New = func() any { return new([1][]byte) }
	return nil
}

// readUDP is the UDP receive loop of one socket: one conn.ReceiveFunc
// call per batch (coalesced trains already cut into separate buffers),
// then each datagram in turn. Each buffer keeps tailroom after maxPkt,
// so decryption needs no copy.
func (s *Server) readUDP(recv conn.ReceiveFunc) {
	defer s.wg.Done()
	const stride = maxPkt + data.Tailroom
	slab := make([]byte, udpBatch*stride)
	bufs := make([][]byte, udpBatch)
	for i := range bufs {
		bufs[i] = slab[i*stride : i*stride+maxPkt]
	}
	sizes := make([]int, udpBatch)
	eps := make([]conn.Endpoint, udpBatch)
	var sink *tun.BatchWriter // this goroutine's batch for the attached device
	for {
		if sink != nil {
			s.flushTUN(sink)
		}
		sink = s.sinkFor(sink)
		n, err := recv(bufs, sizes, eps)
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return
			}
			var errno unix.Errno
			if errors.As(err, &errno) && transientRecvError(errno) {
				continue
			}
			s.log.Error("UDP read", "err", err)
			return
		}
		for i := 0; i < n; i++ {
			from := eps[i].Dst
			if sizes[i] == 0 || !from.IsValid() {
				continue
			}
			// Capacity runs to the end of this buffer's stride: tailroom
			// for Decrypt without touching the next datagram.
			s.udpPacket(from, slab[i*stride:i*stride+sizes[i]:(i+1)*stride], sink)
		}
	}
}

// transientRecvError reports whether a receive error concerns one
// datagram or a moment (an ICMP error queued on the socket, memory
// pressure), not the socket.
func transientRecvError(e unix.Errno) bool {
	switch e {
	case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH, unix.EHOSTDOWN, unix.ENOBUFS, unix.ENOMEM:
		return true
	}
	return false
}

// udpPacket handles one datagram; sink (nil without a TUN device) takes
// decrypted packets for the host.
func (s *Server) udpPacket(from netip.AddrPort, pkt []byte, sink *tun.BatchWriter) {
	op, _ := wire.Header(pkt[0])
	if op.IsData() {
		s.udpData(from, pkt, sink)
		return
	}
	if op == wire.HardResetClientV3 {
		// A tls-crypt-v2 reset is stateless, from a client's address
		// or not (a restart).
		s.udpUnknown(from, pkt)
		return
	}
	s.mu.RLock()
	p := s.byAddr[from]
	if q := s.pending[from]; q != nil && len(pkt) >= 9 && wire.SessionID(pkt[1:9]) == q.remoteSession() {
		p = q
	}
	s.mu.RUnlock()
	if p != nil {
		err := p.ctrl.HandlePacket(pkt)
		if err == nil {
			p.touch()
			return
		}
		// Under tls-crypt-v2 a CONTROL_WKC_V1 that fails the address's
		// client key may be another key's (a new client behind the same
		// address); a replayed one never goes further.
		otherKey := op == wire.ControlWKCV1 && errors.Is(err, wrap.ErrAuth)
		if !otherKey && !errors.Is(err, control.ErrNewSession) && !errors.Is(err, control.ErrOtherSession) {
			s.stats.BadControl.Add(1)
			return
		}
		// A reset or a packet of another session from a client's
		// address: the client restarted, or someone forges its address.
		// Either way the new session goes through the stateless cookie
		// like any other, and the client's session stays until the new
		// one completes its TLS handshake (promote).
	}
	s.udpUnknown(from, pkt)
}

func (s *Server) udpData(from netip.AddrPort, pkt []byte, sink *tun.BatchWriter) {
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
		s.handleData(p, pkt, sink)
		return
	}
	// A DATA_V2 packet of a known peer-id from a new address: the client's
	// NAT mapping changed. Follow it once the packet authenticates.
	if op != wire.DataV2 || !s.handleData(p, pkt, sink) {
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
	p.route.Set(conn.Endpoint{Dst: to})
	s.log.Info("floated", "client", p.label(), "from", old)
}

// udpUnknown handles a control packet from an address without a client:
// the stateless part of the handshake.
func (s *Server) udpUnknown(from netip.AddrPort, raw []byte) {
	if s.live.Load().cfg.TLSCryptV2Server != nil {
		s.udpUnknownV2(from, raw)
		return
	}
	w, err := s.newWrapper()
	if err != nil {
		return
	}
	plain, err := w.Unwrap(nil, raw)
	if err != nil {
		s.stats.BadControl.Add(1)
		s.resetRefused(raw)
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
		if !s.replies.allow(from.Addr(), now) {
			s.stats.RepliesWithheld.Add(1)
			return
		}
		// The reply carries no ack (the ack and the client's session id
		// would make it 12 bytes larger than the reset): never more
		// bytes to an unverified source than it sent. The client acks
		// this reset, which proves its address (the cookie); the client
		// created then acks the client's reset.
		reply := wire.ControlPacket{Op: wire.HardResetServerV2, Session: s.cookies.sessionID(from, p.Session, now)}
		b, err := wire.AppendControl(nil, &reply)
		if err != nil {
			return
		}
		// A client sends its first reset twice at once (OpenVPN 2.6
		// does): the replies' packet ids never repeat (tlscryptv2.go).
		if sf, ok := w.(sendFromer); ok {
			sf.SendFrom(s.replyIDs.Add(1), s.replyEpoch)
		}
		if b, err = w.Wrap(nil, b); err != nil {
			return
		}
		// A one-off route: this address is no client's yet.
		_ = s.bind.Send([][]byte{b}, conn.NewRoute(conn.Endpoint{Dst: from}, 0))
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
		// The stateless replies went out under replyEpoch; this client's
		// wrapper sends under a later time, so the client's replay check
		// accepts what follows.
		if sf, ok := pw.(sendFromer); ok {
			sf.SendFrom(1, s.sessionEpoch(now))
		}
		peer, err := s.newPeer(from, p.Remote, p.Session, pw, nil, true)
		if err != nil {
			s.log.Warn("session refused", "remote", from, "err", err)
			return
		}
		if err := peer.ctrl.HandlePacket(raw); err != nil {
			s.stats.BadControl.Add(1)
		}
		peer.touch()
	default:
		s.stats.BadControl.Add(1)
	}
}

// sendFromer is a wrapper with packet ids (tls-auth, tls-crypt).
type sendFromer interface{ SendFrom(id, t uint32) }

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
	s.graves[graveKey{p.remote(), p.remoteSession()}] = now.Add(2 * s.cookies.slot)
}

func (s *Server) buried(from netip.AddrPort, session wire.SessionID, now time.Time) bool {
	s.graveMu.Lock()
	defer s.graveMu.Unlock()
	until, ok := s.graves[graveKey{from, session}]
	return ok && now.Before(until)
}

// udpTransport sends to the peer's current address (it may float),
// through the route borrowed from the peer's conn.RouteCache.
type udpTransport struct{ p *peer }

func (t udpTransport) send(buf []byte, off, n int) error {
	s := t.p.s
	bufs := s.udpSends.Get().(*[1][]byte)
	bufs[0] = buf[off : off+n]
	err := s.bind.Send(bufs[:], t.p.route.Borrow())
	bufs[0] = nil
	s.udpSends.Put(bufs)
	if err != nil {
		s.stats.SocketSendErrors.Add(1)
	}
	return err
}

func (t udpTransport) close() {}

func (t udpTransport) name() string {
	if t.p.s.addr.Addr().Is6() {
		return "UDPv6"
	}
	return "UDPv4"
}
