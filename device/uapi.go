package device

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/control/uapi"
)

var _ uapi.Handler = (*Device)(nil)

// Get streams the device's configuration and peer state into w: the device
// keys, then each peer (in creation order) followed by its allowed IPs one
// by one. It returns the first error w reports.
func (d *Device) Get(w *uapi.Writer) error {
	d.cfgMu.Lock()
	info := uapi.DeviceInfo{FwMark: d.fwmark, ListenPort: d.listenPort}
	d.cfgMu.Unlock()
	if port := d.boundPort.Load(); port != 0 {
		info.ListenPort = uint16(port)
	}
	if id := d.ident.Load(); id != nil {
		info.PrivateKey = uapi.Key(id.local.PrivateKey())
	}
	err := w.Device(info)
	clear(info.PrivateKey[:])
	if err != nil {
		return err
	}
	d.mu.RLock()
	peers := append([]*peer(nil), d.peerList...)
	d.mu.RUnlock()
	for _, p := range peers {
		pi := uapi.PeerInfo{
			PublicKey:           uapi.Key(p.pub),
			TxBytes:             p.txBytes.Load(),
			RxBytes:             p.rxBytes.Load(),
			PersistentKeepalive: uint16(p.persistentKeepalive.Load()),
		}
		p.hsMu.Lock()
		pi.PresharedKey = uapi.Key(p.psk)
		p.hsMu.Unlock()
		if ep, ok := p.routes.Endpoint(); ok {
			pi.Endpoint = ep.Dst
		}
		if ns := p.lastHandshake.Load(); ns != 0 {
			pi.LastHandshake = time.Unix(0, ns)
		}
		err := w.Peer(pi)
		clear(pi.PresharedKey[:])
		if err != nil {
			return err
		}
		if err := d.writeAllowedIPs(w, p); err != nil {
			return err
		}
	}
	return nil
}

// getChunk is how many of a peer's prefixes Get copies under the allowed-IPs
// read lock before it releases the lock and writes them to the client.
const getChunk = 4096

// writeAllowedIPs streams p's allowed IPs to w. The table's read lock is
// held only while a chunk is copied, never while writing to the client: a
// client that stops reading must not hold the lock, or a Set waiting for
// the write lock would in turn stop every sender and receiver (an RWMutex
// blocks new readers while a writer waits). Memory stays bounded by one
// chunk. If the peer's prefixes change between chunks, the answer may
// miss or repeat a prefix that changed, as any answer racing a Set may.
func (d *Device) writeAllowedIPs(w *uapi.Writer, p *peer) error {
	chunk := make([]netip.Prefix, 0, getChunk)
	for done := 0; ; done += len(chunk) {
		chunk = chunk[:0]
		skip := done
		d.allowedMu.RLock()
		d.allowed.Prefixes(p, func(pfx netip.Prefix) bool {
			if skip > 0 {
				skip--
				return true
			}
			chunk = append(chunk, pfx)
			return len(chunk) < getChunk
		})
		d.allowedMu.RUnlock()
		for _, pfx := range chunk {
			if err := w.AllowedIP(pfx); err != nil {
				return err
			}
		}
		if len(chunk) < getChunk {
			return nil
		}
	}
}

// Set applies a validated set=1 request with the semantics of the reference
// implementations. Failures the client must see are *uapi.Error values
// (ErrnoAddrUse for a port or mark that cannot be applied).
func (d *Device) Set(req *uapi.SetRequest) error {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	if d.closing.Load() {
		return &uapi.Error{Errno: uapi.ErrnoIO, Msg: "device is closed"}
	}
	if req.PrivateKey != nil {
		d.setPrivateKeyLocked(noise.PrivateKey(*req.PrivateKey))
	}
	if req.ListenPort != nil && *req.ListenPort != d.listenPort {
		if err := d.setListenPortLocked(*req.ListenPort); err != nil {
			return err
		}
	}
	if req.FwMark != nil && *req.FwMark != d.fwmark {
		if d.up.Load() {
			if err := d.bind.SetMark(*req.FwMark); err != nil {
				return &uapi.Error{Errno: uapi.ErrnoAddrUse, Msg: "cannot set fwmark: " + err.Error()}
			}
		}
		d.fwmark = *req.FwMark
	}
	if req.ReplacePeers {
		d.removeAllPeersLocked()
	}
	for i := range req.Peers {
		d.setPeerLocked(&req.Peers[i])
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
// failure the old port is kept and ErrnoAddrUse returned.
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
		return &uapi.Error{Errno: uapi.ErrnoAddrUse, Msg: fmt.Sprintf("cannot listen on port %d: %v", port, err)}
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
func (d *Device) setPeerLocked(pr *uapi.PeerRequest) {
	pub := noise.PublicKey(pr.PublicKey)
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
		p.psk = noise.PresharedKey(*pr.PresharedKey)
		if hs := p.hs.Load(); hs != nil {
			hs.SetPresharedKey(p.psk)
		}
		p.hsMu.Unlock()
	}
	if pr.Endpoint != nil {
		if p.setEndpoint(conn.Endpoint{Dst: *pr.Endpoint}) {
			d.syncSenders() // nothing goes to the old endpoint after Set returns
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
	p.stop() // RefMode sends end with the peer's sender goroutine
	p.routes.Clear()
	p.refEP.Clear()
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

// IpcSet applies a UAPI set operation given as text without its leading
// "set=1\n" line, as `wg setconf` would send it. Nothing is applied when a
// line is invalid.
func (d *Device) IpcSet(text string) error {
	if !strings.HasSuffix(text, "\n\n") {
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += "\n"
	}
	req, err := uapi.ParseSet(strings.NewReader(text))
	if err != nil {
		return err
	}
	return d.Set(req)
}

// IpcGet returns the answer to a get=1 operation without its trailing
// errno line.
func (d *Device) IpcGet() (string, error) {
	var buf bytes.Buffer
	w := uapi.NewWriter(&buf)
	if err := d.Get(w); err != nil {
		return "", err
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return buf.String(), nil
}
