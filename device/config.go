package device

// A configuration change flows: Configure takes cfgMu -> private key
// (identity swap, handshakes rebuilt) -> listen port (rebind) -> fwmark ->
// replace_peers -> each PeerConfig in order (create, preshared key,
// endpoint, allowed IPs, keepalive). Configuration is serialised by cfgMu;
// the data path never waits for it except where a step says so (an
// endpoint change or a removal waits for a grace period).

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
)

// Config is one change to a device's configuration, with the semantics of
// a set operation of WireGuard's cross-platform userspace protocol (the one
// `wg setconf` and `wg set` speak): a nil field is left as it is, and the
// peers are applied in order.
type Config struct {
	// PrivateKey replaces the device's key; it is clamped first, and all
	// zeros clears it. A peer whose public key is the new key's is removed;
	// the other peers' sessions are expired.
	PrivateKey *noise.PrivateKey
	// ListenPort is the UDP port (0: any). On a device that is up the bind
	// is reopened on it; if that fails, the old port is kept and Configure
	// returns a *BindError.
	ListenPort *uint16
	// FwMark is the firewall mark of outgoing packets (0: none). A mark the
	// bind refuses is a *BindError and leaves the old one.
	FwMark *uint32
	// ReplacePeers removes every peer before Peers are applied.
	ReplacePeers bool
	// Peers lists the peers to create, change or remove, in order. A public
	// key may appear more than once; its entries apply one after another.
	Peers []PeerConfig
}

// PeerConfig creates, changes or removes the peer with PublicKey. A peer
// with the device's own public key is ignored, with all its fields.
type PeerConfig struct {
	PublicKey noise.PublicKey
	// Remove removes the peer (if it exists); the other fields are ignored.
	Remove bool
	// UpdateOnly changes the peer only if it exists: a missing peer is not
	// created and the other fields are ignored.
	UpdateOnly bool
	// PresharedKey replaces the peer's preshared key; all zeros is none.
	PresharedKey *noise.PresharedKey
	// Endpoint replaces the peer's endpoint. Once Configure returns, no
	// packet goes to the old one.
	Endpoint *netip.AddrPort
	// PersistentKeepalive is the keepalive interval in seconds (0: off).
	// Turning it on for a device that is up sends a keepalive at once.
	PersistentKeepalive *uint16
	// ReplaceAllowedIPs drops the peer's allowed IPs before AllowedIPs are
	// applied.
	ReplaceAllowedIPs bool
	// AllowedIPs lists additions and removals, applied in order. A prefix
	// added here moves from whichever peer held it; removing a prefix that
	// another peer holds changes nothing.
	AllowedIPs []AllowedIPChange
}

// AllowedIPChange adds (Remove false) or removes one allowed-IPs prefix.
type AllowedIPChange struct {
	Prefix netip.Prefix // masked to its length when stored; an invalid prefix is ignored
	Remove bool
}

// ErrClosed is returned by Up and Configure on a device that is closed or
// closing.
var ErrClosed = errors.New("device: closed")

// BindError reports a listen port or firewall mark that the bind could not
// take. The device keeps its previous setting.
type BindError struct {
	What string // "listen port" or "fwmark"
	Port uint16 // the port asked for, when What is "listen port"
	Err  error  // the bind's error
}

// Error returns "device: cannot listen on port N: ..." or "device: cannot
// set fwmark: ...".
func (e *BindError) Error() string {
	if e.What == "listen port" {
		return fmt.Sprintf("device: cannot listen on port %d: %v", e.Port, e.Err)
	}
	return "device: cannot set " + e.What + ": " + e.Err.Error()
}

// Unwrap returns the bind's error.
func (e *BindError) Unwrap() error { return e.Err }

// Configure applies c. Changes before a failure stay applied, as with the
// reference implementations; the failures are ErrClosed and *BindError (a
// port or mark that cannot be applied). Configure is safe for concurrent
// use; changes are applied one after another.
func (d *Device) Configure(c *Config) error {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	if d.closing.Load() {
		return ErrClosed
	}
	if c.PrivateKey != nil {
		d.setPrivateKeyLocked(*c.PrivateKey)
	}
	if c.ListenPort != nil && *c.ListenPort != d.listenPort {
		if err := d.setListenPortLocked(*c.ListenPort); err != nil {
			return err
		}
	}
	if c.FwMark != nil && *c.FwMark != d.fwmark {
		if d.up.Load() {
			if err := d.bind.SetMark(*c.FwMark); err != nil {
				return &BindError{What: "fwmark", Err: err}
			}
		}
		d.fwmark = *c.FwMark
	}
	if c.ReplacePeers {
		d.removeAllPeersLocked()
	}
	for i := range c.Peers {
		d.setPeerLocked(&c.Peers[i])
	}
	return nil
}

// setPrivateKeyLocked installs a new identity (clamped; all zeros clears
// it). A peer with the new public key is removed; the other peers get
// handshakes bound to the new key and their sessions are expired.
func (d *Device) setPrivateKeyLocked(k noise.PrivateKey) {
	if !k.IsZero() {
		k.Clamp()
	}
	old := d.ident.Load()
	if (old == nil && k.IsZero()) || (old != nil && old.local.PrivateKey() == k) {
		return
	}
	var id *identity
	if !k.IsZero() {
		l := noise.NewLocal(k)
		id = &identity{local: l, checker: noise.NewCookieChecker(l)}
		if p := d.lookupPeer(l.PublicKey()); p != nil {
			d.removePeerLocked(p)
		}
	}
	d.ident.Store(id)
	d.mu.RLock()
	peers := append([]*peer(nil), d.peerList...)
	d.mu.RUnlock()
	for _, p := range peers {
		p.hsMu.Lock()
		if old := p.hs.Load(); old != nil {
			old.Clear()
		}
		if id != nil {
			p.hs.Store(noise.NewHandshake(id.local, p.pub, p.psk))
		} else {
			p.hs.Store(nil)
		}
		p.hsMu.Unlock()
		p.expireCurrent()
	}
}

// setListenPortLocked records the port and, when up, rebinds to it. On
// failure the old port is kept and a *BindError returned.
func (d *Device) setListenPortLocked(port uint16) error {
	if !d.up.Load() {
		d.listenPort = port
		return nil
	}
	old := uint16(d.boundPort.Load())
	d.closeBindLocked()
	if err := d.openBindLocked(port); err != nil {
		if rerr := d.openBindLocked(old); rerr != nil {
			d.log.Error("cannot reopen the previous port", "port", old, "err", rerr)
		}
		return &BindError{What: "listen port", Port: port, Err: err}
	}
	d.listenPort = port
	d.mu.RLock()
	for _, p := range d.peerList {
		p.clearEndpointSrc() // the old socket's source addresses are gone
	}
	d.mu.RUnlock()
	return nil
}

// setPeerLocked applies one peer section.
func (d *Device) setPeerLocked(pr *PeerConfig) {
	pub := pr.PublicKey
	if id := d.ident.Load(); id != nil && id.local.PublicKey() == pub {
		d.log.Debug("ignoring peer with our own public key")
		return
	}
	p := d.lookupPeer(pub)
	if pr.Remove {
		if p != nil {
			d.removePeerLocked(p)
		}
		return
	}
	if p == nil {
		if pr.UpdateOnly {
			return
		}
		p = d.newPeer(pub)
		d.mu.Lock()
		d.peers[pub] = p
		d.peerList = append(d.peerList, p)
		d.mu.Unlock()
		if d.up.Load() {
			p.start()
		}
	}
	if pr.PresharedKey != nil {
		p.hsMu.Lock()
		p.psk = *pr.PresharedKey
		if hs := p.hs.Load(); hs != nil {
			hs.SetPresharedKey(p.psk)
		}
		p.hsMu.Unlock()
	}
	if pr.Endpoint != nil {
		if p.setEndpoint(conn.Endpoint{Dst: *pr.Endpoint}) {
			d.syncSenders() // nothing goes to the old endpoint after Configure returns
		}
	}
	if pr.ReplaceAllowedIPs {
		d.allowedMu.Lock()
		d.allowed.RemoveValue(p)
		d.allowedMu.Unlock()
	}
	if len(pr.AllowedIPs) > 0 {
		d.allowedMu.Lock()
		for _, c := range pr.AllowedIPs {
			if c.Remove {
				d.allowed.Remove(c.Prefix, p)
			} else {
				d.allowed.Insert(c.Prefix, p)
			}
		}
		d.allowedMu.Unlock()
	}
	if pr.PersistentKeepalive != nil {
		was := p.persistentKeepalive.Swap(uint32(*pr.PersistentKeepalive))
		if was == 0 && *pr.PersistentKeepalive > 0 && d.up.Load() {
			p.sendKeepalive()
		}
		if *pr.PersistentKeepalive == 0 {
			p.timers.persistentKeepalive.del()
		}
	}
}

// removePeerLocked removes p: once it returns, no packet goes to p's
// endpoint and its sessions are forgotten.
func (d *Device) removePeerLocked(p *peer) {
	d.mu.Lock()
	if d.peers[p.pub] != p {
		d.mu.Unlock()
		return
	}
	delete(d.peers, p.pub)
	for i, q := range d.peerList {
		if q == p {
			d.peerList = append(d.peerList[:i], d.peerList[i+1:]...)
			break
		}
	}
	d.mu.Unlock()
	d.allowedMu.Lock()
	d.allowed.RemoveValue(p)
	d.allowedMu.Unlock()
	p.stop() // ref-mode sends end with the peer's sender goroutine
	p.routes.Clear()
	p.refEP.clear()
	d.syncSenders()
	p.zeroKeys()
}

func (d *Device) removeAllPeersLocked() {
	d.mu.RLock()
	peers := append([]*peer(nil), d.peerList...)
	d.mu.RUnlock()
	for _, p := range peers {
		d.removePeerLocked(p)
	}
}
