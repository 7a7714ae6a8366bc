package client

// Key exchange of one key state (TLS, key_method_2, push for the first
// key, data keys) and the control messages after it:
//
//	runKeyState -> keyExchange: wait for the server's reset -> TLS handshake
//	            -> send key_method_2 -> read the server's -> pull (key 0 only)
//	            -> installKey: prepare receive, flush acks, switch send
//	            -> messageLoop until the key state is retired

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/keys"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// optionsString is the OCC options string sent in key_method_2; the
// server only compares it for warnings.
func (s *Session) optionsString(c data.Cipher) string {
	keysize := c.KeyLen() * 8
	o := fmt.Sprintf("V4,dev-type tun,link-mtu 1549,tun-mtu 1500,proto %s,cipher %s,auth [null-digest],keysize %d", s.tr.name(), c, keysize)
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
	return strings.Join([]string{
		"IV_VER=" + Version,
		"IV_PLAT=linux",
		fmt.Sprintf("IV_PROTO=%d", proto),
		"IV_NCP=2",
		"IV_CIPHERS=" + strings.Join(names, ":"),
		"IV_GUI_VER=wirelane",
	}, "\n") + "\n"
}

// runKeyState runs the TLS handshake and key exchange on ks, then serves
// its control messages until the key state ends. initial marks key id 0,
// which also pulls the configuration; ready (if any) gets the outcome of
// the exchange.
func (s *Session) runKeyState(ctx context.Context, ks *control.KeyState, initial bool, ready chan<- error) {
	kc, mr, err := s.keyExchange(ctx, ks, initial)
	if ready != nil {
		ready <- err
	}
	if err != nil {
		if !initial {
			s.logf("openvpn: renegotiation of key %d failed: %v", ks.ID, err)
			s.ctrl.Remove(ks)
		}
		return
	}
	s.messageLoop(kc, mr)
}

func (s *Session) keyExchange(ctx context.Context, ks *control.KeyState, initial bool) (*keyCtx, *control.MessageReader, error) {
	c := tls.Client(ks.Conn(), s.tlsCfg)
	ctx, cancel := context.WithTimeout(ctx, s.opts.HandshakeTimeout)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { ks.Conn().Close() })
	defer stop()
	select {
	case <-s.ctrl.PeerKnown():
	case <-ctx.Done():
		return nil, nil, s.timeoutError(ctx.Err())
	case <-s.closed:
		return nil, nil, s.err
	}
	if err := c.HandshakeContext(ctx); err != nil {
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("%w: TLS handshake did not finish: %v", ErrTimeout, ctx.Err())
		}
		return nil, nil, fmt.Errorf("TLS handshake: %w", err)
	}
	local, err := control.NewKeyMethod2(true)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	ciph := s.cipher
	s.mu.Unlock()
	if ciph == 0 {
		ciph = s.cfg.DataCiphers[0]
	}
	local.Options = s.optionsString(ciph)
	local.PeerInfo = s.peerInfo()
	if s.cfg.AuthUserPass {
		local.Username, local.Password = s.cfg.Username, s.cfg.Password
		if local.Username == "" {
			local.Username, local.Password = s.opts.Username, s.opts.Password
		}
	}
	if _, err := c.Write(local.Marshal(true)); err != nil {
		return nil, nil, fmt.Errorf("sending key_method_2: %w", err)
	}
	local.Password = ""
	peer, err := control.ReadKeyMethod2(c, false)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, io.EOF) {
			// With TLS 1.3 the server checks the client certificate after
			// the client's handshake is done, and then drops the session.
			return nil, nil, fmt.Errorf("server sent no key_method_2 after the TLS handshake; it probably rejected the client certificate (expired, or not from its CA): %v", err)
		}
		return nil, nil, err
	}
	kc := &keyCtx{ks: ks, conn: c, local: local, created: time.Now()}
	mr := control.NewMessageReader(c)
	if initial {
		if err := s.pull(kc, mr); err != nil {
			return nil, nil, err
		}
	}
	if err := s.installKey(kc, peer); err != nil {
		return nil, nil, err
	}
	return kc, mr, nil
}

// pull sends PUSH_REQUEST and processes the (possibly split) reply.
func (s *Session) pull(kc *keyCtx, mr *control.MessageReader) error {
	if err := control.WriteMessage(kc.conn, "PUSH_REQUEST"); err != nil {
		return err
	}
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
			return s.applyPush(r)
		case "AUTH_FAILED":
			if reason := strings.TrimPrefix(strings.TrimPrefix(m, "AUTH_FAILED"), ","); reason != "" {
				return fmt.Errorf("%w: %s", ErrAuthFailed, reason)
			}
			return ErrAuthFailed
		case "AUTH_PENDING", "INFO", "INFO_PRE":
			s.logf("openvpn: server: %s", m)
		case "RESTART":
			return fmt.Errorf("%w: %s", ErrRestart, m)
		case "HALT":
			return fmt.Errorf("%w: %s", ErrHalt, m)
		default:
			s.logf("openvpn: ignoring control message %q before PUSH_REPLY", control.MessageKind(m))
		}
	}
}

func (s *Session) applyPush(r *control.PushReply) error {
	if r.Compress != "" {
		return fmt.Errorf("client: server pushed %q; compression framing is not supported", r.Compress)
	}
	if r.Cipher == "" {
		return errors.New("client: server pushed no cipher (OpenVPN 2.4+ with data-ciphers is required)")
	}
	c, err := data.ParseCipher(r.Cipher)
	if err != nil {
		return err
	}
	ok := false
	for _, x := range s.cfg.DataCiphers {
		ok = ok || x == c
	}
	if !ok {
		return fmt.Errorf("client: server pushed cipher %v, not in data-ciphers", c)
	}
	peerID := wire.UndefinedPeerID
	if r.HasPeerID {
		peerID = r.PeerID
	}
	s.mu.Lock()
	s.push, s.cipher, s.useEKM = r, c, r.TLSEKM
	if s.cfg.RenegSec > 0 {
		s.renegAt = time.Now().Add(time.Duration(s.cfg.RenegSec) * time.Second)
	}
	s.mu.Unlock()
	s.data.Store(data.NewChannel(peerID))
	s.logf("openvpn: pushed %s, cipher %v, ekm %v", r.Local, c, r.TLSEKM)
	return nil
}

func (s *Session) installKey(kc *keyCtx, peer *control.KeyMethod2) error {
	s.mu.Lock()
	ciph, ekm := s.cipher, s.useEKM
	s.mu.Unlock()
	var m keys.Material
	if ekm {
		cs := kc.conn.ConnectionState()
		var err error
		if m, err = keys.FromEKM(cs.ExportKeyingMaterial); err != nil {
			return fmt.Errorf("tls-ekm: %w", err)
		}
	} else {
		remote, _ := s.ctrl.RemoteSession()
		src := keys.Sources{PreMaster: kc.local.PreMaster, ClientRandom1: kc.local.Random1, ClientRandom2: kc.local.Random2,
			ServerRandom1: peer.Random1, ServerRandom2: peer.Random2, ClientSession: s.ctrl.LocalSession(), ServerSession: remote}
		m = keys.FromPRF(&src)
		clear(src.PreMaster[:])
	}
	kc.local.Wipe()
	send, recv := m.Split(ciph.KeyLen(), true)
	m.Wipe()
	k, err := data.NewKey(kc.ks.ID, ciph, send.Key, send.ImplicitIV, recv.Key, recv.ImplicitIV)
	clear(send.Key)
	clear(recv.Key)
	if err != nil {
		return err
	}
	// Receive with the new key first, then make sure the server has our ack
	// of its key_method_2 (that activates the key on its side), then send
	// with it.
	ch := s.data.Load()
	ch.Prepare(k)
	s.ctrl.Flush()
	ch.Install(k)
	s.mu.Lock()
	old := s.lame
	s.lame, s.primary = s.primary, kc
	s.nextKeyID = nextKeyID(kc.ks.ID)
	if s.cfg.RenegSec > 0 {
		s.renegAt = time.Now().Add(time.Duration(s.cfg.RenegSec) * time.Second)
	}
	s.mu.Unlock()
	if old != nil {
		s.ctrl.Remove(old.ks)
	}
	s.logf("openvpn: key %d active (%v)", kc.ks.ID, ciph)
	return nil
}

// nextKeyID follows OpenVPN: 0 only for the first key, then 1..7 cycling.
func nextKeyID(id uint8) uint8 {
	id = (id + 1) & wire.KeyIDMask
	if id == 0 {
		id = 1
	}
	return id
}

func (s *Session) messageLoop(kc *keyCtx, mr *control.MessageReader) {
	for {
		m, err := mr.Read()
		if err != nil {
			return // key state removed or session closed
		}
		switch control.MessageKind(m) {
		case "AUTH_FAILED":
			s.fail(fmt.Errorf("%w: %s", ErrAuthFailed, m))
		case "RESTART":
			s.fail(fmt.Errorf("%w: %s", ErrRestart, m))
		case "HALT":
			s.fail(fmt.Errorf("%w: %s", ErrHalt, m))
		case "EXIT":
			s.fail(ErrServerExit)
		case "PUSH_REPLY":
			// An update or a duplicate of the initial reply; routes and
			// addresses do not change mid-session here.
		default:
			s.logf("openvpn: server: %s", m)
		}
	}
}

// Renegotiate starts a client-initiated renegotiation (SOFT_RESET_V1 with
// the next key id) and returns once the new key is active.
func (s *Session) Renegotiate(ctx context.Context) error {
	s.mu.Lock()
	id := s.nextKeyID
	s.nextKeyID = nextKeyID(id)
	s.renegAt = time.Time{}
	s.mu.Unlock()
	ks, err := s.ctrl.Start(id)
	if err != nil {
		return err
	}
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
