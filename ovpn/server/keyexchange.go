package server

// The key states of a client, each in a goroutine the server's Close
// waits for: control.Exchange with the server's side (options string,
// negotiation on the first key, AUTH_FAILED for a refused client), then
// the key state's control messages (PUSH_REQUEST, EXIT).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
)

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
	p.mu.Lock()
	p.busy++
	p.mu.Unlock()
	a, mr, err := p.kx.Run(context.Background(), ks, initial)
	p.mu.Lock()
	p.busy--
	p.mu.Unlock()
	if err != nil {
		if initial {
			p.firstKeyFailed(err)
			// Send what is queued (a TLS alert, AUTH_FAILED) so the client
			// learns why, then keep it from coming back with the same
			// session.
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
			p.s.log.Warn("renegotiation failed", "client", p.label(), "key", ks.ID, "err", err)
			p.ctrl.Remove(ks)
		}
		return
	}
	p.s.log.Info("key active", "client", p.label(), "key", ks.ID, "cipher", a.Agreement.Cipher.String(), "keys", a.Agreement.KeyDerivation())
	p.kx.Serve(a, mr)
}

// side is the server's part of control.Exchange for one client.
type side struct{ p *peer }

// Hello fills the server's key_method_2 options string.
func (x side) Hello(local *control.KeyMethod2, a *control.Agreement) {
	p := x.p
	cfg := p.cfg.Load()
	comp := ""
	if cfg.Compress != data.FramingNone {
		comp = ",comp-lzo" // what OpenVPN's options string says for any compression framing
	}
	auth := "[null-digest]"
	if !a.Cipher.AEAD() {
		auth = strings.ToUpper(cfg.Auth)
		if auth == "" {
			auth = "SHA1"
		}
	}
	local.Options = fmt.Sprintf("V4,dev-type tun,link-mtu %d,tun-mtu %d,proto %s%s,cipher %s,auth %s,keysize %d,key-method 2,tls-server",
		cfg.MTU+49, cfg.MTU, p.tx.name(), comp, a.Cipher, auth, a.Cipher.KeyLen()*8)
}

// Agree negotiates from the client's peer-info on the first key (setup);
// later keys keep that agreement.
func (x side) Agree(tc *tls.Conn, _ *control.MessageReader, peerKM *control.KeyMethod2, initial bool) (control.Agreement, error) {
	p := x.p
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) > 0 {
		p.mu.Lock()
		p.chain = cs.PeerCertificates
		p.mu.Unlock()
		// A reload between this handshake's ClientHello (which took the
		// TLS settings then in force) and now: check again under the new
		// ones, as ApplyReload checks the clients it knew.
		if l := p.s.live.Load(); l.tls != p.bornTLS.Load() {
			if why := l.certRefuses(p); why != "" {
				return control.Agreement{}, fmt.Errorf("%w: %s", control.ErrVerify, why)
			}
			p.bornTLS.Store(l.tls)
		}
	}
	if initial {
		cn := ""
		if len(cs.PeerCertificates) > 0 {
			cn = cs.PeerCertificates[0].Subject.CommonName
		}
		if err := p.setup(cn, parsePeerInfo(peerKM.PeerInfo), peerKM.Options); err != nil {
			return control.Agreement{}, err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return control.Agreement{Cipher: p.cipher, EKM: p.ekm, Refuse: p.authFail}, nil
}

// Data returns the client's data channel (nil for a refused client).
func (x side) Data() *data.Channel { return x.p.data.Load() }

// Explain labels TLS failures.
func (x side) Explain(stage control.Stage, _, err error) error {
	if stage == control.StageTLS {
		return tlsFailure{fmt.Errorf("TLS handshake: %w", err)}
	}
	return err
}

// Message handles a control message on an established key state.
func (x side) Message(a *control.Active, m string) bool {
	p := x.p
	switch control.MessageKind(m) {
	case "PUSH_REQUEST":
		if err := p.push(a); err != nil {
			p.s.log.Warn("push", "client", p.label(), "err", err)
		}
	case "EXIT":
		// Acknowledge before forgetting the client, so it need not
		// retransmit.
		p.ctrl.Flush()
		p.close("the client sent an exit notification")
		return false
	default:
		p.s.log.Debug("control message ignored", "client", p.label(), "kind", control.MessageKind(m))
	}
	return true
}
