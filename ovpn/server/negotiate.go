package server

// What the first key exchange settles for a client: the data cipher
// (the server's first choice the client offers), the features of
// IV_PROTO (DATA_V2 with a peer-id, tls-ekm, cc-exit), the common-name
// policy (duplicate-cn) and its tunnel addresses from the pools.

import (
	"fmt"
	"strings"

	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// negotiateCipher picks the first server cipher the client offers. A
// client that offers none (older than 2.4) gets the cipher of its options
// string (occ) when the server has it, else the fallback
// (data-ciphers-fallback; 0: none), as OpenVPN 2.6 does.
func negotiateCipher(server []data.Cipher, fallback data.Cipher, pi peerInfo, occ string) (data.Cipher, bool) {
	offered := pi.ciphers
	if len(offered) == 0 && pi.ncp >= 2 {
		offered = []string{"AES-256-GCM", "AES-128-GCM"}
	}
	if len(offered) == 0 {
		for _, o := range strings.Split(occ, ",") {
			if name, ok := strings.CutPrefix(o, "cipher "); ok {
				offered = []string{name}
			}
		}
		for _, c := range server {
			for _, o := range offered {
				if strings.EqualFold(o, c.String()) {
					return c, true
				}
			}
		}
		return fallback, fallback != 0
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

// setup runs once per client after its first key_method_2: cipher and
// feature negotiation, the common-name policy and the tunnel address.
func (p *peer) setup(cn string, pi peerInfo, occ string) error {
	s := p.s
	// The TLS handshake is complete: a new session from a client's
	// address has proven itself and replaces the old one.
	p.promote()
	// Data ciphers, duplicate-cn and the pools are those in force now: a
	// reload applies them to the sessions set up after it.
	cfg := &s.live.Load().cfg
	ciph, ok := negotiateCipher(cfg.DataCiphers, cfg.DataCiphersFallback, pi, occ)
	if !ok {
		// The key exchange still completes (the client expects our
		// key_method_2); the refusal follows it.
		p.refuseSetup(cn, cfg, fmt.Sprintf("no shared data cipher (client offers %q, server has %v)", strings.Join(pi.ciphers, ":"), cfg.DataCiphers))
		return nil
	}
	if why := s.live.Load().ccdRefusal(cn); why != "" {
		// disable, ccd-exclusive (ccd.go): the key exchange completes,
		// then AUTH_FAILED; no address, and no other session ended.
		p.refuseSetup(cn, cfg, why)
		return nil
	}
	if !cfg.DuplicateCN && cn != "" {
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
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	select {
	case <-p.closed:
		s.mu.Unlock()
		return ErrClosed
	default:
	}
	// The pool is taken with mu held: ApplyReload replaces it only then.
	l := s.live.Load()
	if why := l.ccdRefusal(cn); why != "" {
		// A reload since the check above (ccd.go).
		s.mu.Unlock()
		p.refuseSetup(cn, cfg, why)
		return nil
	}
	// The common name first: a reload holding mu sees it with the slot.
	p.mu.Lock()
	p.cn = cn
	p.mu.Unlock()
	if err := p.assignLocked(l, cn); err != nil { // ccd.go: fixed or pool addresses, iroutes
		s.mu.Unlock()
		return err
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
	ch := s.newDataChannel(peerID, cfg)
	ch.SetMSS(s.mssFor(p, cfg, ciph, peerID != wire.UndefinedPeerID))
	p.data.Store(ch)
	return nil
}

// refuseSetup makes the key exchange end with AUTH_FAILED,why.
func (p *peer) refuseSetup(cn string, cfg *Config, why string) {
	p.mu.Lock()
	p.cn, p.cipher = cn, cfg.DataCiphers[0]
	p.authFail = why
	p.mu.Unlock()
}
