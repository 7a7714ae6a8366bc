package device

// A status read flows: WriteStatus -> device keys under cfgMu -> a copy of
// the peer list under mu -> per peer: counters (atomics), keys under hsMu,
// the endpoint -> allowed IPs in chunks under allowedMu's read lock ->
// StatusWriter. No lock is held while the StatusWriter runs, so a slow
// reader (a UAPI client that stops reading) stalls nothing else.

import (
	"net/netip"
	"time"

	"github.com/wirelane/wirelane/device/noise"
)

// Status is the device part of its state.
type Status struct {
	PrivateKey noise.PrivateKey // all zeros: none
	ListenPort uint16           // the bound port when up, else the configured one (0: any)
	FwMark     uint32           // 0: none
}

// PeerStatus is one peer's state, without its allowed IPs (those follow
// one by one through StatusWriter.AllowedIP).
type PeerStatus struct {
	PublicKey           noise.PublicKey
	PresharedKey        noise.PresharedKey // all zeros: none
	Endpoint            netip.AddrPort     // invalid: none
	LastHandshake       time.Time          // zero: never
	TxBytes, RxBytes    uint64             // transfer to and from the peer (wg show's "transfer")
	PersistentKeepalive uint16             // seconds, 0: off
}

// StatusWriter receives a device's state from WriteStatus: Device once,
// then (when w is a CounterWriter too) Counters once, then for each peer
// Peer followed by AllowedIP for each of its prefixes.
// The first error a method returns ends WriteStatus, which returns it.
type StatusWriter interface {
	Device(Status) error
	Peer(PeerStatus) error
	AllowedIP(netip.Prefix) error
}

// WriteStatus streams the device's state into w, the peers in creation
// order. Memory stays bounded whatever the number of allowed IPs, and no
// lock is held while w runs. A status read that races a Configure may see
// part of the change. The private and preshared keys w receives are
// copies; WriteStatus clears its own.
func (d *Device) WriteStatus(w StatusWriter) error {
	d.cfgMu.Lock()
	st := Status{FwMark: d.fwmark, ListenPort: d.listenPort}
	d.cfgMu.Unlock()
	if port := d.boundPort.Load(); port != 0 {
		st.ListenPort = uint16(port)
	}
	if id := d.ident.Load(); id != nil {
		st.PrivateKey = id.local.PrivateKey()
	}
	err := w.Device(st)
	clear(st.PrivateKey[:])
	if err != nil {
		return err
	}
	if cw, ok := w.(CounterWriter); ok {
		if err := cw.Counters(d.Counters()); err != nil {
			return err
		}
	}
	d.mu.RLock()
	peers := append([]*peer(nil), d.peerList...)
	d.mu.RUnlock()
	// One buffer for every peer's allowed IPs, grown to the most any
	// peer has (at most getChunk): a get of thousands of peers with a few
	// prefixes each allocates almost nothing.
	chunk := make([]netip.Prefix, 0, 8)
	for _, p := range peers {
		ps := PeerStatus{
			PublicKey:           p.pub,
			TxBytes:             p.txBytes.Load(),
			RxBytes:             p.rxBytes.Load(),
			PersistentKeepalive: uint16(p.persistentKeepalive.Load()),
		}
		p.hsMu.Lock()
		ps.PresharedKey = p.psk
		p.hsMu.Unlock()
		if ep, ok := p.routes.Endpoint(); ok {
			ps.Endpoint = ep.Dst
		}
		if ns := p.lastHandshake.Load(); ns != 0 {
			ps.LastHandshake = time.Unix(0, ns)
		}
		err := w.Peer(ps)
		clear(ps.PresharedKey[:])
		if err != nil {
			return err
		}
		if chunk, err = d.writeAllowedIPs(w, p, chunk); err != nil {
			return err
		}
	}
	return nil
}

// getChunk is how many of a peer's prefixes WriteStatus copies under the allowed-IPs
// read lock before it releases the lock and writes them to the client.
const getChunk = 4096

// writeAllowedIPs streams p's allowed IPs to w through chunk, a buffer it
// grows (to at most getChunk prefixes) and returns for the next peer.
// Allocating a chunk of getChunk per peer instead cost 128 KB a peer: a
// get of 1,000 peers allocated 131 MB and took 0.2 s. The table's read lock is
// held only while a chunk is copied, never while writing to the client: a
// client that stops reading must not hold the lock, or a Configure waiting for
// the write lock would in turn stop every sender and receiver (an RWMutex
// blocks new readers while a writer waits). Memory stays bounded by one
// chunk. If the peer's prefixes change between chunks, the answer may
// miss or repeat a prefix that changed, as any answer racing a Configure may.
func (d *Device) writeAllowedIPs(w StatusWriter, p *peer, chunk []netip.Prefix) ([]netip.Prefix, error) {
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
				return chunk, err
			}
		}
		if len(chunk) < getChunk {
			return chunk, nil
		}
	}
}
