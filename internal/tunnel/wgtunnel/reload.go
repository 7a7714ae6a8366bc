package wgtunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// ReloadOptions says how Reload runs: as Up does (Options), and DryRun,
// which computes and returns the plan without applying it.
type ReloadOptions struct {
	Options
	// DryRun returns the plan and changes nothing.
	DryRun bool
}

// Reload changes the running tunnel cfg.Name into what `up` of cfg would
// have made it, in place, and returns what it changed (the Plan). It reads
// the device's configuration (UAPI get) and the interface's addresses, MTU,
// routes and firewall tables (netlink), compares them with the file and
// applies only the differences, in this order, each inverse on the undo
// stack:
//
//	peers removed, changed (update_only: only the changed fields; the
//	allowed IPs replaced only when they changed), added; the private key
//	-> addresses -> MTU -> fwmark
//	-> default-route rules and firewall removed -> routes removed, added
//	   -> default-route rules and firewall added or rebuilt
//	-> DNS (when the settings read back from systemd-resolved or
//	   resolvconf differ) -> listen port (rebound only when it changed)
//
// Peers that stay keep their sessions, keypairs, counters and handshake
// state. PreUp and PostUp do not run again. A change that fails, or a
// cancelled ctx, undoes everything done so far: the tunnel is left as it
// was, and the error says why. A plan with no change (Plan.Empty) makes no
// changing system call. The service calls it as the CLI does.
func Reload(ctx context.Context, cfg *wgquick.Config, o ReloadOptions) (*Plan, error) {
	name := cfg.Name
	eng, release := o.engine()
	defer release()
	dev, err := eng.Device(name)
	if err != nil {
		return nil, fmt.Errorf("`%s' is not running (reload changes a running tunnel; use up): %w", name, err)
	}
	nc, err := o.netConf(true)
	if err != nil {
		return nil, err
	}
	defer nc.Close()
	if !nc.LinkExists(name) {
		return nil, fmt.Errorf("`%s' is not an interface in this network namespace (a daemon for it answers, so it probably lives in another one)", name)
	}
	in := planInput{cfg: cfg, noFirewall: o.NoFirewall, freeTable: func() (int, error) { return nc.FreeTable(defaultTable) }}
	if t := cfg.Interface.Table; t != "" && t != "auto" && t != "off" {
		if in.table, err = netcfg.ResolveTable(t); err != nil {
			return nil, lineError(cfg, cfg.Interface.TableLine, "Table: "+err.Error())
		}
	}
	var eps []netip.AddrPort
	if in.wcfg, eps, err = DeviceConfig(ctx, cfg); err != nil {
		return nil, err
	}
	run, err := readRunning(nc, dev)
	if err != nil {
		return nil, err
	}
	if in.dns, in.resolver, in.dnsKnown, err = nc.LinkDNS(name); err != nil {
		return nil, fmt.Errorf("read the DNS settings of %s: %w", name, err)
	}
	in.mtu = cfg.Interface.MTU
	if in.mtu == 0 {
		in.mtu = autoMTU(nc, eps)
	}
	p, err := planReload(run, in)
	if err != nil {
		return nil, err
	}
	for _, n := range p.Notes {
		o.warnf("%s", n)
	}
	if o.DryRun || p.Empty() {
		return p, nil
	}
	err = runSteps(ctx, nc.Undo, func(n int) { o.notef("reload failed; undoing %d change(s)", n) }, p.steps(nc, eng, cfg, &o.Options))
	if err != nil {
		return p, fmt.Errorf("reload %s: %w (the tunnel is as it was)", name, err)
	}
	return p, nil
}

// ReloadFile is Reload of the wg-quick file arg names (a path, or an
// interface name for /etc/wireguard/NAME.conf), for callers that hold a
// tunnel's name, such as the service. A file that does not parse is an
// error at FILE:LINE, and nothing changes.
func ReloadFile(ctx context.Context, arg string, o ReloadOptions) (*Plan, error) {
	cfg, err := wgquick.LoadFile(arg)
	if err != nil {
		return nil, err
	}
	return Reload(ctx, cfg, o)
}

// readRunning reads the interface of dev through netlink.
func readRunning(nc *netcfg.Conf, dev *wgtypes.Device) (*running, error) {
	r := &running{dev: dev}
	var err error
	if r.addrs, err = nc.Addresses(dev.Name); err != nil {
		return nil, err
	}
	l, err := nc.Link(dev.Name)
	if err != nil {
		return nil, err
	}
	r.mtu = l.Attrs().MTU
	rs, err := nc.LinkRoutes(dev.Name)
	if err != nil {
		return nil, err
	}
	for _, x := range rs {
		r.routes = append(r.routes, Route{Prefix: x.Dst, Table: x.Table})
	}
	fams, err := nc.Firewall().FirewallTables(dev.Name)
	if err != nil {
		fams = nil // no nftables: no table to keep up to date
	}
	for _, f := range fams {
		switch f {
		case "ip":
			r.firewall = append(r.firewall, unix.AF_INET)
		case "ip6":
			r.firewall = append(r.firewall, unix.AF_INET6)
		}
	}
	return r, nil
}

// steps turns the plan into the steps Reload runs.
func (p *Plan) steps(nc *netcfg.Conf, eng Engine, cfg *wgquick.Config, o *Options) []step {
	name := p.Name
	run := p.run
	oldMark := uint32(run.dev.FirewallMark)
	newMark := oldMark
	if p.FwMark != nil {
		newMark = uint32(*p.FwMark)
	}
	configure := func(what string, c, undo wgtypes.Config) error {
		// The inverse goes first: it is harmless if the change did
		// not apply, and the change may apply in part before it fails.
		nc.Undo.Push(what, func() error { return eng.Configure(name, undo) })
		if err := eng.Configure(name, c); err != nil {
			return fmt.Errorf("%s: %w", what, explainUAPIError(err, cfg))
		}
		return nil
	}
	return []step{
		{"firewall guard", func(context.Context) error {
			// Whatever the rollback rebuilds of the firewall in between,
			// the last inverse to run makes the tables match the
			// addresses as they were.
			if len(run.firewall) > 0 && len(p.AddAddresses)+len(p.RemoveAddresses) > 0 {
				fams := slices.Clone(run.firewall)
				nc.Undo.Push("firewall", func() error {
					var errs []error
					for _, f := range fams {
						errs = append(errs, nc.Firewall().RebuildAntiSpoofing(f, name, oldMark))
					}
					return errors.Join(errs...)
				})
			}
			return nil
		}},
		{"peers", func(context.Context) error {
			c, undo, n := p.peerConfigs()
			if n == 0 {
				return nil
			}
			o.logf("wg set %s (%d change(s) of peers and keys)", name, n)
			return configure("peers", c, undo)
		}},
		{"addresses", func(context.Context) error {
			for _, a := range p.RemoveAddresses {
				if err := nc.RemoveAddress(name, a); err != nil {
					return err
				}
			}
			for _, a := range p.AddAddresses {
				if err := nc.AddAddress(name, a); err != nil {
					return err
				}
			}
			if p.MTU != 0 {
				return nc.SetMTU(name, p.MTU)
			}
			return nil
		}},
		{"fwmark", func(context.Context) error {
			if p.FwMark == nil {
				return nil
			}
			o.logf("wg set %s fwmark %d", name, *p.FwMark)
			old := run.dev.FirewallMark
			return configure("fwmark", wgtypes.Config{FirewallMark: p.FwMark}, wgtypes.Config{FirewallMark: &old})
		}},
		{"routes", func(context.Context) error {
			for _, f := range p.RemoveDefault {
				if err := nc.RemoveDefaultRouteRules(f, int(oldMark)); err != nil {
					return err
				}
				if slices.Contains(run.firewall, f) {
					if err := nc.Firewall().RemoveAntiSpoofing(f, name, oldMark); err != nil {
						return err
					}
				}
			}
			for _, r := range p.RemoveRoutes {
				if err := nc.DeleteRoute(name, r.Prefix, r.Table); err != nil {
					return err
				}
			}
			for _, r := range p.AddRoutes {
				t := r.Table
				if t == unix.RT_TABLE_MAIN {
					t = 0
				}
				if err := nc.AddRoute(name, r.Prefix, t); err != nil {
					return err
				}
			}
			for _, f := range p.AddDefault {
				if err := nc.AddDefaultRouteRules(f, int(newMark)); err != nil {
					return err
				}
				if f == unix.AF_INET {
					if err := nc.Sysctl("net.ipv4.conf.all.src_valid_mark", "1"); err != nil {
						return err
					}
				}
				if err := addFirewall(nc, name, f, int(newMark), o); err != nil {
					return err
				}
			}
			for _, f := range p.RefreshFirewall {
				if !slices.Contains(run.firewall, f) {
					if err := addFirewall(nc, name, f, int(newMark), o); err != nil {
						return err
					}
					continue
				}
				if err := nc.Firewall().RebuildAntiSpoofing(f, name, newMark); err != nil {
					return err
				}
			}
			return nil
		}},
		{"DNS", func(context.Context) error {
			if p.DNS == nil {
				return nil
			}
			// One inverse for the whole change: the settings as they were.
			old := p.DNS.Old
			restore := func() error {
				u := nc.Undo
				nc.Undo = nil
				defer func() { nc.Undo = u }()
				if err := nc.UnsetDNS(name); err != nil {
					return err
				}
				if len(old.Servers) == 0 {
					return nil
				}
				_, err := nc.SetDNS(name, old)
				return err
			}
			nc.Undo.Push("DNS", restore)
			u := nc.Undo
			nc.Undo = nil
			defer func() { nc.Undo = u }()
			if len(old.Servers) > 0 {
				if err := nc.UnsetDNS(name); err != nil {
					return err
				}
			}
			return setDNS(nc, cfg, o)
		}},
		{"listen port", func(context.Context) error {
			if p.ListenPort == 0 {
				return nil
			}
			o.logf("wg set %s listen-port %d", name, p.ListenPort)
			port, old := p.ListenPort, run.dev.ListenPort
			return configure("listen port", wgtypes.Config{ListenPort: &port}, wgtypes.Config{ListenPort: &old})
		}},
	}
}

// peerConfigs returns the device change of the plan's peers and private
// key, its inverse, and how many peers it changes. Removals go first, so
// that an allowed IP can move from a removed peer to another.
func (p *Plan) peerConfigs() (c, undo wgtypes.Config, n int) {
	dev := p.run.dev
	if p.PrivateKey {
		k, old := p.newKey, dev.PrivateKey
		c.PrivateKey, undo.PrivateKey = &k, &old
	}
	old := map[wgtypes.Key]wgtypes.Peer{}
	for _, op := range dev.Peers {
		old[op.PublicKey] = op
	}
	for _, k := range p.RemovePeers {
		c.Peers = append(c.Peers, wgtypes.PeerConfig{PublicKey: k, Remove: true})
	}
	for _, u := range p.UpdatePeers {
		c.Peers = append(c.Peers, u.Config)
	}
	for _, pc := range p.AddPeers {
		c.Peers = append(c.Peers, pc)
	}
	// The inverse: added peers removed, changed ones set back, removed
	// ones added back as they were (their sessions are new).
	for _, pc := range p.AddPeers {
		undo.Peers = append(undo.Peers, wgtypes.PeerConfig{PublicKey: pc.PublicKey, Remove: true})
	}
	for _, u := range p.UpdatePeers {
		op := old[u.Config.PublicKey]
		r := wgtypes.PeerConfig{PublicKey: op.PublicKey, UpdateOnly: true}
		if u.Config.PresharedKey != nil {
			k := op.PresharedKey
			r.PresharedKey = &k
		}
		if u.Config.Endpoint != nil && op.Endpoint != nil {
			r.Endpoint = op.Endpoint
		}
		if u.Config.PersistentKeepaliveInterval != nil {
			d := op.PersistentKeepaliveInterval
			r.PersistentKeepaliveInterval = &d
		}
		if u.Config.ReplaceAllowedIPs {
			r.ReplaceAllowedIPs, r.AllowedIPs = true, op.AllowedIPs
		}
		undo.Peers = append(undo.Peers, r)
	}
	for _, k := range p.RemovePeers {
		undo.Peers = append(undo.Peers, peerConfigOf(old[k]))
	}
	n = len(c.Peers)
	if p.PrivateKey {
		n++
	}
	return c, undo, n
}

// peerConfigOf is the configuration that adds peer op as it runs.
func peerConfigOf(op wgtypes.Peer) wgtypes.PeerConfig {
	pc := wgtypes.PeerConfig{PublicKey: op.PublicKey, ReplaceAllowedIPs: true, AllowedIPs: slices.Clone(op.AllowedIPs)}
	if op.PresharedKey != (wgtypes.Key{}) {
		k := op.PresharedKey
		pc.PresharedKey = &k
	}
	if op.Endpoint != nil {
		pc.Endpoint = &net.UDPAddr{IP: op.Endpoint.IP, Port: op.Endpoint.Port, Zone: op.Endpoint.Zone}
	}
	if op.PersistentKeepaliveInterval > 0 {
		d := op.PersistentKeepaliveInterval
		pc.PersistentKeepaliveInterval = &d
	}
	return pc
}
