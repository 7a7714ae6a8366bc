// Package server is an OpenVPN 2.6 server (UDP and TCP) that real OpenVPN
// clients and Wirelane's own client can join: per-client TLS control
// sessions, key_method_2, PUSH_REPLY with an address from a pool
// (topology subnet), peer-ids, cipher negotiation from IV_CIPHERS,
// protocol-flags cc-exit tls-ekm, keepalive, renegotiation and exit
// notification. IP packets are exchanged with the host side through
// ReadPacket and WritePacket, so a TUN device (AttachTUN) or a test can sit
// on top.
//
// Pipelines:
//
//	UDP reader: socket -> data opcode -> peer by peer-id (DATA_V2) or address
//	                      -> data.Decrypt -> ping/exit -> source check
//	                      -> client-to-client? peer.sendData : rx queue -> ReadPacket
//	                   -> control, known address -> ctrlSession.handle
//	                   -> control, unknown address -> stateless cookie (cookie.go):
//	                      reset -> HARD_RESET_SERVER_V2; acked cookie -> new peer
//	TCP: one reader goroutine per connection, the same steps without cookies.
//	WritePacket (any goroutine): destination address -> peer -> data.Encrypt -> send
//	peer goroutine: control flush (retransmits, acks) and the 1 s timers
//	key-state goroutines: TLS -> key_method_2 -> keys -> push -> messages
package server

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Options tune a Server beyond its Config.
type Options struct {
	// Logf receives diagnostics; keys and passwords never reach it.
	Logf func(format string, args ...any)
	// Events, when set, is called (from server goroutines, never
	// concurrently for one client) when a client connects or leaves.
	Events func(Event)
	// ListenUDP and ListenTCP replace the socket calls (tests use them to
	// open the socket in another network namespace).
	ListenUDP func(network string, laddr *net.UDPAddr) (*net.UDPConn, error)
	ListenTCP func(network, addr string) (net.Listener, error)
	// TransitionWindow is how long an old key keeps decrypting after a
	// renegotiation (default 60 s).
	TransitionWindow time.Duration
}

// EventKind says what happened to a client.
type EventKind int

// Event kinds.
const (
	ClientConnected    EventKind = iota + 1 // pushed its configuration
	ClientDisconnected                      // left, timed out or was replaced
)

// Event reports a client connecting or leaving.
type Event struct {
	Kind   EventKind
	Client ClientInfo
	Reason string // why a client left
}

// ClientInfo describes a connected client.
type ClientInfo struct {
	CommonName string
	Remote     netip.AddrPort // transport address
	Address    netip.Addr     // tunnel address from the pool
	PeerID     uint32
	Cipher     data.Cipher
	EKM        bool // keys from TLS keying-material export
	Since      time.Time
}

// Errors returned by the packet interface.
var (
	ErrClosed  = errors.New("server: closed")
	ErrNoRoute = errors.New("server: no client has the destination address")
)

// Server is a running OpenVPN server.
type Server struct {
	cfg        Config // defaults applied; immutable
	opts       Options
	logf       func(string, ...any)
	tlsCfg     *tls.Config
	pool       *pool
	cookies    *cookieJar
	handWindow time.Duration

	udp  *net.UDPConn // nil for TCP
	tcp  net.Listener // nil for UDP
	addr netip.AddrPort

	mu      sync.RWMutex             // guards the maps and closed
	byAddr  map[netip.AddrPort]*peer // UDP peers by transport address
	byID    map[uint32]*peer         // by peer-id
	byVaddr map[netip.Addr]*peer     // by tunnel address, once pushed
	closed  bool

	graveMu sync.Mutex             // guards graves
	graves  map[graveKey]time.Time // refused sessions, until their cookie expires

	rx     chan *rxBuf // packets for the host side
	free   chan *rxBuf
	txPool sync.Pool // *[]byte send buffers
	done   chan struct{}
	wg     sync.WaitGroup

	stats Stats
}

// Stats counts dropped packets, for diagnostics and tests.
type Stats struct {
	BadControl, BadData, Spoofed, NoRoute, RxFull, TUNErrors atomic.Uint64
}

type rxBuf struct {
	b []byte
	n int
}

const (
	rxQueue      = 512
	rxBufLen     = 2048
	maxPkt       = 65535
	sendHeadroom = 2 // TCP length prefix
)

// New validates cfg, opens the socket and starts serving.
func New(cfg *Config, opts Options) (*Server, error) {
	if cfg == nil {
		return nil, errors.New("server: nil configuration")
	}
	c := *cfg
	if c.Proto == "" {
		c.Proto = UDP
	}
	if !c.Listen.IsValid() {
		c.Listen = netip.AddrPortFrom(netip.IPv4Unspecified(), 1194)
	}
	if len(c.DataCiphers) == 0 {
		c.DataCiphers = []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305}
	}
	if c.HandWindow == 0 {
		c.HandWindow = 60
	}
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.TLSAuth != nil && c.TLSCrypt != nil {
		return nil, errors.New("server: tls-auth and tls-crypt are mutually exclusive")
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	if opts.TransitionWindow == 0 {
		opts.TransitionWindow = 60 * time.Second
	}
	p, err := newPool(c.Network)
	if err != nil {
		return nil, err
	}
	if c.MaxClients == 0 || c.MaxClients > p.size() {
		c.MaxClients = p.size()
	}
	minTLS := uint16(tls.VersionTLS12)
	if c.TLSVersionMin == "1.3" {
		minTLS = tls.VersionTLS13
	}
	tlsCfg, err := control.TLSConfig(control.TLSParams{CA: c.CA, Cert: c.Cert, Key: c.Key, Server: true,
		RemoteCertTLS: c.RemoteCertTLS, MinVersion: minTLS})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: c, opts: opts, logf: opts.Logf, tlsCfg: tlsCfg, pool: p,
		handWindow: time.Duration(c.HandWindow) * time.Second,
		byAddr:     map[netip.AddrPort]*peer{}, byID: map[uint32]*peer{}, byVaddr: map[netip.Addr]*peer{},
		rx: make(chan *rxBuf, rxQueue), free: make(chan *rxBuf, rxQueue), done: make(chan struct{})}
	if _, err := s.newWrapper(); err != nil {
		return nil, err
	}
	if s.cookies, err = newCookieJar(s.handWindow); err != nil {
		return nil, err
	}
	for i := 0; i < rxQueue; i++ {
		s.free <- &rxBuf{b: make([]byte, rxBufLen)}
	}
	s.txPool.New = func() any { b := make([]byte, sendHeadroom+data.Headroom+maxPkt+data.Tailroom); return &b }
	network := "udp4"
	if c.Listen.Addr().Is6() {
		network = "udp6"
	}
	if c.Proto == TCP {
		network = "tcp" + network[3:]
		listen := opts.ListenTCP
		if listen == nil {
			listen = net.Listen
		}
		if s.tcp, err = listen(network, c.Listen.String()); err != nil {
			return nil, fmt.Errorf("server: listen %s %s: %w", network, c.Listen, err)
		}
		s.addr = s.tcp.Addr().(*net.TCPAddr).AddrPort()
		s.wg.Add(1)
		go s.acceptTCP()
	} else {
		listen := opts.ListenUDP
		if listen == nil {
			listen = net.ListenUDP
		}
		if s.udp, err = listen(network, net.UDPAddrFromAddrPort(c.Listen)); err != nil {
			return nil, fmt.Errorf("server: listen %s %s: %w", network, c.Listen, err)
		}
		s.addr = s.udp.LocalAddr().(*net.UDPAddr).AddrPort()
		s.wg.Add(1)
		go s.readUDP()
	}
	s.logf("openvpn server: listening on %s %s, pool %s, ciphers %v", c.Proto, s.addr, c.Network, c.DataCiphers)
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() netip.AddrPort { return s.addr }

// TunnelAddress returns the server's own address in the tunnel network
// with its prefix length, e.g. 10.8.0.1/24: what its TUN device carries.
func (s *Server) TunnelAddress() netip.Prefix {
	return netip.PrefixFrom(s.pool.server, s.pool.network.Bits())
}

// Config returns the configuration in use, defaults applied.
func (s *Server) Config() Config { return s.cfg }

// Stats returns the drop counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Clients lists the connected clients (those that got their push).
func (s *Server) Clients() []ClientInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ClientInfo, 0, len(s.byVaddr))
	for _, p := range s.byVaddr {
		out = append(out, p.info())
	}
	return out
}

// newWrapper returns a fresh control-packet wrapper (own replay state), or
// nil without tls-auth/tls-crypt.
func (s *Server) newWrapper() (wrap.Wrapper, error) {
	switch {
	case s.cfg.TLSCrypt != nil:
		return wrap.NewTLSCrypt(s.cfg.TLSCrypt, true)
	case s.cfg.TLSAuth != nil:
		digest, err := wrap.DigestByName(s.cfg.Auth)
		if err != nil {
			return nil, err
		}
		return wrap.NewTLSAuth(s.cfg.TLSAuth, s.cfg.KeyDirection, digest), nil
	}
	return wrap.None{}, nil
}

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

// acceptTCP accepts TCP clients.
func (s *Server) acceptTCP() {
	defer s.wg.Done()
	for {
		c, err := s.tcp.Accept()
		if err != nil {
			if s.isClosed() {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			s.logf("openvpn server: accept: %v", err)
			return
		}
		s.wg.Add(1)
		go s.serveTCP(c)
	}
}

// serveTCP runs one TCP client: the first packet must be its reset.
func (s *Server) serveTCP(c net.Conn) {
	defer s.wg.Done()
	from := c.RemoteAddr().(*net.TCPAddr).AddrPort()
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	buf := make([]byte, maxPkt+data.Tailroom)
	c.SetReadDeadline(time.Now().Add(s.handWindow))
	raw, err := wire.ReadTCPFrame(c, buf[:maxPkt])
	if err != nil {
		c.Close()
		return
	}
	w, err := s.newWrapper()
	if err != nil {
		c.Close()
		return
	}
	plain, err := w.Unwrap(nil, raw)
	var p wire.ControlPacket
	if err == nil {
		err = wire.DecodeControl(plain, &p)
	}
	if err != nil || p.Op != wire.HardResetClientV2 || p.KeyID != 0 {
		s.stats.BadControl.Add(1)
		c.Close()
		return
	}
	var local wire.SessionID
	if _, err := randRead(local[:]); err != nil {
		c.Close()
		return
	}
	peer, err := s.newPeer(from, local, p.Session, w, &tcpTransport{c: c}, false)
	if err != nil {
		s.logf("openvpn server: %s: %v", from, err)
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	for {
		raw, err := wire.ReadTCPFrame(c, buf[:maxPkt])
		if err != nil {
			peer.close(fmt.Sprintf("connection closed: %v", err))
			return
		}
		op, _ := wire.Header(raw[0])
		if op.IsData() {
			s.handleData(peer, raw)
			continue
		}
		if err := peer.ctrl.handle(raw); err != nil {
			if errors.Is(err, errNewSession) {
				peer.close("the client started a new session")
				return
			}
			s.stats.BadControl.Add(1)
			continue
		}
		peer.touch()
	}
}

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

func (s *Server) isClosed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Close tells clients that negotiated cc-exit to reconnect later
// (RESTART), waits up to a second for their acknowledgements, then ends
// every session and closes the socket.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	peers := make([]*peer, 0, len(s.byID))
	for _, p := range s.byID {
		peers = append(peers, p)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.notifyRestart(time.Second)
			p.close("server shutting down")
		}()
	}
	wg.Wait()
	close(s.done)
	var err error
	if s.udp != nil {
		err = s.udp.Close()
	}
	if s.tcp != nil {
		err = s.tcp.Close()
	}
	s.wg.Wait()
	return err
}

// transport sends whole packets to one client. buf[off:off+n] is the
// packet; the sendHeadroom bytes before off are free for framing.
type transport interface {
	send(buf []byte, off, n int) error
	close()
	name() string // for the options string
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

type tcpTransport struct {
	c  net.Conn
	mu sync.Mutex // serialises framed writes
}

func (t *tcpTransport) send(buf []byte, off, n int) error {
	if off < sendHeadroom || n > wire.MaxTCPPacket {
		return wire.ErrBadLength
	}
	binary.BigEndian.PutUint16(buf[off-2:], uint16(n))
	t.mu.Lock()
	_, err := t.c.Write(buf[off-2 : off+n])
	t.mu.Unlock()
	return err
}

func (t *tcpTransport) close() { t.c.Close() }

func (t *tcpTransport) name() string { return "TCPv4_SERVER" }
