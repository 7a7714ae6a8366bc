package wgtunnel

// SetPeers: the incremental path of a reload, for a caller that keeps its
// own record of the peers it applied (the fleet agent). It sends the
// device only the peers that changed (one UAPI set: remove, update_only,
// replace_allowed_ips) and changes only their routes, without reading the
// device back: a UAPI get of every peer is what makes a full Reload of
// thousands of peers slow. The caller runs a full Reload at start and now
// and then, which reconciles whatever changed behind its back.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// ErrNeedsReload is SetPeers' answer to a change it does not make
// incrementally (a default route, a route table it cannot resolve): the
// caller runs Reload instead. Nothing was changed.
var ErrNeedsReload = errors.New("this change needs a full reload")

// PeerSetResult counts what SetPeers changed.
type PeerSetResult struct {
	Removed, Added, Updated int
	RoutesRemoved           int
	RoutesAdded             int
}

// Empty reports whether nothing changed.
func (r PeerSetResult) Empty() bool { return r == PeerSetResult{} }

// SetPeers changes the running tunnel cfg.Name from the peers old to the
// peers now, where old is what the caller applied last (it must be what
// the device holds of those peers) and cfg is the whole configuration
// wanted, now included (its other peers, its addresses and its Table
// decide which routes stay). Only the peers that differ are sent, and
// only their routes change; the device is not read. Endpoints must be
// addresses (ip:port), never names. A failure undoes what was done.
func SetPeers(ctx context.Context, cfg *wgquick.Config, old, now []wgquick.Peer, o Options) (PeerSetResult, error) {
	var res PeerSetResult
	table, routed := 0, true
	switch t := cfg.Interface.Table; t {
	case "", "auto":
	case "off":
		routed = false
	default:
		n, err := netcfg.ResolveTable(t)
		if err != nil {
			return res, ErrNeedsReload
		}
		table = n
	}
	oldBy := make(map[wgquick.Key]*wgquick.Peer, len(old))
	for i := range old {
		oldBy[old[i].PublicKey] = &old[i]
	}
	nowBy := make(map[wgquick.Key]bool, len(now))
	var wc wgtypes.Config
	var undo wgtypes.Config
	// Removals first, so that an allowed IP may move to another peer.
	for i := range now {
		nowBy[now[i].PublicKey] = true
	}
	for i := range old {
		if !nowBy[old[i].PublicKey] {
			wc.Peers = append(wc.Peers, wgtypes.PeerConfig{PublicKey: wgtypes.Key(old[i].PublicKey), Remove: true})
			res.Removed++
		}
	}
	var removedPfx, addedPfx []netip.Prefix
	for i := range now {
		p := &now[i]
		op, ok := oldBy[p.PublicKey]
		if !ok {
			pc, err := peerConfig(p)
			if err != nil {
				return res, err
			}
			wc.Peers = append(wc.Peers, pc)
			undo.Peers = append(undo.Peers, wgtypes.PeerConfig{PublicKey: pc.PublicKey, Remove: true})
			res.Added++
			continue
		}
		u, back, changed, err := peerDelta(op, p)
		if err != nil {
			return res, err
		}
		if changed {
			wc.Peers = append(wc.Peers, u)
			undo.Peers = append(undo.Peers, back)
			res.Updated++
		}
	}
	for i := range old {
		if !nowBy[old[i].PublicKey] {
			pc, err := peerConfig(&old[i])
			if err == nil {
				undo.Peers = append(undo.Peers, pc)
			}
		}
	}

	// Routes: the prefixes of old that no peer of cfg wants any more go,
	// those of now that old did not have come.
	if routed {
		want := map[netip.Prefix]bool{}
		for _, p := range cfg.Peers {
			for _, a := range p.AllowedIPs {
				want[a.Masked()] = true
			}
		}
		had := map[netip.Prefix]bool{}
		for _, p := range old {
			for _, a := range p.AllowedIPs {
				had[a.Masked()] = true
			}
		}
		var onLink []netip.Prefix
		for _, a := range cfg.Interface.Addresses {
			onLink = append(onLink, a.Masked())
		}
		for pf := range had {
			if !want[pf] && !covered(onLink, pf) {
				removedPfx = append(removedPfx, pf)
			}
		}
		for _, p := range now {
			for _, a := range p.AllowedIPs {
				pf := a.Masked()
				if pf.Bits() == 0 {
					return res, ErrNeedsReload
				}
				if !had[pf] && !covered(onLink, pf) && !slices.Contains(addedPfx, pf) {
					addedPfx = append(addedPfx, pf)
				}
			}
		}
		// Longest prefix first, as up adds them.
		slices.SortFunc(addedPfx, func(a, b netip.Prefix) int { return b.Bits() - a.Bits() })
	}
	if len(wc.Peers) == 0 && len(removedPfx) == 0 && len(addedPfx) == 0 {
		return res, nil
	}

	eng, release := o.engine()
	defer release()
	nc, err := o.netConf(true)
	if err != nil {
		return res, err
	}
	defer nc.Close()
	name := cfg.Name
	err = runSteps(ctx, nc.Undo, func(n int) { o.notef("peer change failed; undoing %d change(s)", n) }, []step{
		{"peers", func(context.Context) error {
			if len(wc.Peers) == 0 {
				return nil
			}
			o.logf("wg set %s (%d peer(s): %d removed, %d added, %d changed)", name, len(wc.Peers), res.Removed, res.Added, res.Updated)
			nc.Undo.Push("peers", func() error { return eng.Configure(name, undo) })
			if err := eng.Configure(name, wc); err != nil {
				return fmt.Errorf("peers: %w", explainUAPIError(err, cfg))
			}
			return nil
		}},
		{"routes", func(context.Context) error {
			rt := table
			if rt == 0 {
				rt = unix.RT_TABLE_MAIN
			}
			for _, pf := range removedPfx {
				if err := nc.DeleteRoute(name, pf, rt); err != nil {
					return err
				}
				res.RoutesRemoved++
			}
			for _, pf := range addedPfx {
				err := nc.AddRoute(name, pf, table)
				if errors.Is(err, unix.EEXIST) {
					continue // there already (a resync will tell whose)
				}
				if err != nil {
					return err
				}
				res.RoutesAdded++
			}
			return nil
		}},
	})
	if err != nil {
		return PeerSetResult{}, fmt.Errorf("set peers of %s: %w (the tunnel is as it was)", name, err)
	}
	return res, nil
}

// peerConfig is the device configuration that adds p (its endpoint an
// address, never resolved here).
func peerConfig(p *wgquick.Peer) (wgtypes.PeerConfig, error) {
	pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.PublicKey), ReplaceAllowedIPs: true}
	if p.PresharedKey != nil {
		k := wgtypes.Key(*p.PresharedKey)
		pc.PresharedKey = &k
	}
	if p.PersistentKeepalive != nil {
		d := time.Duration(*p.PersistentKeepalive) * time.Second
		pc.PersistentKeepaliveInterval = &d
	}
	pc.AllowedIPs = ipNets(p.AllowedIPs)
	if p.Endpoint != "" {
		ap, err := netip.ParseAddrPort(p.Endpoint)
		if err != nil {
			return pc, fmt.Errorf("peer %s: endpoint %q is not an address: %w", p.PublicKey, p.Endpoint, ErrNeedsReload)
		}
		pc.Endpoint = net.UDPAddrFromAddrPort(ap)
	}
	return pc, nil
}

func ipNets(ps []netip.Prefix) []net.IPNet {
	out := make([]net.IPNet, 0, len(ps))
	for _, a := range ps {
		out = append(out, net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())})
	}
	return out
}

// peerDelta is the update_only change from op to p, its inverse, and
// whether there is any.
func peerDelta(op, p *wgquick.Peer) (u, back wgtypes.PeerConfig, changed bool, err error) {
	k := wgtypes.Key(p.PublicKey)
	u = wgtypes.PeerConfig{PublicKey: k, UpdateOnly: true}
	back = wgtypes.PeerConfig{PublicKey: k, UpdateOnly: true}
	key := func(x *wgquick.Key) wgtypes.Key {
		if x == nil {
			return wgtypes.Key{}
		}
		return wgtypes.Key(*x)
	}
	if a, b := key(op.PresharedKey), key(p.PresharedKey); a != b {
		u.PresharedKey, back.PresharedKey = &b, &a
		changed = true
	}
	ka := func(x *uint16) time.Duration {
		if x == nil {
			return 0
		}
		return time.Duration(*x) * time.Second
	}
	if a, b := ka(op.PersistentKeepalive), ka(p.PersistentKeepalive); a != b {
		u.PersistentKeepaliveInterval, back.PersistentKeepaliveInterval = &b, &a
		changed = true
	}
	if p.Endpoint != op.Endpoint && p.Endpoint != "" {
		ap, perr := netip.ParseAddrPort(p.Endpoint)
		if perr != nil {
			return u, back, false, fmt.Errorf("peer %s: endpoint %q is not an address: %w", p.PublicKey, p.Endpoint, ErrNeedsReload)
		}
		u.Endpoint = net.UDPAddrFromAddrPort(ap)
		if oap, perr := netip.ParseAddrPort(op.Endpoint); perr == nil {
			back.Endpoint = net.UDPAddrFromAddrPort(oap)
		}
		changed = true
	}
	if !samePrefixes(op.AllowedIPs, p.AllowedIPs) {
		u.ReplaceAllowedIPs, u.AllowedIPs = true, ipNets(p.AllowedIPs)
		back.ReplaceAllowedIPs, back.AllowedIPs = true, ipNets(op.AllowedIPs)
		changed = true
	}
	return u, back, changed, nil
}
