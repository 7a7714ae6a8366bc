package server

// Reloading a running server in place (issue 17): a new Config replaces
// the one in force without touching a connected client's session, keys or
// address, unless the new configuration no longer admits it.
//
//	PlanReload(new) -> defaults applied -> what needs a restart? error
//	    -> new TLS settings (CA, cert, key, CRL read now), new pools
//	    -> each connected client: certificate chain checked again (CRL,
//	       CA, remote-cert-tls), address still in the new pool?
//	    -> ReloadPlan (lines for --dry-run; nothing changed yet)
//	ApplyReload(plan), with mu: the new live snapshot (pools rebuilt from
//	    the addresses clients hold), then the clients not admitted are told
//	    (AUTH_FAILED for a refused certificate, RESTART for a moved pool)
//	    and disconnected with the reason
//
// What applies when, as OpenVPN 2.6 clients allow (they take pushed
// options only in the PUSH_REPLY of their connection: 2.6 has no
// push-update):
//   - at once, for everyone: the CRL, CA and certificate checks (clients
//     no longer admitted are disconnected), client-to-client, max-clients
//     and connect-freq for new sessions, the TLS settings of every later
//     handshake (including the renegotiations of connected clients);
//   - for sessions set up after the reload: push lines (routes, DNS, ...),
//     data-ciphers, duplicate-cn, ping/ping-restart, reneg-sec, mssfix,
//     the pools' netmask; connected clients keep what they were pushed until they
//     reconnect;
//   - client-config-dir entries of connected clients (ccd.go): iroutes at
//     once; disable or ccd-exclusive: AUTH_FAILED; a new fixed address:
//     RESTART; their push lines from the next connection;
//   - never without a restart: local/port/proto, dev, tun-mtu, tls-auth,
//     tls-crypt, tls-crypt-v2 and its tls-crypt-v2-metadata-allow file's
//     name, key-direction, auth, hand-window, user/group (PlanReload
//     refuses them).
//     peer-fingerprint is a certificate check (at once, for everyone);
//     tls-crypt-v2-max-age applies to new sessions.
//
// The host side of `route` lines (kernel routes into the TUN) and of the
// server's own tunnel address is the caller's (internal/tunnel/ovpntunnel):
// the plan lists them.

import (
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// live is one configuration in force: immutable once stored, except the
// pools' address maps (pool.inUse, guarded by the pool's own mutex and
// changed only with Server.mu held).
type live struct {
	cfg   Config // defaults applied
	tls   *tls.Config
	pool  *pool
	pool6 *pool6 // nil without server-ipv6
}

// serverTLS builds the TLS settings of c (reading its CRL file now).
func serverTLS(c *Config) (*tls.Config, error) {
	if c.KeyLocked() {
		return nil, errors.New("server: the private key is encrypted and was not unlocked (askpass FILE, or Config.Unlock)")
	}
	minTLS := uint16(tls.VersionTLS12)
	if c.TLSVersionMin == "1.3" {
		minTLS = tls.VersionTLS13
	}
	return control.TLSConfig(control.TLSParams{CA: c.CA, Cert: c.CertChain(), Key: c.Key, Server: true,
		RemoteCertTLS: c.RemoteCertTLS, MinVersion: minTLS, CRLFile: c.CRLVerify, PeerFingerprints: c.PeerFingerprints})
}

// withDefaults returns c with the defaults New applies.
func withDefaults(c Config) Config {
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
	return c
}

// ReloadPlan is what ApplyReload will change: computed by PlanReload
// against the configuration in force, without changing anything.
type ReloadPlan struct {
	// Changes describe the differences, one line each ("push: added
	// \"route 10.9.0.0 255.255.255.0\" (new sessions)").
	Changes []string
	// Refused lists the connected clients the new configuration no longer
	// admits, with the reason they will be given; they are disconnected
	// by ApplyReload.
	Refused []RefusedClient
	// Address and Address6 are the server's tunnel addresses before (Old)
	// and after: the TUN device's addresses, which the caller changes.
	OldAddress, Address, OldAddress6, Address6 netip.Prefix
	// AddRoutes and RemoveRoutes are the `route`/`route-ipv6` networks
	// the caller routes into (or stops routing into) the TUN device.
	AddRoutes, RemoveRoutes []netip.Prefix

	base, next *live
}

// RefusedClient is a connected client a reload disconnects.
type RefusedClient struct {
	Client ClientInfo
	Reason string
	// AuthFailed: the client is told AUTH_FAILED (an OpenVPN client
	// stops: certificate refused, disable, ccd-exclusive); otherwise
	// RESTART (it reconnects: a moved pool, a new fixed address).
	AuthFailed bool
}

// Empty reports whether the plan changes nothing.
func (p *ReloadPlan) Empty() bool { return len(p.Changes) == 0 && len(p.Refused) == 0 }

// Lines describes the plan, one change per line, refused clients last.
func (p *ReloadPlan) Lines() []string {
	out := slices.Clone(p.Changes)
	for _, r := range p.Refused {
		out = append(out, fmt.Sprintf("disconnect client %q (%s): %s", r.Client.CommonName, r.Client.addresses(), r.Reason))
	}
	return out
}

// ErrNeedsRestart marks a reload refused because it changes a setting
// that cannot change while the server runs.
var ErrNeedsRestart = errors.New("needs a restart")

// ErrStalePlan is ApplyReload's answer for a plan made against a
// configuration that another reload has since replaced.
var ErrStalePlan = errors.New("server: the configuration changed since the plan was made; plan again")

// PlanReload compares cfg with the configuration in force and returns
// what ApplyReload(plan) would change. It reads cfg's CRL file and builds
// its TLS settings (an error here changes nothing); a setting that needs
// a restart is an error wrapping ErrNeedsRestart. It is safe to call
// while the server runs.
func (s *Server) PlanReload(newCfg *Config) (*ReloadPlan, error) {
	if newCfg == nil {
		return nil, errors.New("server: nil configuration")
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	base := s.live.Load()
	old, c := &base.cfg, withDefaults(*newCfg)
	if err := needsRestart(old, &c); err != nil {
		return nil, err
	}
	if !c.Network.IsValid() && !c.Network6.IsValid() {
		return nil, errors.New("server: no client address pool (server or server-ipv6)")
	}
	next := &live{cfg: c}
	var err error
	if next.pool, err = newPool(slotNetwork(c.Network)); err != nil {
		return nil, err
	}
	if c.Network6.IsValid() {
		if next.pool6, err = newPool6(c.Network6, next.pool); err != nil {
			return nil, err
		}
	}
	if next.cfg.MaxClients == 0 || next.cfg.MaxClients > next.pool.size() {
		next.cfg.MaxClients = next.pool.size()
	}
	if err := checkCCD(&next.cfg); err != nil {
		return nil, err
	}
	next.pool.reserved = reserved(&next.cfg)
	if next.tls, err = serverTLS(&next.cfg); err != nil {
		return nil, err
	}
	p := &ReloadPlan{base: base, next: next}
	p.diff(base, next)
	p.diffCCD(&base.cfg, &next.cfg) // ccd.go
	for _, q := range s.peers() {
		if q.info().Since.IsZero() {
			continue // not connected yet: it is set up under the new configuration
		}
		why := next.certRefuses(q) // without s.mu (as ApplyReload)
		auth := why != ""
		if why == "" {
			s.mu.RLock()
			if why, auth = next.admitsLocked(q); why == "" {
				p.Changes = append(p.Changes, next.ccdChangesLocked(q, base)...)
			}
			s.mu.RUnlock()
		}
		if why != "" {
			p.Refused = append(p.Refused, RefusedClient{Client: q.info(), Reason: why, AuthFailed: auth})
		}
	}
	slices.SortFunc(p.Refused, func(a, b RefusedClient) int { return int(a.Client.PeerID) - int(b.Client.PeerID) })
	return p, nil
}

// needsRestart refuses changes of settings a running server cannot
// change.
func needsRestart(old, c *Config) error {
	var what []string
	add := func(changed bool, name string) {
		if changed {
			what = append(what, name)
		}
	}
	add(old.Listen != c.Listen, "local/port")
	add(old.Proto != c.Proto, "proto")
	add(old.Dev != c.Dev, "dev")
	add(old.MTU != c.MTU, "tun-mtu")
	add(!sameKey(old.TLSAuth, c.TLSAuth), "tls-auth")
	add(!sameKey(old.TLSCrypt, c.TLSCrypt), "tls-crypt")
	add(!sameV2Key(old.TLSCryptV2Server, c.TLSCryptV2Server), "tls-crypt-v2")
	add(old.TLSCryptV2AllowFile != c.TLSCryptV2AllowFile, "tls-crypt-v2-metadata-allow (the file's contents are read again as they change)")
	add(old.KeyDirection != c.KeyDirection, "key-direction")
	add(old.Auth != c.Auth, "auth")
	add(old.HandWindow != c.HandWindow, "hand-window")
	add(old.User != c.User || old.Group != c.Group, "user/group (privileges are dropped once, at the start)")
	add(old.Network.IsValid() != c.Network.IsValid(), "server (adding or removing the IPv4 pool)")
	add(old.Network6.IsValid() != c.Network6.IsValid(), "server-ipv6 (adding or removing the IPv6 pool)")
	if len(what) == 0 {
		return nil
	}
	return fmt.Errorf("server: changing %s %w (stop and start the server; connected clients reconnect)", strings.Join(what, ", "), ErrNeedsRestart)
}

// sameKey reports whether two optional static keys are equal.
func sameKey(a, b *wrap.StaticKey) bool {
	if a == nil || b == nil {
		return a == b
	}
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// sameV2Key reports whether two optional tls-crypt-v2 server keys are
// equal.
func sameV2Key(a, b *wrap.V2ServerKey) bool {
	if a == nil || b == nil {
		return a == b
	}
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// certRefuses says why l's TLS settings no longer accept q's certificate
// chain ("" when they do, or before q's TLS handshake). Any locks.
func (l *live) certRefuses(q *peer) string {
	q.mu.Lock()
	chain := q.chain
	q.mu.Unlock()
	if len(chain) == 0 {
		return ""
	}
	if err := l.tls.VerifyConnection(tls.ConnectionState{PeerCertificates: chain}); err != nil {
		return "certificate no longer accepted: " + strings.TrimPrefix(err.Error(), control.ErrVerify.Error()+": ")
	}
	return ""
}

// poolRefusal is the reason given to a client whose address l's pools
// no longer hold.
func (l *live) poolRefusal(q *peer) string {
	return "its address " + q.info().addresses() + " is not in the new pool " + poolsString(l.cfg) + " (it reconnects for a new one)"
}

// peers returns the sessions the server holds now.
func (s *Server) peers() []*peer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]*peer, 0, len(s.byID))
	for _, q := range s.byID {
		out = append(out, q)
	}
	return out
}

// keeps reports whether q's addresses are what l's pools would give its
// slot: then it keeps them (and its session).
func (l *live) keeps(q *peer) bool {
	slot := q.slot // the caller holds s.mu
	if !slot.IsValid() {
		return true
	}
	if !l.pool.network.Contains(slot) || slot.Compare(l.pool.first) < 0 || slot.Compare(l.pool.last) > 0 {
		return false
	}
	want4 := netip.Addr{}
	if l.cfg.Network.IsValid() {
		want4 = slot
	}
	want6 := l.want6(slot, l.clientConfig(q.commonName())) // ccd.go: a fixed address, or the pool's
	return q.vaddrLoad() == want4 && q.vaddr6Load() == want6
}

// diff fills the plan's change lines, addresses and routes.
func (p *ReloadPlan) diff(a, b *live) {
	o, n := &a.cfg, &b.cfg
	line := func(format string, args ...any) { p.Changes = append(p.Changes, fmt.Sprintf(format, args...)) }
	tunAddr := func(l *live) (netip.Prefix, netip.Prefix) {
		var v4, v6 netip.Prefix
		if l.cfg.Network.IsValid() {
			v4 = netip.PrefixFrom(l.pool.server, l.pool.network.Bits())
		}
		if l.pool6 != nil {
			v6 = netip.PrefixFrom(l.pool6.server, l.pool6.network.Bits())
		}
		return v4, v6
	}
	p.OldAddress, p.OldAddress6 = tunAddr(a)
	p.Address, p.Address6 = tunAddr(b)
	if o.Network != n.Network {
		line("pool: %s -> %s (clients whose address stays valid keep it; the new netmask reaches them when they reconnect)", o.Network, n.Network)
	}
	if o.Network6 != n.Network6 {
		line("IPv6 pool: %s -> %s", o.Network6, n.Network6)
	}
	if p.OldAddress != p.Address {
		line("tunnel address: %s -> %s", p.OldAddress, p.Address)
	}
	if p.OldAddress6 != p.Address6 {
		line("tunnel IPv6 address: %s -> %s", p.OldAddress6, p.Address6)
	}
	for _, r := range o.Routes {
		if !slices.Contains(n.Routes, r) && !slices.Contains(p.RemoveRoutes, r) {
			p.RemoveRoutes = append(p.RemoveRoutes, r)
			line("route: removed %s", r)
		}
	}
	for _, r := range n.Routes {
		if !slices.Contains(o.Routes, r) && !slices.Contains(p.AddRoutes, r) {
			p.AddRoutes = append(p.AddRoutes, r)
			line("route: added %s", r)
		}
	}
	for _, x := range o.Push {
		if !slices.Contains(n.Push, x) {
			line("push: removed %q (new sessions; connected clients keep it until they reconnect)", x)
		}
	}
	for _, x := range n.Push {
		if !slices.Contains(o.Push, x) {
			line("push: added %q (new sessions; connected clients get it when they reconnect)", x)
		}
	}
	if !slices.Equal(o.Push, n.Push) && sameSet(o.Push, n.Push) {
		line("push: order changed (new sessions)")
	}
	if !slices.Equal(o.DataCiphers, n.DataCiphers) {
		line("data-ciphers: %v -> %v (new sessions; connected clients keep their cipher)", o.DataCiphers, n.DataCiphers)
	}
	// The CRL file itself is read again at every handshake anyway; a
	// reload also checks the clients already connected against it
	// (Refused).
	if o.CRLVerify != n.CRLVerify {
		line("crl-verify: %q -> %q", o.CRLVerify, n.CRLVerify)
	}
	if string(o.CA) != string(n.CA) {
		line("ca: changed")
	}
	if string(o.Cert) != string(n.Cert) || string(o.Key) != string(n.Key) || string(o.ExtraCerts) != string(n.ExtraCerts) {
		line("cert/key/extra-certs: changed (used from the next handshake, renegotiations included)")
	}
	if o.RemoteCertTLS != n.RemoteCertTLS {
		line("remote-cert-tls: %q -> %q", o.RemoteCertTLS, n.RemoteCertTLS)
	}
	if o.TLSVersionMin != n.TLSVersionMin {
		line("tls-version-min: %q -> %q (next handshakes)", o.TLSVersionMin, n.TLSVersionMin)
	}
	if !slices.Equal(o.PeerFingerprints, n.PeerFingerprints) {
		line("peer-fingerprint: %d -> %d fingerprints", len(o.PeerFingerprints), len(n.PeerFingerprints))
	}
	if o.TLSCryptV2MaxAge != n.TLSCryptV2MaxAge {
		line("tls-crypt-v2-max-age: %d -> %d days (new sessions)", o.TLSCryptV2MaxAge, n.TLSCryptV2MaxAge)
	}
	if o.Ping != n.Ping || o.PingRestart != n.PingRestart {
		line("keepalive: ping %d, ping-restart %d -> ping %d, ping-restart %d (new sessions)", o.Ping, o.PingRestart, n.Ping, n.PingRestart)
	}
	if o.RenegSec != n.RenegSec {
		line("reneg-sec: %d -> %d (new sessions)", o.RenegSec, n.RenegSec)
	}
	if o.DataCiphersFallback != n.DataCiphersFallback {
		line("data-ciphers-fallback: %v -> %v (new sessions)", o.DataCiphersFallback, n.DataCiphersFallback)
	}
	if o.Compress != n.Compress || o.CompressDirective != n.CompressDirective || o.CompressAlgorithm != n.CompressAlgorithm {
		line("compression framing: %q -> %q (new sessions; connected clients keep theirs)", o.CompressDirective, n.CompressDirective)
	}
	if o.MSSFix != n.MSSFix || o.MSSFixSet != n.MSSFixSet {
		line("mssfix: %v -> %v (new sessions; connected clients keep theirs)", o.mssFix(), n.mssFix())
	}
	if o.AllowCompression != n.AllowCompression || o.StubOnly() != n.StubOnly() {
		line("allow-compression: %q -> %q (new sessions; nothing is ever compressed)", o.AllowCompression, n.AllowCompression)
	}
	if o.ExplicitExitNotify != n.ExplicitExitNotify {
		line("explicit-exit-notify: %d -> %d (at shutdown)", o.ExplicitExitNotify, n.ExplicitExitNotify)
	}
	if o.ClientToClient != n.ClientToClient {
		line("client-to-client: %v -> %v", o.ClientToClient, n.ClientToClient)
	}
	if o.DuplicateCN != n.DuplicateCN {
		line("duplicate-cn: %v -> %v (new sessions)", o.DuplicateCN, n.DuplicateCN)
	}
	if o.MaxClients != n.MaxClients {
		line("max-clients: %d -> %d (new sessions; connected clients stay)", o.MaxClients, n.MaxClients)
	}
	if o.ConnectFreq != n.ConnectFreq || o.ConnectFreqSec != n.ConnectFreqSec {
		line("connect-freq: %d in %d s -> %d in %d s", o.ConnectFreq, o.ConnectFreqSec, n.ConnectFreq, n.ConnectFreqSec)
	}
}

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// ApplyReload puts the plan's configuration in force and disconnects the
// clients it no longer admits (checked again now: one that connected since
// the plan is checked too), each told why. It cannot fail half-way: it
// returns ErrStalePlan, changing nothing, when another reload came between
// the plan and now, and otherwise the clients it disconnected.
func (s *Server) ApplyReload(p *ReloadPlan) ([]RefusedClient, error) {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if p == nil || p.next == nil || s.live.Load() != p.base {
		return nil, ErrStalePlan
	}
	next := p.next
	// Certificates are checked again without s.mu (chain verification
	// and the CRL file's stat must not stall the data path, which reads
	// under it): first the clients known now, after the swap those that
	// came since (a handshake still running during the swap is checked
	// in side.Agree).
	certWhy := map[*peer]string{}
	checkCerts := func(peers []*peer) {
		for _, q := range peers {
			if _, done := certWhy[q]; !done {
				certWhy[q] = next.certRefuses(q)
			}
		}
	}
	checkCerts(s.peers())
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	// The new pools hold every address a client has now (the refused
	// ones are returned when they close), so none is handed out twice.
	next.pool.mu.Lock()
	for _, q := range s.byID {
		if q.slot.IsValid() && next.pool.network.Contains(q.slot) {
			next.pool.inUse[q.slot] = true
		}
	}
	next.pool.mu.Unlock()
	var refused []RefusedClient
	var gone, later []*peer
	for _, q := range s.byID {
		why, checked := certWhy[q]
		auth := why != ""
		// Sessions not connected yet are refused for their certificate
		// too (their TLS handshake may have passed the old CRL); their
		// address and client-config entry, if set up, are checked like
		// the others' (ccd.go).
		if why == "" {
			why, auth = next.admitsLocked(q)
		}
		if why != "" {
			refused = append(refused, RefusedClient{Client: q.info(), Reason: why, AuthFailed: auth})
			gone = append(gone, q)
		} else if !checked {
			later = append(later, q)
		}
	}
	s.applyIRoutesLocked(next, gone) // at once, for the clients that stay
	s.live.Store(next)
	s.mu.Unlock()
	checkCerts(later)
	for _, q := range later {
		if why := certWhy[q]; why != "" {
			refused = append(refused, RefusedClient{Client: q.info(), Reason: why, AuthFailed: true})
			gone = append(gone, q)
		}
	}
	for _, line := range p.Changes {
		s.log.Info("reload", "change", line)
	}
	for i, q := range gone {
		go q.refuse(refused[i].Reason, refused[i].AuthFailed)
	}
	slices.SortFunc(refused, func(a, b RefusedClient) int { return int(a.Client.PeerID) - int(b.Client.PeerID) })
	return refused, nil
}

// refuse tells a connected client why it is disconnected (AUTH_FAILED
// for a certificate no longer accepted: an OpenVPN client stops; RESTART
// otherwise, for a cc-exit client: it reconnects), then closes it with
// the reason.
func (p *peer) refuse(reason string, auth bool) {
	if kc := p.keys.Primary(); kc != nil {
		msg := "AUTH_FAILED," + reason
		p.mu.Lock()
		cc := p.ccExit
		p.mu.Unlock()
		if !auth {
			msg = ""
			if cc {
				msg = "RESTART," + reason
			}
		}
		if msg != "" && control.WriteMessage(kc.Conn, msg) == nil {
			p.ctrl.Flush()
		}
	}
	p.close("reload: " + reason)
}
