// Package server is an OpenVPN 2.6 server (UDP and TCP) that real OpenVPN
// clients and Wirelane's own client can join: per-client TLS control
// sessions, key_method_2, PUSH_REPLY with an address from a pool
// (topology subnet), peer-ids, cipher negotiation from IV_CIPHERS,
// protocol-flags cc-exit tls-ekm, keepalive, renegotiation and exit
// notification. IP packets are exchanged with the host side through
// ReadPacket/ReadPackets and WritePacket/WritePackets, so a TUN device
// (AttachTUN) or a test can sit on top.
//
// Pipelines:
//
//	UDP reader: socket (conn.StdBind batches, UDP_GRO runs split again)
//	                   -> data opcode -> peer by peer-id (DATA_V2) or address
//	                      -> data.Decrypt -> ping/exit -> source check
//	                      -> client-to-client? peer.sendData : the reader's TUN batch
//	                         (AttachTUN) or the rx queue -> ReadPacket
//	                   -> control, known address -> control.Channel.HandlePacket
//	                   -> control, unknown address -> stateless cookie (cookie.go):
//	                      reset -> HARD_RESET_SERVER_V2; acked cookie -> new peer
//	TCP: one reader goroutine per connection, the same steps without cookies.
//	WritePacket (any goroutine): destination address -> peer -> data.Encrypt -> send
//	WritePackets: the same per packet into a batch with each client's
//	    borrowed route; conn.StdBind.SendEach joins equal-size runs to one
//	    client into UDP_SEGMENT (GSO) messages; one sendmmsg
//	per peer: control.Channel's flusher (retransmits, acks); a goroutine for the 1 s timers
//	key-state goroutines: TLS -> key_method_2 -> keys -> push -> messages
//
// Files: udp.go (the UDP side on conn.StdBind) and tcp.go (transports), tcpgate.go (caps on TCP
// connections before their first frame), cookie.go (stateless UDP handshake, reply budget), peer.go (a client's key exchange, push and timers), route.go (packet routing), pool.go,
// config.go (server configuration files), tun.go (AttachTUN), reload.go (a new
// configuration in place: PlanReload, ApplyReload), tlscryptv2.go
// (tls-crypt-v2: the stateless reply, the WKc, the metadata checks), ccd.go
// (client-config-dir entries: fixed addresses, iroutes, per-client push).
package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/internal/pktqueue"
	"github.com/wirelane/wirelane/ovpn/internal/testtimers"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Options tune a Server beyond its Config.
type Options struct {
	// Logger receives diagnostics (nil: none); keys and passwords never
	// reach it.
	Logger *slog.Logger
	// Events, when set, is called from server goroutines (possibly
	// concurrently) when a client has connected or has left; it must not
	// block.
	Events func(Event)
	// WrapSocket, when set, runs fn (which opens the UDP socket) and
	// returns its own error, if any; tests use it to open the socket in
	// another network namespace.
	WrapSocket func(fn func()) error
	// ListenTCP replaces the TCP listen call (tests use it to open the
	// socket in another network namespace).
	ListenTCP func(network, addr string) (net.Listener, error)
	// TransitionWindow is how long an old key keeps decrypting after a
	// renegotiation (default 60 s).
	TransitionWindow time.Duration
	// Timers shortens every client's timers for the rekey soak; only
	// packages under ovpn/ can make one (ovpn/internal/testtimers), so it
	// is nil in the product.
	Timers *testtimers.Timers
}

// EventKind says what happened to a client.
type EventKind int

// Event kinds.
const (
	ClientConnected    EventKind = iota + 1 // pushed its configuration
	ClientDisconnected                      // left, timed out or was replaced
	// ClientWarning: something about a connected client its operator
	// should know (Reason says what; at most once per client and kind,
	// such as its first compressed packet).
	ClientWarning
)

// Event reports a client connecting or leaving.
type Event struct {
	Kind   EventKind
	Client ClientInfo
	Reason string // why a client left, or the ClientWarning
}

// ClientInfo describes a connected client.
type ClientInfo struct {
	CommonName string
	Remote     netip.AddrPort // transport address
	Address    netip.Addr     // tunnel address from the pool, or invalid (IPv6-only server)
	Address6   netip.Addr     // IPv6 tunnel address (server-ipv6), or invalid
	PeerID     uint32
	Cipher     data.Cipher
	EKM        bool      // keys from TLS keying-material export
	KeyID      uint8     // the key id of the primary data key (it changes at each renegotiation)
	Since      time.Time // when the client got its configuration
	// KeyMetadata is, with tls-crypt-v2, the client key's metadata as
	// wrap.DescribeMetadata formats it ("user BASE64", "timestamp
	// TIME"); "" otherwise.
	KeyMetadata string
	// RxBytes and TxBytes count the IP packet bytes received from and
	// sent to the client (keepalives excluded).
	RxBytes, TxBytes uint64
}

// Errors returned by the packet interface.
var (
	ErrClosed  = errors.New("server: closed")
	ErrNoRoute = errors.New("server: no client has the destination address")
)

// Server is a running OpenVPN server.
type Server struct {
	// live is the configuration in force (reload.go): Config, TLS
	// settings and pools. Read with Load anywhere; replaced only by
	// ApplyReload, with mu held, so that code holding mu sees one pool
	// throughout (addresses are taken from and returned to a pool only
	// with mu held).
	live       atomic.Pointer[live]
	tlsCfg     *tls.Config // immutable: hands each handshake live's TLS settings
	opts       Options
	log        *slog.Logger // Options.Logger
	cookies    *cookieJar
	handWindow time.Duration // immutable (hand-window is not reloaded)
	reloadMu   sync.Mutex    // serialises PlanReload/ApplyReload
	// dataAuth is `auth`'s digest for the HMAC of CBC data channels;
	// immutable (auth is not reloaded).
	dataAuth func() hash.Hash

	// bind is the UDP transport (conn.StdBind: batched receive and send,
	// GSO and GRO, one route per peer); nil for TCP. Immutable.
	bind     *conn.StdBind
	recv     []conn.ReceiveFunc // the bind's, one reader goroutine each; immutable
	udpSends sync.Pool          // *[1][]byte for single sends
	tcp      net.Listener       // nil for UDP
	addr     netip.AddrPort

	mu     sync.RWMutex             // guards the maps and closed
	byAddr map[netip.AddrPort]*peer // UDP peers by transport address
	// pending holds, per UDP address that has a client, a new session
	// from that address that passed the cookie exchange but not yet its
	// TLS handshake: the client in byAddr keeps running until the new
	// one proves itself (promote), so a spoofed reset ends nothing.
	pending map[netip.AddrPort]*peer
	byID    map[uint32]*peer     // by peer-id
	byVaddr map[netip.Addr]*peer // by tunnel addresses (IPv4 and IPv6), once pushed
	iroutes []irouteEntry        // the clients' iroutes, longest first (ccd.go)
	closed  bool

	// unproven counts, per source address, sessions that have not
	// completed their TLS handshake (peer.unproven);
	// guarded by mu.
	unproven map[netip.Addr]int
	freq     connectFreq // connect-freq; guarded by mu

	graveMu sync.Mutex             // guards graves
	graves  map[graveKey]time.Time // refused sessions, until their cookie expires

	tun     atomic.Pointer[attached] // the device of a running AttachTUN, or nil
	rx      *pktqueue.Queue          // packets for the host side (TCP clients, or no device attached)
	txPool  sync.Pool                // *[]byte send buffers
	batches sync.Pool                // *txBatch for WritePackets
	done    chan struct{}
	wg      sync.WaitGroup

	v2allow *metadataAllow // tls-crypt-v2-metadata-allow, or nil
	// replyEpoch (the start time, immutable) and replyIDs number the
	// stateless replies' tls-crypt/tls-auth packet ids (udp.go,
	// tlscryptv2.go).
	replyEpoch uint32
	replyIDs   atomic.Uint32

	tcpGate tcpGate     // TCP connections that have not sent their first frame
	replies replyBudget // stateless replies per source and second (cookie.go)

	stats Stats
}

// Stats counts dropped packets (and refused TCP connections), for
// diagnostics and tests.
type Stats struct {
	BadControl, BadData, Spoofed, NoRoute, RxFull, TUNErrors atomic.Uint64
	// TCPRefused counts TCP connections closed at accept because too
	// many connections (in all, or from their source) had not yet sent
	// their first frame.
	TCPRefused atomic.Uint64
	// RepliesWithheld counts resets from unverified sources left
	// unanswered because their source used up its reply budget.
	RepliesWithheld atomic.Uint64
	// NoCookie counts tls-crypt-v2 resets without early negotiation
	// (clients before OpenVPN 2.6), which a stateless server drops.
	NoCookie atomic.Uint64
	// KeyRefused counts tls-crypt-v2 client keys refused by
	// tls-crypt-v2-max-age or tls-crypt-v2-metadata-allow.
	KeyRefused atomic.Uint64
	// Compressed counts data packets dropped because the client
	// compressed them under a stub framing or allow-compression no (they
	// authenticated and are not counted in BadData). Decompressed counts
	// those decompressed (a line naming an algorithm, not stubs only;
	// config/compress.go), and
	// DecompressFailed those that were not valid compressed data or would
	// have been larger than tun-mtu (dropped; compress.go).
	Compressed, Decompressed, DecompressFailed atomic.Uint64
	// FailedHandshakes counts the handshakes the server gave up on, by
	// reason (counters.go).
	FailedHandshakes HandshakeFailures
	// SocketSendErrors counts failed UDP sends to clients (a batch or
	// a packet each: no route to the client, a full socket buffer).
	SocketSendErrors atomic.Uint64
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
	c := withDefaults(*cfg)
	if c.TLSAuth != nil && c.TLSCrypt != nil {
		return nil, errors.New("server: tls-auth and tls-crypt are mutually exclusive")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TransitionWindow == 0 {
		opts.TransitionWindow = 60 * time.Second
	}
	if !c.Network.IsValid() && !c.Network6.IsValid() {
		return nil, errors.New("server: no client address pool (server or server-ipv6)")
	}
	p, err := newPool(slotNetwork(c.Network))
	if err != nil {
		return nil, err
	}
	var p6 *pool6
	if c.Network6.IsValid() {
		if p6, err = newPool6(c.Network6, p); err != nil {
			return nil, err
		}
	}
	if c.MaxClients == 0 || c.MaxClients > p.size() {
		c.MaxClients = p.size()
	}
	if err := checkCCD(&c); err != nil {
		return nil, err
	}
	p.reserved = reserved(&c)
	tlsCfg, err := serverTLS(&c)
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, log: opts.Logger,
		handWindow: time.Duration(c.HandWindow) * time.Second,
		byAddr:     map[netip.AddrPort]*peer{}, pending: map[netip.AddrPort]*peer{}, unproven: map[netip.Addr]int{}, byID: map[uint32]*peer{}, byVaddr: map[netip.Addr]*peer{},
		rx: pktqueue.New(rxQueue, rxBufLen), done: make(chan struct{}), replyEpoch: uint32(time.Now().Unix())}
	s.live.Store(&live{cfg: c, tls: tlsCfg, pool: p, pool6: p6})
	s.tlsCfg = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return s.live.Load().tls, nil }}
	if c.TLSCryptV2Server != nil {
		if c.TLSAuth != nil || c.TLSCrypt != nil {
			return nil, errors.New("server: tls-crypt-v2 cannot be combined with tls-auth or tls-crypt")
		}
		if c.TLSCryptV2AllowFile != "" {
			if s.v2allow, err = newMetadataAllow(c.TLSCryptV2AllowFile); err != nil {
				return nil, fmt.Errorf("server: tls-crypt-v2-metadata-allow: %w", err)
			}
		}
	} else if c.TLSCryptV2AllowFile != "" || c.TLSCryptV2MaxAge != 0 {
		return nil, errors.New("server: tls-crypt-v2-metadata-allow and tls-crypt-v2-max-age need tls-crypt-v2")
	} else if _, err := s.newWrapper(); err != nil {
		return nil, err
	}
	if s.dataAuth, err = wrap.DigestByName(c.Auth); err != nil {
		return nil, err
	}
	if s.cookies, err = newCookieJar(s.handWindow); err != nil {
		return nil, err
	}
	s.txPool.New = func() any { b := make([]byte, sendHeadroom+data.Headroom+maxPkt+data.Tailroom); return &b }
	s.batches.New = func() any { return new(txBatch) }
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
		if err := s.openUDP(&c); err != nil {
			return nil, fmt.Errorf("server: listen %s %s: %w", network, c.Listen, err)
		}
		for _, fn := range s.recv {
			s.wg.Add(1)
			go s.readUDP(fn)
		}
	}
	s.log.Info("listening", "proto", string(c.Proto), "addr", s.addr, "pool", poolsString(c), "ciphers", fmt.Sprint(c.DataCiphers))
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() netip.AddrPort { return s.addr }

// TunnelAddress returns the server's own address in the tunnel network
// with its prefix length, e.g. 10.8.0.1/24: what its TUN device carries.
// It is the invalid prefix for an IPv6-only server.
func (s *Server) TunnelAddress() netip.Prefix {
	l := s.live.Load()
	if !l.cfg.Network.IsValid() {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(l.pool.server, l.pool.network.Bits())
}

// TunnelAddress6 returns the server's IPv6 tunnel address with its
// prefix length (PREFIX::1/LEN of server-ipv6), or the invalid prefix
// without an IPv6 pool.
func (s *Server) TunnelAddress6() netip.Prefix {
	l := s.live.Load()
	if l.pool6 == nil {
		return netip.Prefix{}
	}
	return netip.PrefixFrom(l.pool6.server, l.pool6.network.Bits())
}

// Config returns the configuration in use (the last one applied by
// ApplyReload), defaults applied.
func (s *Server) Config() Config { return s.live.Load().cfg }

// Stats returns the drop counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Clients lists the connected clients (those that got their push).
func (s *Server) Clients() []ClientInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]ClientInfo, 0, len(s.byVaddr))
	for a, p := range s.byVaddr {
		if a.Is6() && p.vaddrLoad().IsValid() {
			continue // listed under its IPv4 address
		}
		if info := p.info(); !info.Since.IsZero() {
			out = append(out, info)
		}
	}
	return out
}

// newWrapper returns a fresh control-packet wrapper (own replay state):
// tls-auth, tls-crypt or none; an error under tls-crypt-v2.
func (s *Server) newWrapper() (wrap.Wrapper, error) {
	c := &s.live.Load().cfg // the wrapping keys are never reloaded
	switch {
	case c.TLSCryptV2Server != nil:
		// Each client's wrapper comes from its WKc (tlscryptv2.go).
		return nil, errors.New("server: tls-crypt-v2 wrappers are per client")
	case c.TLSCrypt != nil:
		return wrap.NewTLSCrypt(c.TLSCrypt, true)
	case c.TLSAuth != nil:
		digest, err := wrap.DigestByName(c.Auth)
		if err != nil {
			return nil, err
		}
		return wrap.NewTLSAuth(c.TLSAuth, c.KeyDirection, digest), nil
	}
	return wrap.None{}, nil
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
	if s.bind != nil {
		err = s.bind.Close()
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

// poolsString names the client address pools of c for messages.
func poolsString(c Config) string {
	switch {
	case !c.Network6.IsValid():
		return c.Network.String()
	case !c.Network.IsValid():
		return c.Network6.String() + " (IPv6 only)"
	}
	return c.Network.String() + " and " + c.Network6.String()
}
