// Package client is an OpenVPN 2.6 client session over UDP or TCP: hard
// reset, TLS, key_method_2, push request/reply, data-channel keys,
// keepalive, renegotiation and a clean exit. It exposes the tunnel as a
// packet interface (ReadPacket/WritePacket of IP packets) so a TUN device
// or a test can sit on top.
//
// Pipelines of a Session:
//
//	receive goroutines (one per socket; conn.StdBind batches or TCP frames):
//	    handlePacket -> data opcode    -> data.Decrypt -> ping/exit handling
//	                                      -> DeliverTo set: the goroutine's rxBatch (copied
//	                                         behind the writer's headroom), one Write per
//	                                         receive batch
//	                                      -> else rx queue (pktqueue) -> ReadPacket(s)
//	                 -> control opcode -> control.Channel.HandlePacket
//	WritePacket (any goroutine): copy to pooled buffer -> data.Encrypt -> transport.send
//	    (UDP: conn.RouteCache.Borrow, one atomic load, then StdBind.Send)
//	WritePackets: the same per packet into a pooled batch, then one
//	    transport.sendBatch (UDP: one StdBind.Send of the batch; TCP: one writev)
//	key-state goroutines: TLS handshake -> key_method_2 -> (first key) push -> keys -> message loop
//	timer goroutine (1 s): keepalive ping, ping-restart, reneg-sec, lame-duck expiry
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/internal/sys/mono"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/internal/pktqueue"
	"github.com/wirelane/wirelane/ovpn/internal/testtimers"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Options tune Dial beyond the configuration file.
type Options struct {
	// Logger receives diagnostics (nil: none); secrets are never passed
	// to it.
	Logger *slog.Logger
	// HandshakeTimeout bounds each remote's connection attempt (default:
	// the file's hand-window, 60 s unless it says otherwise).
	HandshakeTimeout time.Duration
	// Username and Password are used for auth-user-pass when the
	// configuration does not carry them, or carries the username only
	// (config.Config.AsksPassword: the caller asked for the password;
	// Username is then set too, usually to the file's).
	Username, Password string
	// DisableEKM leaves TLS_KEY_EXPORT out of IV_PROTO, so the server uses
	// the older PRF key expansion.
	DisableEKM bool
	// PushMTU is the largest pushed tun-mtu the caller applies to its
	// device, announced to the server as IV_MTU as OpenVPN 2.6 does
	// (0: not announced). The pushed value is in Pushed().TunMTU.
	PushMTU int
	// WrapSocket, when set, runs fn (which creates the session's socket)
	// and returns once fn has; tests use it to create the socket in another
	// network namespace.
	WrapSocket func(fn func()) error
	// TransitionWindow is how long an old key keeps decrypting after a
	// renegotiation (default 60 s).
	TransitionWindow time.Duration
	// OnEvent, when set, receives the phases of Dial (events.go) in
	// order, one at a time, from Dial's goroutine or the session's; it
	// must not block for long. Nothing is reported once Dial returns.
	OnEvent func(Event)
	// Retry makes Dial go on after every remote failed, as OpenVPN's
	// client does: it pauses connect-retry seconds (doubling after the
	// fifth round, up to its maximum) and tries the remotes again, until
	// connect-retry-max rounds, or resolv-retry seconds of nothing but
	// failed lookups, or ctx ends. Without it each remote is tried once.
	Retry bool
	// Lookup resolves a remote's host name for network "ip", "ip4" or
	// "ip6" (nil: the system resolver).
	Lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
	// OnWarning, when set, receives conditions of a running session the
	// user should see, each at most once per session (such as the
	// server's first compressed packet); it is called from a receive
	// goroutine and must not block.
	OnWarning func(msg string)
	// AuthToken keeps a pushed auth-token for later key exchanges; pass
	// the same one to every Dial of a tunnel so that reconnects use it
	// instead of the password (nil: Dial makes one for its session).
	AuthToken *AuthToken
	// ChallengeResponse answers the file's static-challenge; it is sent
	// with the password as OpenVPN does (SCRV1).
	ChallengeResponse string
	// Timers shortens the session's timers for the rekey soak; only
	// packages under ovpn/ can make one (ovpn/internal/testtimers), so it
	// is nil in the product.
	Timers *testtimers.Timers
}

// Errors a Session reports.
var (
	ErrAuthFailed = errors.New("client: authentication failed (AUTH_FAILED)")
	ErrServerExit = errors.New("client: server ended the session")
	ErrRestart    = errors.New("client: server asked for a restart")
	// ErrRestartNext is a restart to the next server (RESTART,[N], from
	// a server with explicit-exit-notify 2); errors.Is(ErrRestart) holds.
	ErrRestartNext = fmt.Errorf("%w at the next server", ErrRestart)
	ErrHalt        = errors.New("client: server asked the client to stop (HALT)")
	ErrPingRestart = errors.New("client: nothing received within ping-restart")
	ErrClosed      = errors.New("client: session closed")
	ErrTimeout     = errors.New("client: handshake timed out")
)

// Version is sent as IV_VER.
const Version = "2.6.14"

// Session is a connected OpenVPN client session.
type Session struct {
	// Immutable after dialRemote.
	cfg  *config.Config
	opts Options
	log  *slog.Logger // Options.Logger with the remote
	ev   *emitter     // Dial's events; stopped once Dial returns
	// answered reports the server's first reply once (pollServer or
	// side.Hello, whichever comes first, so the events stay in order).
	answered sync.Once
	tr       transport
	ctrl     *control.Channel
	kx       control.Exchange // the key-exchange loop, with side{s}
	tlsCfg   *tls.Config
	remote   string
	entry    config.Remote // the remote (of the configuration's list) dialled
	keys     control.Keys  // primary and lame-duck key states, next key id

	data atomic.Pointer[data.Channel] // stored once, when the first push is processed

	mu     sync.Mutex // guards the fields below
	push   *control.PushReply
	cipher data.Cipher
	useEKM bool
	// serverOptions is the options string of the server's first
	// key_method_2 (its cipher, for a server that pushes none).
	serverOptions string

	lastRecv atomic.Int64  // mono stamp of the last authenticated packet
	lastSend atomic.Int64  // mono stamp of the last data packet sent
	rxBytes  atomic.Uint64 // IP packet bytes delivered from the tunnel
	txBytes  atomic.Uint64 // IP packet bytes sent into the tunnel
	since    time.Time     // when Dial completed; immutable after
	batches  sync.Pool     // *txBatch for WritePackets
	wrapErr  atomic.Value  // last control unwrap error (string), for diagnostics
	// droppedControl and droppedData count packets that failed their
	// checks (unauthenticated, replayed, malformed); they are counted,
	// not logged, and the timers log a summary at most every
	// dropSummaryEvery.
	droppedControl, droppedData atomic.Uint64
	// droppedCompressed counts data packets the server compressed
	// (authenticated, then dropped: a stub framing or stubs only);
	// decompressed and decompressFailed count those decompressed
	// (asym: config/compress.go) and those that failed to; compressWarned
	// is set once the first drop was logged (compress.go).
	droppedCompressed, decompressed, decompressFailed atomic.Uint64
	compressWarned                                    atomic.Bool
	// tokenSent is whether the last key_method_2 carried the auth-token
	// instead of the password.
	tokenSent     atomic.Bool
	dropsLogged   uint64    // drops covered by the last summary; owned by the timers goroutine
	dropsLoggedAt time.Time // when that summary went out; owned by the timers goroutine

	rx      *pktqueue.Queue      // received packets for ReadPacket(s)
	sink    atomic.Pointer[sink] // set by DeliverTo; nil: packets go to rx
	txPool  sync.Pool            // *[]byte send buffers with head- and tailroom
	closed  chan struct{}        // closed by fail
	closeMu sync.Once            // makes fail run once
	err     error                // written once by fail before closed is closed; read after
	wg      sync.WaitGroup       // receive and timer goroutines
}

const (
	rxQueue  = 256
	rxBufLen = 2048
	maxPkt   = 65535
)

func tlsVersion(s string) uint16 {
	if s == "1.3" {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

// dialRemote runs one connection attempt to r at server: the socket,
// the wait for the server's reset (server-poll-timeout), the key
// exchange and the push (hand-window). Its phases go to ev.
func dialRemote(ctx context.Context, cfg *config.Config, opts Options, tlsCfg *tls.Config, r config.Remote, server netip.AddrPort, ev *emitter) (*Session, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.HandshakeTimeout)
	defer cancel()
	tr, err := openTransport(ctx, &opts, server, r.Proto == config.TCP)
	if err != nil {
		return nil, err
	}
	s := &Session{cfg: cfg, opts: opts, log: opts.Logger.With("remote", r.Address()), ev: ev, tr: &countedTransport{transport: tr}, tlsCfg: tlsCfg, remote: r.Address(), entry: r,
		rx: pktqueue.New(rxQueue, rxBufLen), closed: make(chan struct{})}
	s.txPool.New = func() any { b := make([]byte, sendHeadroom+data.Headroom+maxPkt+data.Tailroom); return &b }
	s.batches.New = func() any { return new(txBatch) }
	var w wrap.Wrapper
	switch {
	case cfg.TLSCryptV2Client != nil:
		if w, err = wrap.NewV2Client(cfg.TLSCryptV2Client); err != nil {
			tr.close()
			return nil, err
		}
	case cfg.TLSCrypt != nil:
		if w, err = wrap.NewTLSCrypt(cfg.TLSCrypt, false); err != nil {
			tr.close()
			return nil, err
		}
	case cfg.TLSAuth != nil:
		digest, err := wrap.DigestByName(cfg.Auth)
		if err != nil {
			tr.close()
			return nil, err
		}
		w = wrap.NewTLSAuth(cfg.TLSAuth, cfg.KeyDirection, digest)
	}
	s.ctrl, err = control.NewChannel(control.ChannelConfig{Client: true, Wrapper: w, Send: s.sendControl, Logger: s.log,
		OnSoftReset: func(ks *control.KeyState) { go s.runKeyState(context.Background(), ks, false, nil) }})
	if err != nil {
		tr.close()
		return nil, err
	}
	digest, err := wrap.DigestByName(cfg.Auth)
	if err != nil {
		s.fail(err)
		return nil, err
	}
	s.kx = control.Exchange{Channel: s.ctrl, TLS: tlsCfg, Client: true, Timeout: opts.HandshakeTimeout,
		RenegSec: cfg.RenegSec, RenegEvery: s.opts.Timers.Reneg(), Done: s.closed, Keys: &s.keys, Side: side{s}, Auth: digest}
	now := mono.Now()
	s.lastRecv.Store(now)
	s.lastSend.Store(now)
	tr.serve(&s.wg, s.newRxBatch, s.fail)
	ks, err := s.ctrl.Start(0)
	if err != nil {
		s.fail(err)
		return nil, err
	}
	ev.emit(StateWait, "waiting for the server's reply", nil)
	dialed := make(chan struct{})
	defer close(dialed)
	go s.pollServer(time.Duration(cmp0(r.PollTimeout, cmp0(cfg.ServerPollTimeout, 120)))*time.Second, dialed)
	ready := make(chan error, 1)
	go s.runKeyState(ctx, ks, true, ready)
	select {
	case err = <-ready:
	case <-s.closed:
		err = s.err
	}
	if err != nil {
		s.fail(err)
		s.wg.Wait()
		return nil, err
	}
	s.since = time.Now()
	s.wg.Add(1)
	go s.timers()
	return s, nil
}

// serverAnswered reports the server's first reply (once).
func (s *Session) serverAnswered() {
	s.answered.Do(func() { s.ev.emit(StateAuth, "TLS handshake (the server answered)", nil) })
}

// pollServer reports the server's first reply (its reset: the TLS
// handshake starts) or ends the attempt when none came within poll
// (server-poll-timeout), whichever is first, saying every waitNote that
// it still waits; it returns early when the dial is over.
func (s *Session) pollServer(poll time.Duration, dialed <-chan struct{}) {
	start := time.Now()
	t := time.NewTimer(poll)
	defer t.Stop()
	note := time.NewTicker(waitNote)
	defer note.Stop()
	for {
		select {
		case <-s.ctrl.PeerKnown():
			s.serverAnswered()
			return
		case <-note.C:
			s.ev.emit(StateWait, fmt.Sprintf("no reply from the server yet (%.0f s; giving up after %v)", time.Since(start).Seconds(), min(poll, s.opts.HandshakeTimeout)), nil)
		case <-t.C:
			s.fail(s.timeoutError(fmt.Errorf("server-poll-timeout %v", poll)))
			return
		case <-s.closed:
			return
		case <-dialed:
			return
		}
	}
}

// waitNote is how often a silent server is reported while waiting.
const waitNote = 10 * time.Second

func (s *Session) timeoutError(cause error) error {
	if _, ok := s.ctrl.RemoteSession(); !ok {
		msg := "no reply from the server (unreachable, or wrong tls-auth/tls-crypt/tls-crypt-v2 key)"
		if e, ok := s.wrapErr.Load().(string); ok {
			msg += "; last dropped packet: " + e
		}
		return fmt.Errorf("%w: %s: %v", ErrTimeout, msg, cause)
	}
	return fmt.Errorf("%w: TLS or key exchange did not finish: %v", ErrTimeout, cause)
}

// sendControl is the control channel's transport.
func (s *Session) sendControl(pkt []byte) error {
	buf := make([]byte, sendHeadroom+len(pkt))
	copy(buf[sendHeadroom:], pkt)
	return s.tr.send(buf, sendHeadroom, len(pkt))
}

// fail ends the session with err (first error wins).
func (s *Session) fail(err error) {
	s.closeMu.Do(func() {
		s.err = err
		close(s.closed)
		s.ctrl.Close()
		s.tr.close()
	})
}

// Err returns why the session ended, or nil while it runs.
func (s *Session) Err() error {
	select {
	case <-s.closed:
		return s.err
	default:
		return nil
	}
}

// Done is closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.closed }

// Pushed returns the server's pushed options.
func (s *Session) Pushed() *control.PushReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.push
}

// Cipher returns the negotiated data-channel cipher.
func (s *Session) Cipher() data.Cipher {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cipher
}

// KeyID returns the key id of the current send key.
func (s *Session) KeyID() uint8 {
	if ch := s.data.Load(); ch != nil {
		if k := ch.Primary(); k != nil {
			return k.ID
		}
	}
	return 0
}

// handlePacket processes one packet from the server; pkt has data.Tailroom
// spare capacity and is only valid during the call. Payloads go to rb
// when a writer is attached (DeliverTo), else to the rx queue.
func (s *Session) handlePacket(pkt []byte, rb *rxBatch) {
	op, _ := wire.Header(pkt[0])
	if !op.IsData() {
		if err := s.ctrl.HandlePacket(pkt); err != nil {
			s.wrapErr.Store(err.Error())
			s.droppedControl.Add(1)
			return
		}
		s.lastRecv.Store(mono.Now())
		return
	}
	ch := s.data.Load()
	if ch == nil {
		return
	}
	payload, kind, err := ch.Decrypt(pkt)
	if err != nil {
		if errors.Is(err, data.ErrCompressed) || errors.Is(err, data.ErrDecompress) {
			s.dropCompressed(err)
			return
		}
		s.droppedData.Add(1)
		return
	}
	// The receive time is taken once per receive batch (rxBatch.flush),
	// not per packet: the timers count in seconds.
	rb.recv = true
	switch kind {
	case data.KindPing, data.KindOCC:
		return
	case data.KindExit:
		s.fail(ErrServerExit)
		return
	}
	s.rxBytes.Add(uint64(len(payload)))
	if rb.add(payload) {
		return
	}
	s.rx.Put(payload) // a full queue drops, like a NIC ring
}

// ReadPacket reads one IP packet from the tunnel into b. It returns the
// session's error once it has ended.
func (s *Session) ReadPacket(b []byte) (int, error) {
	n, ok := s.rx.Read(b, s.closed)
	if !ok {
		return 0, s.err
	}
	return n, nil
}

// WritePacket sends one IP packet through the tunnel. It may be called
// concurrently and does not allocate.
func (s *Session) WritePacket(p []byte) error {
	select {
	case <-s.closed:
		return s.err
	default:
	}
	if len(p) > maxPkt-64 {
		return fmt.Errorf("client: packet of %d bytes too large", len(p))
	}
	return s.sendData(p)
}

func (s *Session) sendData(p []byte) error {
	ch := s.data.Load()
	if ch == nil {
		return data.ErrNoKey
	}
	bp := s.txPool.Get().(*[]byte)
	frame, err := ch.EncryptInto(bp, sendHeadroom, p)
	if err == nil {
		err = s.tr.send(frame, sendHeadroom, len(frame)-sendHeadroom)
		s.lastSend.Store(mono.Now())
		s.txBytes.Add(uint64(len(p)))
	}
	s.txPool.Put(bp)
	return err
}

// maxWriteBatch is how many packets WritePackets encrypts before one
// transport send.
const maxWriteBatch = 64

// txBatch holds the send buffers of one WritePackets call.
type txBatch struct {
	bufs [maxWriteBatch][]byte // send buffers, grown by data.Channel.EncryptInto
	out  [maxWriteBatch][]byte // the framed packets handed to the transport
}

// WritePackets sends several IP packets through the tunnel, encrypting
// them and handing them to the transport in batches (one sendmmsg, with
// UDP GSO where available, or one writev on TCP). It may be called
// concurrently and does not allocate once warm. A packet that is too
// large fails the call; the packets before it are sent.
func (s *Session) WritePackets(pkts [][]byte) error {
	select {
	case <-s.closed:
		return s.err
	default:
	}
	ch := s.data.Load()
	if ch == nil {
		return data.ErrNoKey
	}
	b := s.batches.Get().(*txBatch)
	defer s.batches.Put(b)
	for len(pkts) > 0 {
		chunk := pkts[:min(len(pkts), maxWriteBatch)]
		pkts = pkts[len(chunk):]
		n, total := 0, 0
		var bad error
		for _, p := range chunk {
			if len(p) > maxPkt-64 {
				bad = fmt.Errorf("client: packet of %d bytes too large", len(p))
				break
			}
			frame, err := ch.EncryptInto(&b.bufs[n], sendHeadroom, p)
			if err != nil {
				bad = err
				break
			}
			b.out[n] = frame
			n++
			total += len(p)
		}
		if n > 0 {
			err := s.tr.sendBatch(b.out[:n])
			clear(b.out[:n])
			s.lastSend.Store(mono.Now())
			s.txBytes.Add(uint64(total))
			if err != nil {
				return err
			}
		}
		if bad != nil {
			return bad
		}
	}
	return nil
}

// ReadPackets waits for at least one IP packet from the tunnel, then
// copies it and whatever else is already queued (up to len(bufs)) into
// bufs[i][offset:], setting sizes[i]. It returns the number of packets,
// or the session's error once it has ended.
func (s *Session) ReadPackets(bufs [][]byte, sizes []int, offset int) (int, error) {
	n, ok := s.rx.ReadBatch(bufs, sizes, offset, s.closed)
	if !ok {
		return 0, s.err
	}
	return n, nil
}

// RemoteAddr returns the transport address of the server that answered
// (the remote Dial connected to).
func (s *Session) RemoteAddr() netip.AddrPort { return s.tr.remote() }

// RemoteEntry returns the entry of the configuration's remote list (a
// remote line or <connection> block) the session was dialled from.
func (s *Session) RemoteEntry() config.Remote { return s.entry }

// Transport names the transport: UDPv4, UDPv6, TCPv4_CLIENT or
// TCPv6_CLIENT.
func (s *Session) Transport() string { return s.tr.name() }

// Stats are a session's counters.
type Stats struct {
	// RxBytes and TxBytes count IP packet bytes received from and sent
	// into the tunnel (keepalives and control traffic excluded).
	RxBytes, TxBytes uint64
	// Since is when the session was established.
	Since time.Time
	// DroppedControl and DroppedData count received packets that failed
	// their checks (authentication, replay, format) and were dropped.
	DroppedControl, DroppedData uint64
	// DroppedCompressed counts data packets the server compressed:
	// authenticated, then dropped under a stub framing or
	// allow-compression no (explicit or by default: config/compress.go).
	// Decompressed counts those decompressed (a line naming an algorithm
	// under asym), DecompressFailed those that were
	// not valid compressed data or would have been larger than the TUN
	// MTU (dropped, not counted in DroppedCompressed).
	DroppedCompressed, Decompressed, DecompressFailed uint64
}

// Stats returns the session's counters.
func (s *Session) Stats() Stats {
	return Stats{RxBytes: s.rxBytes.Load(), TxBytes: s.txBytes.Load(), Since: s.since,
		DroppedControl: s.droppedControl.Load(), DroppedData: s.droppedData.Load(), DroppedCompressed: s.droppedCompressed.Load(),
		Decompressed: s.decompressed.Load(), DecompressFailed: s.decompressFailed.Load()}
}

// Close ends the session: it tells the server (EXIT control message when
// cc-exit was negotiated, else an OCC exit data packet), waits briefly for
// the acknowledgement and closes the socket.
func (s *Session) Close() error {
	select {
	case <-s.closed:
		return nil
	default:
	}
	s.mu.Lock()
	push := s.push
	s.mu.Unlock()
	if kc := s.keys.Primary(); kc != nil && push != nil && push.CCExit {
		if err := control.WriteMessage(kc.Conn, "EXIT"); err == nil {
			deadline := time.Now().Add(2 * time.Second)
			for !kc.KS.Idle() && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
		}
	} else {
		_ = s.sendData(data.OCCExitPayload)
	}
	s.fail(ErrClosed)
	s.wg.Wait()
	return nil
}
