package server

// One client of the server: its control session, key states, data
// channel, tunnel address and timers.
//
//	key state goroutine: TLS (server side) -> client key_method_2 (peer-info)
//	    -> first key: cipher from IV_CIPHERS, tunnel address, cc-exit/tls-ekm
//	    -> keys (tls-ekm or PRF) -> install -> our key_method_2
//	    -> messages: PUSH_REQUEST -> PUSH_REPLY; EXIT -> close
//	peer goroutine: control flush; every second: keepalive ping,
//	    ping-restart, hand-window, reneg-sec, lame-duck expiry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/keys"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// IV_PROTO bits the server reads.
const (
	ivProtoDataV2    = 1 << 1
	ivProtoTLSExport = 1 << 3
	ivProtoCCExit    = 1 << 7
)

type peer struct {
	s       *Server
	id      uint32                         // peer-id; immutable
	addr    atomic.Pointer[netip.AddrPort] // transport address; changed only under s.mu (float)
	uaddr   atomic.Pointer[net.UDPAddr]    // addr for batched UDP sends; stored with addr
	tx      transport                      // immutable
	ctrl    *control.Channel               // immutable; its flusher goroutine sends control packets
	created time.Time                      // immutable

	data   atomic.Pointer[data.Channel] // set by the first key exchange
	vaddr  atomic.Pointer[netip.Addr]   // tunnel address, set by the first key exchange; nil when IPv6-only
	vaddr6 atomic.Pointer[netip.Addr]   // IPv6 tunnel address (server-ipv6), stored before vaddr
	slot   netip.Addr                   // the pool address that numbers the client; guarded by s.mu

	mu        sync.Mutex // guards the fields below
	cn        string
	cipher    data.Cipher
	ekm       bool
	ccExit    bool
	dataV2    bool
	primary   *keyCtx // newest active key state
	lame      *keyCtx // previous one, until the transition window ends
	nextKeyID uint8
	renegAt   time.Time
	since     time.Time // when the first push went out (zero before)
	authFail  string    // why the client is refused after the key exchange ("" = accepted)
	busy      int       // key exchanges in progress

	lastRecv atomic.Int64  // unix ns of the last authenticated packet
	lastSend atomic.Int64  // unix ns of the last data packet sent
	rxBytes  atomic.Uint64 // IP bytes received from the client
	txBytes  atomic.Uint64 // IP bytes sent to the client

	closed    chan struct{}
	closeOnce sync.Once
}

type keyCtx struct {
	ks        *control.KeyState
	conn      *tls.Conn
	retiredAt time.Time // when a newer key replaced it; guarded by peer.mu
}

// newPeer registers a client and starts its goroutines. A nil tx means
// UDP through the server's socket.
func (s *Server) newPeer(from netip.AddrPort, local, remote wire.SessionID, w wrap.Wrapper, tx transport, resetSent bool) (*peer, error) {
	p := &peer{s: s, tx: tx, created: time.Now(), nextKeyID: 1, closed: make(chan struct{})}
	p.addr.Store(&from)
	p.uaddr.Store(net.UDPAddrFromAddrPort(from))
	isUDP := tx == nil
	if isUDP {
		p.tx = udpTransport{p: p}
	}
	var ks0 *control.KeyState
	p.ctrl, ks0 = control.NewServerChannel(control.ChannelConfig{Wrapper: w, Send: p.sendControl,
		OnSoftReset: func(ks *control.KeyState) { p.goKeyState(ks, false) }}, local, remote, resetSent)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		p.ctrl.Close()
		return nil, ErrClosed
	}
	if len(s.byID) >= s.cfg.MaxClients {
		s.mu.Unlock()
		p.ctrl.Close()
		return nil, fmt.Errorf("server: max-clients (%d) reached", s.cfg.MaxClients)
	}
	for id := uint32(0); ; id++ {
		if s.byID[id] == nil {
			p.id = id
			break
		}
	}
	s.byID[p.id] = p
	if isUDP {
		s.byAddr[from] = p
	}
	s.mu.Unlock()
	now := time.Now().UnixNano()
	p.lastRecv.Store(now)
	p.lastSend.Store(now)
	s.logf("openvpn server: %s: new session (peer-id %d)", from, p.id)
	s.wg.Add(1)
	go p.run()
	p.goKeyState(ks0, true)
	return p, nil
}

// remote returns the client's current transport address.
func (p *peer) remote() netip.AddrPort { return *p.addr.Load() }

func (p *peer) touch() { p.lastRecv.Store(time.Now().UnixNano()) }

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
	return ClientInfo{CommonName: p.cn, Remote: p.remote(), Address: p.vaddrLoad(), Address6: p.vaddr6Load(), PeerID: p.id, Cipher: p.cipher, EKM: p.ekm, Since: p.since,
		RxBytes: p.rxBytes.Load(), TxBytes: p.txBytes.Load()}
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
	buf := (*bp)[sendHeadroom:]
	copy(buf[data.Headroom:], payload)
	pkt, err := ch.Encrypt(buf, len(payload))
	if err == nil {
		off := sendHeadroom + data.Headroom - (len(pkt) - len(payload))
		err = p.tx.send(*bp, off, len(pkt))
		p.lastSend.Store(time.Now().UnixNano())
	}
	p.s.txPool.Put(bp)
	return err
}

// run runs the timers until the peer closes.
func (p *peer) run() {
	defer p.s.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-p.closed:
			return
		case now := <-tick.C:
			p.tick(now)
		}
	}
}

func (p *peer) tick(now time.Time) {
	cfg := &p.s.cfg
	p.mu.Lock()
	established := !p.since.IsZero()
	reneg := !p.renegAt.IsZero() && now.After(p.renegAt)
	busy := p.busy > 0
	lame := p.lame
	var lameSince time.Time
	if lame != nil {
		lameSince = lame.retiredAt
	}
	p.mu.Unlock()
	if !established {
		if now.Sub(p.created) > p.s.handWindow {
			p.close("TLS handshake or key exchange did not finish within hand-window")
		}
		return
	}
	if cfg.Ping > 0 && now.Sub(time.Unix(0, p.lastSend.Load())) >= time.Duration(cfg.Ping)*time.Second {
		_ = p.sendData(data.PingPayload)
	}
	if cfg.PingRestart > 0 && now.Sub(time.Unix(0, p.lastRecv.Load())) >= 2*time.Duration(cfg.PingRestart)*time.Second {
		p.close("inactivity timeout (ping-restart)")
		return
	}
	if ch := p.data.Load(); ch != nil {
		ch.DropSecondary(now, p.s.opts.TransitionWindow)
		if k := ch.Primary(); k != nil && k.NeedsRekey() {
			reneg = true
		}
	}
	// The old key state's control channel goes with its data key, a
	// transition window after it stopped sending.
	if lame != nil && now.Sub(lameSince) > p.s.opts.TransitionWindow {
		p.mu.Lock()
		if p.lame == lame {
			p.lame = nil
		}
		p.mu.Unlock()
		p.ctrl.Remove(lame.ks)
	}
	if reneg && !busy {
		p.mu.Lock()
		id := p.nextKeyID
		p.nextKeyID = nextKeyID(id)
		p.renegAt = time.Time{}
		p.mu.Unlock()
		ks, err := p.ctrl.Start(id)
		if err == nil {
			p.s.logf("openvpn server: %s: renegotiating (key %d)", p.label(), id)
			p.goKeyState(ks, false)
		}
	}
}

// nextKeyID follows OpenVPN: 0 only for the first key, then 1..7 cycling.
func nextKeyID(id uint8) uint8 {
	id = (id + 1) & wire.KeyIDMask
	if id == 0 {
		id = 1
	}
	return id
}

func (p *peer) label() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cn != "" {
		return p.cn + "/" + p.remote().String()
	}
	return p.remote().String()
}

// peerInfo holds the client's peer-info lines.
type peerInfo struct {
	proto   int
	ciphers []string
	ncp     int
	version string
}

func parsePeerInfo(s string) peerInfo {
	var pi peerInfo
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch k {
		case "IV_PROTO":
			pi.proto, _ = strconv.Atoi(v)
		case "IV_CIPHERS":
			pi.ciphers = strings.Split(v, ":")
		case "IV_NCP":
			pi.ncp, _ = strconv.Atoi(v)
		case "IV_VER":
			pi.version = v
		}
	}
	return pi
}

// negotiateCipher picks the first server cipher the client offers.
func negotiateCipher(server []data.Cipher, pi peerInfo) (data.Cipher, bool) {
	offered := pi.ciphers
	if len(offered) == 0 && pi.ncp >= 2 {
		offered = []string{"AES-256-GCM", "AES-128-GCM"}
	}
	for _, c := range server {
		for _, o := range offered {
			if strings.EqualFold(o, c.String()) {
				return c, true
			}
		}
	}
	return 0, false
}

// goKeyState runs ks in a goroutine the server's Close waits for.
func (p *peer) goKeyState(ks *control.KeyState, initial bool) {
	p.s.wg.Add(1)
	go func() {
		defer p.s.wg.Done()
		p.runKeyState(ks, initial)
	}()
}

// runKeyState runs TLS and the key exchange on ks, then its messages.
func (p *peer) runKeyState(ks *control.KeyState, initial bool) {
	if ks == nil {
		return
	}
	kc, mr, err := p.keyExchange(ks, initial)
	if err != nil {
		if initial {
			// Send what is queued (a TLS alert) so the client learns why,
			// then keep it from coming back with the same session.
			p.ctrl.Flush()
			p.s.bury(p)
			p.close(err.Error())
		} else if errors.Is(err, control.ErrVerify) {
			// The certificate no longer passes (revoked in the CRL,
			// expired): the session ends now rather than living on
			// with its old keys.
			p.ctrl.Flush()
			p.close("renegotiation of key " + strconv.Itoa(int(ks.ID)) + " failed: " + err.Error())
		} else {
			p.s.logf("openvpn server: %s: renegotiation of key %d failed: %v", p.label(), ks.ID, err)
			p.ctrl.Remove(ks)
		}
		return
	}
	for {
		m, err := mr.Read()
		if err != nil {
			return // key state removed or peer closed
		}
		switch control.MessageKind(m) {
		case "PUSH_REQUEST":
			if err := p.push(kc); err != nil {
				p.s.logf("openvpn server: %s: push: %v", p.label(), err)
			}
		case "EXIT":
			// Acknowledge before forgetting the client, so it need not
			// retransmit.
			p.ctrl.Flush()
			p.close("the client sent an exit notification")
			return
		default:
			p.s.logf("openvpn server: %s: control message %q ignored", p.label(), control.MessageKind(m))
		}
	}
}

func (p *peer) keyExchange(ks *control.KeyState, initial bool) (*keyCtx, *control.MessageReader, error) {
	s := p.s
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.busy--
		p.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), s.handWindow)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ks.Conn().Close() })
	defer stop()
	conn := tls.Server(ks.Conn(), s.tlsCfg)
	if err := conn.HandshakeContext(ctx); err != nil {
		return nil, nil, fmt.Errorf("TLS handshake: %w", err)
	}
	cs := conn.ConnectionState()
	cn := ""
	if len(cs.PeerCertificates) > 0 {
		cn = cs.PeerCertificates[0].Subject.CommonName
	}
	peerKM, err := control.ReadKeyMethod2(conn, true)
	if err != nil {
		return nil, nil, err
	}
	if initial {
		if err := p.setup(cn, parsePeerInfo(peerKM.PeerInfo)); err != nil {
			return nil, nil, err
		}
	}
	mine, err := control.NewKeyMethod2(false)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	ciph, ekm, refused := p.cipher, p.ekm, p.authFail
	p.mu.Unlock()
	mine.Options = fmt.Sprintf("V4,dev-type tun,link-mtu %d,tun-mtu %d,proto %s,cipher %s,auth [null-digest],keysize %d,key-method 2,tls-server",
		s.cfg.MTU+49, s.cfg.MTU, p.tx.name(), ciph, ciph.KeyLen()*8)
	var m keys.Material
	if ekm {
		if m, err = keys.FromEKM(cs.ExportKeyingMaterial); err != nil {
			return nil, nil, fmt.Errorf("tls-ekm: %w", err)
		}
	} else {
		remoteSID, _ := p.ctrl.RemoteSession()
		src := keys.Sources{PreMaster: peerKM.PreMaster, ClientRandom1: peerKM.Random1, ClientRandom2: peerKM.Random2,
			ServerRandom1: mine.Random1, ServerRandom2: mine.Random2, ClientSession: remoteSID, ServerSession: p.ctrl.LocalSession()}
		m = keys.FromPRF(&src)
		clear(src.PreMaster[:])
	}
	peerKM.Wipe()
	send, recv := m.Split(ciph.KeyLen(), false)
	m.Wipe()
	k, err := data.NewKey(ks.ID, ciph, send.Key, send.ImplicitIV, recv.Key, recv.ImplicitIV)
	clear(send.Key)
	clear(recv.Key)
	if err != nil {
		return nil, nil, err
	}
	if refused != "" {
		if _, err := conn.Write(mine.Marshal(false)); err == nil {
			if err := control.WriteMessage(conn, "AUTH_FAILED,"+refused); err == nil {
				p.waitAcked(ks, 2*time.Second)
			}
		}
		return nil, nil, errors.New(refused)
	}
	if initial {
		p.data.Load().Install(k)
	} else {
		// Receive with the new key at once (the client may use it as soon
		// as it has our key_method_2), send with it once the client has
		// acknowledged that message.
		p.data.Load().Prepare(k)
	}
	if _, err := conn.Write(mine.Marshal(false)); err != nil {
		return nil, nil, fmt.Errorf("sending key_method_2: %w", err)
	}
	mine.Wipe()
	if !initial {
		// Switch sending to the new key once the client has our
		// key_method_2 (and so the key); until then it could not decrypt.
		p.waitAcked(ks, 5*time.Second)
		p.data.Load().Install(k)
	}
	kc := &keyCtx{ks: ks, conn: conn}
	p.mu.Lock()
	old := p.lame
	p.lame, p.primary = p.primary, kc
	if p.lame != nil {
		p.lame.retiredAt = time.Now()
		p.ctrl.Retire(p.lame.ks)
	}
	p.nextKeyID = nextKeyID(ks.ID)
	if s.cfg.RenegSec > 0 {
		p.renegAt = time.Now().Add(time.Duration(s.cfg.RenegSec) * time.Second)
	}
	p.mu.Unlock()
	if old != nil {
		p.ctrl.Remove(old.ks)
	}
	s.logf("openvpn server: %s: key %d active (%v, %s)", p.label(), ks.ID, ciph, map[bool]string{true: "tls-ekm", false: "PRF"}[ekm])
	return kc, control.NewMessageReader(conn), nil
}

// waitAcked waits up to d until everything sent on ks was acknowledged.
func (p *peer) waitAcked(ks *control.KeyState, d time.Duration) {
	deadline := time.Now().Add(d)
	for !ks.Idle() && time.Now().Before(deadline) {
		select {
		case <-p.closed:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// setup runs once per client after its first key_method_2: cipher and
// feature negotiation, the common-name policy and the tunnel address.
func (p *peer) setup(cn string, pi peerInfo) error {
	s := p.s
	ciph, ok := negotiateCipher(s.cfg.DataCiphers, pi)
	if !ok {
		// The key exchange still completes (the client expects our
		// key_method_2); the refusal follows it.
		p.mu.Lock()
		p.cn, p.cipher = cn, s.cfg.DataCiphers[0]
		p.authFail = fmt.Sprintf("no shared data cipher (client offers %q, server has %v)", strings.Join(pi.ciphers, ":"), s.cfg.DataCiphers)
		p.mu.Unlock()
		return nil
	}
	if !s.cfg.DuplicateCN && cn != "" {
		s.mu.RLock()
		var dups []*peer
		for _, q := range s.byID {
			if q != p && q.commonName() == cn {
				dups = append(dups, q)
			}
		}
		s.mu.RUnlock()
		for _, q := range dups {
			q.close("replaced by a new session with the same common name")
		}
	}
	addr, err := s.pool.get()
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.pool.put(addr)
		return ErrClosed
	}
	select {
	case <-p.closed:
		s.mu.Unlock()
		s.pool.put(addr)
		return ErrClosed
	default:
	}
	if s.pool6 != nil {
		a6 := s.pool6.addrFor(addr)
		p.vaddr6.Store(&a6)
		s.byVaddr[a6] = p
	}
	p.slot = addr
	if s.cfg.Network.IsValid() {
		// An IPv6-only server's slot is no address of the client's.
		p.vaddr.Store(&addr)
		s.byVaddr[addr] = p
	}
	s.mu.Unlock()
	p.mu.Lock()
	p.cn = cn
	p.cipher = ciph
	p.dataV2 = pi.proto&ivProtoDataV2 != 0
	p.ekm = pi.proto&ivProtoTLSExport != 0
	p.ccExit = pi.proto&ivProtoCCExit != 0
	peerID := wire.UndefinedPeerID
	if p.dataV2 {
		peerID = p.id
	}
	p.mu.Unlock()
	p.data.Store(data.NewChannel(peerID))
	return nil
}

func (p *peer) commonName() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cn
}

// pushOptions builds the options of the client's PUSH_REPLY.
func (p *peer) pushOptions() []string {
	s := p.s
	p.mu.Lock()
	defer p.mu.Unlock()
	opts := append([]string(nil), s.cfg.Push...)
	if s.cfg.Network.IsValid() {
		opts = append(opts, "route-gateway "+s.pool.server.String())
	}
	opts = append(opts, "topology subnet")
	if s.cfg.Ping > 0 {
		opts = append(opts, fmt.Sprintf("ping %d", s.cfg.Ping))
	}
	if s.cfg.PingRestart > 0 {
		opts = append(opts, fmt.Sprintf("ping-restart %d", s.cfg.PingRestart))
	}
	if a6 := p.vaddr6Load(); a6.IsValid() {
		opts = append(opts, fmt.Sprintf("ifconfig-ipv6 %s/%d %s", a6, s.pool6.network.Bits(), s.pool6.server))
	}
	if a := p.vaddrLoad(); a.IsValid() {
		opts = append(opts, fmt.Sprintf("ifconfig %s %s", a, maskString(s.pool.network.Bits())))
	}
	if p.dataV2 {
		opts = append(opts, fmt.Sprintf("peer-id %d", p.id))
	}
	opts = append(opts, "cipher "+p.cipher.String())
	var flags []string
	if p.ccExit {
		flags = append(flags, "cc-exit")
	}
	if p.ekm {
		flags = append(flags, "tls-ekm")
	}
	if len(flags) > 0 {
		opts = append(opts, "protocol-flags "+strings.Join(flags, " "))
	}
	return opts
}

// maxPushMessage keeps each PUSH_REPLY part well inside one control
// message, as OpenVPN splits long replies.
const maxPushMessage = 1024

// pushMessages joins options into PUSH_REPLY messages, split with
// push-continuation when they do not fit one.
func pushMessages(opts []string) []string {
	var parts [][]string
	cur, size := []string(nil), len("PUSH_REPLY")
	const contLen = len(",push-continuation 2")
	for _, o := range opts {
		if len(cur) > 0 && size+1+len(o)+contLen > maxPushMessage {
			parts = append(parts, cur)
			cur, size = nil, len("PUSH_REPLY")
		}
		cur = append(cur, o)
		size += 1 + len(o)
	}
	parts = append(parts, cur)
	msgs := make([]string, len(parts))
	for i, part := range parts {
		m := "PUSH_REPLY," + strings.Join(part, ",")
		if len(parts) > 1 {
			if i < len(parts)-1 {
				m += ",push-continuation 2"
			} else {
				m += ",push-continuation 1"
			}
		}
		msgs[i] = m
	}
	return msgs
}

// push answers a PUSH_REQUEST.
func (p *peer) push(kc *keyCtx) error {
	// Connected from before the reply goes out: the client may send data
	// (and a caller may list clients) as soon as it has read the reply.
	p.mu.Lock()
	first := p.since.IsZero()
	if first {
		p.since = time.Now()
	}
	p.mu.Unlock()
	for _, m := range pushMessages(p.pushOptions()) {
		if err := control.WriteMessage(kc.conn, m); err != nil {
			if first {
				p.mu.Lock()
				p.since = time.Time{} // not connected after all; the next PUSH_REQUEST tries again
				p.mu.Unlock()
			}
			return err
		}
	}
	if first {
		info := p.info()
		p.s.logf("openvpn server: %s: connected as %s (peer-id %d, %v)", p.label(), info.addresses(), info.PeerID, info.Cipher)
		if p.s.opts.Events != nil {
			p.s.opts.Events(Event{Kind: ClientConnected, Client: info})
		}
	}
	return nil
}

// notifyRestart tells a cc-exit client that the server goes away, waiting
// up to d for the acknowledgement.
func (p *peer) notifyRestart(d time.Duration) {
	p.mu.Lock()
	kc, cc := p.primary, p.ccExit
	p.mu.Unlock()
	if kc == nil || !cc {
		return
	}
	if err := control.WriteMessage(kc.conn, "RESTART"); err != nil {
		return
	}
	deadline := time.Now().Add(d)
	for !kc.ks.Idle() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
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
		}
		if va := p.vaddrLoad(); va.IsValid() && s.byVaddr[va] == p {
			delete(s.byVaddr, va)
		}
		if va6 := p.vaddr6Load(); va6.IsValid() && s.byVaddr[va6] == p {
			delete(s.byVaddr, va6)
		}
		slot := p.slot
		p.slot = netip.Addr{}
		s.mu.Unlock()
		if slot.IsValid() {
			s.pool.put(slot)
		}
		close(p.closed)
		p.tx.close() // first: unblocks a flusher stuck in a TCP write
		p.ctrl.Close()
		info := p.info()
		s.logf("openvpn server: %s: session ended: %s", p.label(), reason)
		if s.opts.Events != nil && !info.Since.IsZero() {
			s.opts.Events(Event{Kind: ClientDisconnected, Client: info, Reason: reason})
		}
	})
}

// remoteSession returns the client's session id.
func (p *peer) remoteSession() wire.SessionID {
	sid, _ := p.ctrl.RemoteSession()
	return sid
}
