package server

// One client of the server: its state, its registration with the server,
// sending to it and forgetting it. The rest of a client's life is in
// files of its own:
//
//	keyexchange.go: key-state goroutines (control.Exchange with side{p})
//	    -> peerinfo.go: the client's peer-info lines
//	    -> negotiate.go: first key: cipher, features, common name, address
//	    -> push.go: PUSH_REQUEST -> PUSH_REPLY; RESTART on shutdown
//	timers.go: every second: keepalive ping, ping-restart, hand-window,
//	    reneg-sec, lame-duck expiry

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/internal/sys/mono"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

type peer struct {
	s       *Server
	id      uint32                         // peer-id; immutable
	addr    atomic.Pointer[netip.AddrPort] // transport address; changed only under s.mu (float)
	route   conn.RouteCache                // UDP: the route to addr, published with it
	tx      transport                      // immutable
	ctrl    *control.Channel               // immutable; its flusher goroutine sends control packets
	kx      control.Exchange               // immutable; the key-exchange loop, with side{p}
	keys    control.Keys                   // primary and lame-duck key states, next key id
	created time.Time                      // immutable

	data   atomic.Pointer[data.Channel] // set by the first key exchange
	vaddr  atomic.Pointer[netip.Addr]   // tunnel address, set by the first key exchange; nil when IPv6-only
	vaddr6 atomic.Pointer[netip.Addr]   // IPv6 tunnel address (server-ipv6), stored before vaddr
	slot   netip.Addr                   // the pool address that numbers the client; guarded by s.mu
	// unproven: a session counted in s.unproven (its TLS handshake
	// has not completed); guarded by s.mu.
	unproven bool
	// iroutes are the networks behind the client (client-config-dir
	// iroute lines) in the server's internal routing table; guarded by
	// s.mu. srcRoutes is the same list for the lock-free source check
	// of its packets (ccd.go).
	iroutes   []netip.Prefix
	srcRoutes atomic.Pointer[[]netip.Prefix]

	// cfg is the configuration the client was last pushed (at its
	// creation, then at each push): its timers (ping, ping-restart)
	// follow what it was told, not a later reload.
	cfg atomic.Pointer[Config]
	// bornTLS is the TLS settings in force when the session was created,
	// then after each handshake those it was checked against
	// (keyexchange.go); set atomically.
	bornTLS atomic.Pointer[tls.Config]

	mu       sync.Mutex          // guards the fields below
	chain    []*x509.Certificate // the client's verified certificates, leaf first (ApplyReload checks them again)
	cn       string
	cipher   data.Cipher
	ekm      bool
	ccExit   bool
	dataV2   bool
	since    time.Time // when the first push went out (zero before)
	authFail string    // why the client is refused after the key exchange ("" = accepted)
	busy     int       // key exchanges in progress

	lastRecv atomic.Int64  // mono stamp of the last authenticated packet
	lastSend atomic.Int64  // mono stamp of the last data packet sent
	rxBytes  atomic.Uint64 // IP bytes received from the client
	txBytes  atomic.Uint64 // IP bytes sent to the client
	// compressWarned is set once the client's first refused or
	// undecompressable packet was logged (later ones are only counted in
	// Stats; compress.go).
	compressWarned atomic.Bool

	closed    chan struct{}
	closeOnce sync.Once

	keyMeta string // tls-crypt-v2 key metadata for ClientInfo; immutable
}

// newPeer registers a client and starts its goroutines. A nil tx means
// UDP through the server's socket.
func (s *Server) newPeer(from netip.AddrPort, local, remote wire.SessionID, w wrap.Wrapper, tx transport, resetSent bool) (*peer, error) {
	p := &peer{s: s, tx: tx, created: time.Now(), closed: make(chan struct{})}
	if v2, ok := w.(*wrap.V2Session); ok {
		p.keyMeta = wrap.DescribeMetadata(v2.Metadata())
	}
	p.addr.Store(&from)
	p.route.Set(conn.Endpoint{Dst: from})
	isUDP := tx == nil
	if isUDP {
		p.tx = udpTransport{p: p}
	}
	var ks0 *control.KeyState
	p.ctrl, ks0 = control.NewServerChannel(control.ChannelConfig{Wrapper: w, Send: p.sendControl, Logger: s.log.With("remote", from),
		OnSoftReset: func(ks *control.KeyState) { p.goKeyState(ks, false) }}, local, remote, resetSent)
	l := s.live.Load()
	cfg := &l.cfg
	p.cfg.Store(cfg)
	p.bornTLS.Store(l.tls)
	p.kx = control.Exchange{Channel: p.ctrl, TLS: s.tlsCfg, Timeout: s.handWindow, RenegSec: cfg.RenegSec, RenegEvery: s.opts.Timers.Reneg(),
		Done: p.closed, Keys: &p.keys, Side: side{p}, Auth: s.dataAuth}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.ctrl.Close()
		return nil, ErrClosed
	}
	if len(s.byID) >= cfg.MaxClients {
		s.mu.Unlock()
		p.ctrl.Close()
		s.stats.FailedHandshakes.add(FailMaxClients)
		return nil, fmt.Errorf("server: max-clients (%d) reached", cfg.MaxClients)
	}
	src := from.Addr()
	if s.unproven[src] >= maxUnprovenPerSource {
		s.mu.Unlock()
		p.ctrl.Close()
		s.stats.FailedHandshakes.add(FailRateLimit)
		return nil, fmt.Errorf("server: %d sessions from %s have not completed their handshake", maxUnprovenPerSource, src)
	}
	if !s.freq.allow(cfg.ConnectFreq, time.Duration(cfg.ConnectFreqSec)*time.Second, p.created) {
		s.mu.Unlock()
		p.ctrl.Close()
		s.stats.FailedHandshakes.add(FailRateLimit)
		return nil, fmt.Errorf("server: connect-freq (%d in %d s) reached", cfg.ConnectFreq, cfg.ConnectFreqSec)
	}
	p.unproven = true
	s.unproven[src]++
	for id := uint32(0); ; id++ {
		if s.byID[id] == nil {
			p.id = id
			break
		}
	}
	s.byID[p.id] = p
	var replaced *peer // an earlier pending session from the same address
	if isUDP {
		if s.byAddr[from] == nil {
			s.byAddr[from] = p
		} else {
			replaced = s.pending[from]
			s.pending[from] = p
		}
	}
	s.mu.Unlock()
	if replaced != nil {
		replaced.close("replaced by a newer session from the same address")
	}
	now := mono.Now()
	p.lastRecv.Store(now)
	p.lastSend.Store(now)
	s.log.Info("new session", "remote", from, "peer-id", p.id)
	s.wg.Add(1)
	go p.run()
	p.goKeyState(ks0, true)
	return p, nil
}

// remote returns the client's current transport address.
func (p *peer) remote() netip.AddrPort { return *p.addr.Load() }

func (p *peer) touch() { p.lastRecv.Store(mono.Now()) }

func (p *peer) vaddrLoad() netip.Addr {
	if a := p.vaddr.Load(); a != nil {
		return *a
	}
	return netip.Addr{}
}

// addresses names the client's tunnel addresses for messages.
func (ci ClientInfo) addresses() string {
	switch {
	case !ci.Address6.IsValid():
		return ci.Address.String()
	case !ci.Address.IsValid():
		return ci.Address6.String()
	}
	return ci.Address.String() + " and " + ci.Address6.String()
}

func (p *peer) vaddr6Load() netip.Addr {
	if a := p.vaddr6.Load(); a != nil {
		return *a
	}
	return netip.Addr{}
}

func (p *peer) info() ClientInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	ci := ClientInfo{CommonName: p.cn, Remote: p.remote(), Address: p.vaddrLoad(), Address6: p.vaddr6Load(), PeerID: p.id, Cipher: p.cipher, EKM: p.ekm, Since: p.since,
		RxBytes: p.rxBytes.Load(), TxBytes: p.txBytes.Load(), KeyMetadata: p.keyMeta}
	if a := p.keys.Primary(); a != nil {
		ci.KeyID = a.KS.ID
	}
	return ci
}

func (p *peer) sendControl(pkt []byte) error {
	buf := make([]byte, sendHeadroom+len(pkt))
	copy(buf[sendHeadroom:], pkt)
	return p.tx.send(buf, sendHeadroom, len(pkt))
}

// sendData encrypts and sends one payload (IP packet, ping or OCC).
func (p *peer) sendData(payload []byte) error {
	ch := p.data.Load()
	if ch == nil {
		return data.ErrNoKey
	}
	bp := p.s.txPool.Get().(*[]byte)
	frame, err := ch.EncryptInto(bp, sendHeadroom, payload)
	if err == nil {
		err = p.tx.send(frame, sendHeadroom, len(frame)-sendHeadroom)
		p.lastSend.Store(mono.Now())
	}
	p.s.txPool.Put(bp)
	return err
}

func (p *peer) label() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cn != "" {
		return p.cn + "/" + p.remote().String()
	}
	return p.remote().String()
}

func (p *peer) commonName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cn
}

// close forgets the client.
func (p *peer) close(reason string) {
	p.closeOnce.Do(func() {
		s := p.s
		s.mu.Lock()
		if s.byID[p.id] == p {
			delete(s.byID, p.id)
		}
		if a := p.remote(); s.byAddr[a] == p {
			delete(s.byAddr, a)
		} else if s.pending[a] == p {
			delete(s.pending, a)
		}
		if va := p.vaddrLoad(); va.IsValid() && s.byVaddr[va] == p {
			delete(s.byVaddr, va)
		}
		if va6 := p.vaddr6Load(); va6.IsValid() && s.byVaddr[va6] == p {
			delete(s.byVaddr, va6)
		}
		if p.slot.IsValid() {
			s.live.Load().pool.put(p.slot) // with mu: the pool in force
		}
		p.slot = netip.Addr{}
		if len(p.iroutes) > 0 {
			p.iroutes = nil
			s.rebuildIRoutesLocked()
		}
		s.proveLocked(p)
		s.mu.Unlock()
		close(p.closed)
		p.tx.close() // first: unblocks a flusher stuck in a TCP write
		p.ctrl.Close()
		info := p.info()
		s.log.Info("session ended", "client", p.label(), "reason", reason)
		if s.opts.Events != nil && !info.Since.IsZero() {
			s.opts.Events(Event{Kind: ClientDisconnected, Client: info, Reason: reason})
		}
	})
}

// promote makes p, a pending UDP session that completed its TLS
// handshake, the client at its address, and ends the session it
// replaces. It does nothing for any other peer.
func (p *peer) promote() {
	s := p.s
	a := p.remote()
	s.mu.Lock()
	s.proveLocked(p)
	if s.pending[a] != p {
		s.mu.Unlock()
		return
	}
	old := s.byAddr[a]
	delete(s.pending, a)
	s.byAddr[a] = p
	s.mu.Unlock()
	if old != nil {
		old.close("the client started a new session")
	}
}

// maxUnprovenPerSource caps, per source address, the sessions that
// have not completed their TLS handshake (UDP: past the cookie; TCP:
// past the first frame): one host with many ports cannot fill
// max-clients.
const maxUnprovenPerSource = 4

// proveLocked takes p out of the unproven count (at the end of its TLS
// handshake, or when it goes). s.mu is held.
func (s *Server) proveLocked(p *peer) {
	if !p.unproven {
		return
	}
	p.unproven = false
	src := p.remote().Addr()
	if s.unproven[src]--; s.unproven[src] <= 0 {
		delete(s.unproven, src)
	}
}

// connectFreq enforces connect-freq over a sliding window: the start
// times of the last n sessions.
type connectFreq struct {
	starts []time.Time // ring of the last n session starts
	next   int         // the oldest entry of starts once it is full
}

// allow records a session start at now and reports whether fewer than
// n started in the window before it (n == 0: always).
func (f *connectFreq) allow(n int, window time.Duration, now time.Time) bool {
	if n <= 0 {
		return true
	}
	if len(f.starts) < n {
		f.starts = append(f.starts, now)
		return true
	}
	if now.Sub(f.starts[f.next]) < window {
		return false
	}
	f.starts[f.next] = now
	f.next = (f.next + 1) % n
	return true
}

// remoteSession returns the client's session id.
func (p *peer) remoteSession() wire.SessionID {
	sid, _ := p.ctrl.RemoteSession()
	return sid
}
