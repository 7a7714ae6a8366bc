package client

// Key exchange of one key state (TLS, key_method_2, push for the first
// key, data keys) and the control messages after it:
//
//	runKeyState -> control.Exchange.Run: wait for the server's reset -> TLS
//	            -> side.Hello: our key_method_2 -> the server's
//	            -> side.Agree: pull (key 0 only) -> keys installed
//	            -> control.Exchange.Serve: side.Message until the key state
//	               is retired

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// optionsString is the OCC options string sent in key_method_2; the
// server only compares it for warnings.
func (s *Session) optionsString(c data.Cipher) string {
	keysize := c.KeyLen() * 8
	comp := ""
	if s.cfg.Compress != data.FramingNone {
		comp = ",comp-lzo" // what OpenVPN's options string says for any compression framing
	}
	auth := "[null-digest]"
	if !c.AEAD() {
		auth = strings.ToUpper(cmpStr(s.cfg.Auth, "SHA1"))
	}
	o := fmt.Sprintf("V4,dev-type tun,link-mtu 1549,tun-mtu 1500,proto %s%s,cipher %s,auth %s,keysize %d", s.tr.name(), comp, c, auth, keysize)
	switch {
	case s.cfg.TLSAuth != nil:
		o += ",tls-auth"
	}
	return o + ",key-method 2,tls-client"
}

func (s *Session) peerInfo() string {
	proto := 2 | 4 | 128 // DATA_V2, REQUEST_PUSH, CC_EXIT_NOTIFY
	if !s.opts.DisableEKM {
		proto |= 8 // TLS_KEY_EXPORT
	}
	var names []string
	for _, c := range s.cfg.DataCiphers {
		names = append(names, c.String())
	}
	lines := []string{
		"IV_VER=" + Version,
		"IV_PLAT=linux",
		fmt.Sprintf("IV_PROTO=%d", proto),
		"IV_NCP=2",
		"IV_CIPHERS=" + strings.Join(names, ":"),
	}
	// The framings we can speak: as OpenVPN 2.6, the algorithms we
	// decompress unless only stubs are allowed or the file has compress
	// stub or stub-v2 (nothing is ever compressed on send either way).
	if s.cfg.AdvertisesAlgorithms() {
		lines = append(lines, "IV_LZ4=1", "IV_LZ4v2=1", "IV_LZO=1")
	} else {
		lines = append(lines, "IV_LZO_STUB=1")
	}
	lines = append(lines, "IV_COMP_STUB=1", "IV_COMP_STUBv2=1", "IV_GUI_VER=wirelane")
	if s.opts.PushMTU > 0 {
		lines = append(lines, fmt.Sprintf("IV_MTU=%d", s.opts.PushMTU))
	}
	return strings.Join(lines, "\n") + "\n"
}

// runKeyState runs the key exchange on ks (control.Exchange), then
// serves its control messages until the key state ends. initial marks key
// id 0, which also pulls the configuration; ready (if any) gets the
// outcome of the exchange.
func (s *Session) runKeyState(ctx context.Context, ks *control.KeyState, initial bool, ready chan<- error) {
	a, mr, err := s.kx.Run(ctx, ks, initial)
	if ready != nil {
		ready <- err
	}
	if err != nil {
		if !initial {
			s.log.Warn("renegotiation failed", "key", ks.ID, "err", err)
			s.ctrl.Remove(ks)
		}
		return
	}
	s.log.Info("key active", "key", ks.ID, "cipher", a.Agreement.Cipher.String(), "keys", a.Agreement.KeyDerivation())
	s.kx.Serve(a, mr)
}

// side is the client's part of control.Exchange.
type side struct{ s *Session }

// Hello fills the client's key_method_2: options, peer-info, credentials.
func (x side) Hello(local *control.KeyMethod2, _ *control.Agreement) {
	s := x.s
	s.mu.Lock()
	ciph := s.cipher
	s.mu.Unlock()
	if ciph == 0 {
		ciph = s.cfg.DataCiphers[0]
	}
	s.serverAnswered()
	local.Options = s.optionsString(ciph)
	local.PeerInfo = s.peerInfo()
	if s.cfg.AuthUserPass {
		local.Username, local.Password = s.cfg.Username, s.cfg.Password
		// The options' credentials when the file has none, or only its
		// username (the password was asked for: Config.AsksPassword).
		if local.Username == "" || (local.Password == "" && s.opts.Username != "") {
			local.Username, local.Password = s.opts.Username, s.opts.Password
		}
		how := ""
		if user, token, ok := s.opts.AuthToken.get(local.Username); ok {
			// The token replaces the password (and a static-challenge
			// answer), as OpenVPN sends it.
			local.Username, local.Password, how = user, token, " (auth-token)"
			s.tokenSent.Store(true)
		} else {
			s.tokenSent.Store(false)
			if s.cfg.StaticChallenge != "" && !strings.HasPrefix(local.Password, "CRV1::") {
				local.Password = staticChallengePassword(local.Password, s.opts.ChallengeResponse)
			}
		}
		s.ev.emit(StateAuth, "TLS done; authenticating as "+local.Username+how, nil)
	} else {
		s.ev.emit(StateAuth, "TLS done; authenticating (certificate)", nil)
	}
}

// staticChallengePassword is the password field of a static-challenge
// answer, as OpenVPN sends it: SCRV1:base64(password):base64(response).
func staticChallengePassword(password, response string) string {
	enc := base64.StdEncoding.EncodeToString
	return "SCRV1:" + enc([]byte(password)) + ":" + enc([]byte(response))
}

// Agree pulls the configuration on the first key; later keys keep the
// pushed cipher and key derivation.
func (x side) Agree(tc *tls.Conn, mr *control.MessageReader, peer *control.KeyMethod2, initial bool) (control.Agreement, error) {
	s := x.s
	if initial {
		s.mu.Lock()
		s.serverOptions = peer.Options
		s.mu.Unlock()
		if err := s.pull(tc, mr); err != nil {
			return control.Agreement{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return control.Agreement{Cipher: s.cipher, EKM: s.useEKM}, nil
}

// Data returns the session's data channel.
func (x side) Data() *data.Channel { return x.s.data.Load() }

// Explain names timeouts and the server's silent refusals.
func (x side) Explain(stage control.Stage, ctxErr, err error) error {
	s := x.s
	switch stage {
	case control.StagePeer:
		select {
		case <-s.closed:
			return s.err
		default:
		}
		return s.timeoutError(err)
	case control.StageTLS:
		if ctxErr != nil && s.cfg.TLSCryptV2Client != nil {
			// A tls-crypt-v2 server answers the reset before it looks at
			// the key's metadata, and refuses silently.
			return fmt.Errorf("%w: TLS handshake did not finish (the server may refuse this tls-crypt-v2 client key): %v", ErrTimeout, ctxErr)
		}
		if ctxErr != nil {
			return fmt.Errorf("%w: TLS handshake did not finish: %v", ErrTimeout, ctxErr)
		}
		return fmt.Errorf("TLS handshake: %w", err)
	}
	if ctxErr != nil || errors.Is(err, io.EOF) {
		// With TLS 1.3 the server checks the client certificate after
		// the client's handshake is done, and then drops the session.
		return fmt.Errorf("server sent no key_method_2 after the TLS handshake; it probably rejected the client certificate (expired, or not from its CA): %v", err)
	}
	return err
}

// pushRequestInterval is how often PUSH_REQUEST is repeated until the
// server answers, as OpenVPN 2.6 clients do: a server whose
// authentication is deferred (a plugin or script answering later, a
// dynamic challenge) answers only a PUSH_REQUEST that arrives after the
// verdict. A variable so that tests can shorten it.
var pushRequestInterval = 5 * time.Second

// pull sends PUSH_REQUEST, repeated every pushRequestInterval until an
// answer comes, and processes the (possibly split) reply.
func (s *Session) pull(tc *tls.Conn, mr *control.MessageReader) error {
	if err := control.WriteMessage(tc, "PUSH_REQUEST"); err != nil {
		return err
	}
	s.ev.emit(StateGetConfig, "requesting options", nil)
	answered := make(chan struct{})
	defer close(answered)
	go s.repeatPushRequest(tc, answered)
	var acc control.PushAccumulator
	for {
		m, err := mr.Read()
		if err != nil {
			return fmt.Errorf("waiting for PUSH_REPLY: %w", err)
		}
		switch control.MessageKind(m) {
		case "PUSH_REPLY":
			done, err := acc.Add(m)
			if err != nil {
				return err
			}
			if !done {
				continue
			}
			r, err := acc.Reply()
			if err != nil {
				return err
			}
			if err := s.applyPush(r); err != nil {
				return err
			}
			s.ev.emit(StateGetConfig, "pushed options: "+pushSummary(r), nil)
			return nil
		case "AUTH_FAILED":
			if ch, ok, err := parseCRV1(strings.TrimPrefix(strings.TrimPrefix(m, "AUTH_FAILED"), ",")); ok {
				if err != nil {
					return fmt.Errorf("%w: %v", ErrAuthFailed, err)
				}
				return ch
			}
			if reason := strings.TrimPrefix(strings.TrimPrefix(m, "AUTH_FAILED"), ","); reason != "" {
				return fmt.Errorf("%w: %s", ErrAuthFailed, reason)
			}
			return ErrAuthFailed
		case "AUTH_PENDING":
			s.log.Info("server message", "text", m)
			s.ev.emit(StateAuthPending, "the server asks for more authentication ("+m+")", nil)
		case "INFO", "INFO_PRE":
			s.log.Info("server message", "text", m)
		case "RESTART":
			return fmt.Errorf("%w: %s", ErrRestart, m)
		case "HALT":
			return fmt.Errorf("%w: %s", ErrHalt, m)
		default:
			s.log.Debug("control message before PUSH_REPLY ignored", "kind", control.MessageKind(m))
		}
	}
}

// repeatPushRequest sends PUSH_REQUEST again every pushRequestInterval
// until answered is closed or the hand-window has passed (the handshake
// deadline ends the wait then). tls.Conn serialises the writes.
func (s *Session) repeatPushRequest(tc *tls.Conn, answered <-chan struct{}) {
	t := time.NewTicker(pushRequestInterval)
	defer t.Stop()
	window := time.Duration(cmp0(s.cfg.HandWindow, 60)) * time.Second
	for n := 1; time.Duration(n)*pushRequestInterval < window; n++ {
		select {
		case <-answered:
			return
		case <-t.C:
		}
		s.log.Debug("no answer to PUSH_REQUEST yet; repeating it", "sent", n+1)
		if err := control.WriteMessage(tc, "PUSH_REQUEST"); err != nil {
			return
		}
	}
}

func (s *Session) applyPush(r *control.PushReply) error {
	framing, decompress := s.cfg.Compress, s.cfg.Decompresses()
	if r.Compress != "" {
		f, alg, err := config.CompressFraming(strings.Fields(r.Compress))
		if err != nil {
			return fmt.Errorf("client: server pushed %q: %w", r.Compress, err)
		}
		if alg && s.cfg.StubOnly() {
			return fmt.Errorf("client: %w", pushedCompressionRefused(r.Compress))
		}
		framing, decompress = f, alg
		if alg {
			s.warnPushedCompression(r.Compress)
		}
	}
	c, err := s.pushedCipher(r)
	if err != nil {
		return err
	}
	peerID := wire.UndefinedPeerID
	if r.HasPeerID {
		peerID = r.PeerID
	}
	if s.cfg.AuthUserPass {
		s.opts.AuthToken.set(r.AuthToken, r.AuthTokenUser)
	}
	s.mu.Lock()
	s.push, s.cipher, s.useEKM = r, c, r.TLSEKM
	s.mu.Unlock()
	ch := s.newDataChannel(peerID, framing, decompress)
	ch.SetMSS(s.mssFor(c, framing, r.HasPeerID))
	s.data.Store(ch)
	s.log.Info("pushed", "local", r.Local, "cipher", c.String(), "ekm", r.TLSEKM, "mss", ch.MSS())
	return nil
}

// pushedCipher is the data cipher of a push: the pushed cipher, which
// must be in data-ciphers; from a server that pushes none (older than
// 2.4, or without data-ciphers), the cipher of its options string when
// data-ciphers has it, else data-ciphers-fallback, as OpenVPN 2.6 does.
func (s *Session) pushedCipher(r *control.PushReply) (data.Cipher, error) {
	if r.Cipher != "" {
		c, err := data.ParseCipher(r.Cipher)
		if err != nil {
			return 0, err
		}
		if !slices.Contains(s.cfg.DataCiphers, c) {
			return 0, fmt.Errorf("client: server pushed cipher %v, not in data-ciphers", c)
		}
		return c, nil
	}
	s.mu.Lock()
	occ := s.serverOptions
	s.mu.Unlock()
	var theirs string
	for _, o := range strings.Split(occ, ",") {
		if name, ok := strings.CutPrefix(o, "cipher "); ok {
			theirs = name
		}
	}
	if c, err := data.ParseCipher(theirs); err == nil && slices.Contains(s.cfg.DataCiphers, c) {
		s.log.Info("the server pushed no cipher; using the one of its options string", "cipher", c.String())
		return c, nil
	}
	if c := s.cfg.DataCiphersFallback; c != 0 {
		s.log.Info("the server pushed no cipher; using data-ciphers-fallback", "cipher", c.String())
		return c, nil
	}
	if theirs != "" {
		return 0, fmt.Errorf("client: the server negotiates no cipher and uses %s: add it to data-ciphers (or data-ciphers-fallback %s) to connect to this server", theirs, theirs)
	}
	return 0, errors.New("client: server pushed no cipher (OpenVPN 2.4+ with data-ciphers, or data-ciphers-fallback, is required)")
}

// Message handles a control message on an established key state.
func (x side) Message(_ *control.Active, m string) bool {
	s := x.s
	switch control.MessageKind(m) {
	case "AUTH_FAILED":
		if s.tokenSent.Load() {
			// A renegotiation with an expired or unknown token: the next
			// session authenticates with the password again.
			s.opts.AuthToken.Forget()
			s.fail(fmt.Errorf("%w: %s", ErrTokenRejected, m))
			return true
		}
		s.fail(fmt.Errorf("%w: %s", ErrAuthFailed, m))
	case "RESTART":
		if strings.HasPrefix(m, "RESTART,[N]") {
			s.fail(fmt.Errorf("%w: %s", ErrRestartNext, m))
			return true
		}
		s.fail(fmt.Errorf("%w: %s", ErrRestart, m))
	case "HALT":
		s.fail(fmt.Errorf("%w: %s", ErrHalt, m))
	case "EXIT":
		s.fail(ErrServerExit)
	case "PUSH_REPLY":
		// An update or a duplicate of the initial reply; routes and
		// addresses do not change mid-session here, but a renewed
		// auth-token (OpenVPN sends "PUSH_REPLY,auth-token T" after a
		// renegotiation) replaces the one held.
		var acc control.PushAccumulator
		if _, err := acc.Add(m); err == nil {
			if r, err := acc.Reply(); err == nil && r.AuthToken != "" && s.cfg.AuthUserPass {
				s.opts.AuthToken.set(r.AuthToken, r.AuthTokenUser)
				s.log.Info("auth-token renewed by the server")
			}
		}
	default:
		s.log.Info("server message", "text", m)
	}
	return true
}

// Renegotiate starts a client-initiated renegotiation (SOFT_RESET_V1 with
// the next key id) and returns once the new key is active. A key exchange
// already in progress (one the server started, or an earlier call's) is
// joined instead: Renegotiate returns once its key is active, without a
// second exchange.
func (s *Session) Renegotiate(ctx context.Context) error {
	return s.renegotiate(ctx, true)
}

// joinPoll is how often a joining Renegotiate looks whether the exchange
// in progress has ended.
const joinPoll = 10 * time.Millisecond

// renegotiate starts a renegotiation and waits for its key. While a key
// exchange is in progress it returns an error wrapping
// control.ErrKeyStateBusy unless join is set; then it waits for that
// exchange's key, or starts its own once that exchange failed.
func (s *Session) renegotiate(ctx context.Context, join bool) error {
	before := s.keys.Primary()
	var t *time.Ticker
	for {
		ks, err := s.keys.StartNext(s.ctrl)
		if err == nil {
			ready := make(chan error, 1)
			go s.runKeyState(ctx, ks, false, ready)
			select {
			case err := <-ready:
				return err
			case <-ctx.Done():
				return ctx.Err()
			case <-s.closed:
				return s.err
			}
		}
		if !join || !errors.Is(err, control.ErrKeyStateBusy) {
			return err
		}
		if t == nil {
			t = time.NewTicker(joinPoll)
			defer t.Stop()
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closed:
			return s.err
		}
		if s.keys.Primary() != before {
			return nil // the exchange in progress made a new key
		}
	}
}

// cmpStr is v, or def when v is "".
func cmpStr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
