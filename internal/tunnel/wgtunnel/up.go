package wgtunnel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Up brings the tunnel of cfg up (the pipeline is in the package
// documentation). On failure, or when ctx is cancelled (Ctrl-C), every
// change made so far is undone before it returns; the error is then the
// cause, joined with any undo that failed (errors.Join(cause, undoErr)).
func Up(ctx context.Context, cfg *wgquick.Config, o Options) (err error) {
	name := cfg.Name
	eng, release := o.engine()
	defer release()
	nc, err := o.netConf(true)
	if err != nil {
		return err
	}
	defer nc.Close()
	if nc.LinkExists(name) {
		return fmt.Errorf("`%s' already exists", name)
	}
	if eng.InUse(name) {
		return fmt.Errorf("`%s' is in use by a running daemon (%s answers), probably in another network namespace; interface names must be unique across namespaces", name, uapi.SocketPath(name))
	}
	// Check what can be checked before anything changes.
	var table int
	if t := cfg.Interface.Table; t != "" && t != "auto" && t != "off" {
		if table, err = netcfg.ResolveTable(t); err != nil {
			return lineError(cfg, cfg.Interface.TableLine, "Table: "+err.Error())
		}
	}
	// Only once the engine started is the device ours to wait for (and,
	// if it hangs, to stop) during a roll-back.
	started := false
	defer func() {
		if err != nil && started {
			eng.Stopped(name, 2*time.Second)
			removeRecord(name) // best effort: the error Up returns is the cause
		}
	}()
	var endpoints []netip.AddrPort
	return runSteps(ctx, nc.Undo, func(n int) { o.notef("up failed; undoing %d change(s)", n) }, []step{
		{"PreUp", func(ctx context.Context) error { return runHooks(ctx, &o, cfg.Interface.PreUp, name) }},
		{"start", func(ctx context.Context) error {
			nc.PushDeleteLink(name)
			if err := eng.Start(ctx, name); err != nil {
				return err
			}
			started = true
			// Before anything is configured: a daemon left behind by an
			// Up that never finished is then known as such (Save refuses it).
			if err := writeRecord(eng, cfg, false); err != nil {
				o.warnf("cannot record which daemon up configures (%v): save and SaveConfig will refuse to write %s", err, cfg.Path)
			}
			return nil
		}},
		{"configure", func(ctx context.Context) (err error) {
			endpoints, err = setConfig(ctx, eng, cfg, &o)
			return err
		}},
		{"link", func(context.Context) error { return setLink(nc, cfg, endpoints) }},
		{"DNS", func(context.Context) error { return setDNS(nc, cfg, &o) }},
		{"routes", func(context.Context) error { return addRoutes(nc, eng, cfg, table, &o) }},
		{"PostUp", func(ctx context.Context) error { return runHooks(ctx, &o, cfg.Interface.PostUp, name) }},
		{"check", func(context.Context) error { return stillRunning(nc, eng, name) }},
		{"record", func(context.Context) error {
			if err := writeRecord(eng, cfg, true); err != nil {
				o.warnf("cannot record that up configured the daemon (%v): save and SaveConfig will refuse to write %s", err, cfg.Path)
			}
			return nil
		}},
	})
}

// stillRunning is Up's last step: the device must still answer and its
// link still exist. A daemon killed while Up ran takes its link (and the
// link's addresses and routes) with it, while the rules and firewall
// tables Up added after that stay; without this check Up would report a
// tunnel that is not there and leave those behind.
func stillRunning(nc *netcfg.Conf, eng Engine, name string) error {
	if _, err := eng.Device(name); err != nil {
		return fmt.Errorf("the daemon for %s stopped while the tunnel was being set up: %w", name, err)
	}
	if !nc.LinkExists(name) {
		return fmt.Errorf("the interface %s disappeared while the tunnel was being set up (its daemon died?)", name)
	}
	return nil
}

// setDNS hands the file's DNS servers and search domains to
// systemd-resolved or resolvconf (netcfg.SetDNS); a tunnel with a /0
// route sends every lookup to them. With neither there, Up fails as
// wg-quick does, so that lookups never silently go around the tunnel,
// unless the file says "# wirelane: DNSOptional = true".
func setDNS(nc *netcfg.Conf, cfg *wgquick.Config, o *Options) error {
	in := &cfg.Interface
	d := netcfg.DNS{Servers: in.DNS, Search: in.DNSSearch, Default: cfg.HasDefaultRoute()}
	_, err := nc.SetDNS(cfg.Name, d)
	if err == nil {
		return nil
	}
	if errors.Is(err, netcfg.ErrNoResolver) && in.DNSOptional {
		o.warnf("%v; going on without them (DNSOptional): lookups go to the host's resolvers", err)
		return nil
	}
	msg := "DNS: " + err.Error()
	if errors.Is(err, netcfg.ErrNoResolver) {
		msg += "; install resolvconf (or openresolv) or run systemd-resolved, or add \"# wirelane: DNSOptional = true\" to [Interface] to come up without them"
	}
	return lineError(cfg, in.DNSLine, msg)
}

// lineError is msg at line of cfg's file (FILE:LINE: msg), or without the
// line (or the file) when cfg was not read from one.
func lineError(cfg *wgquick.Config, line int, msg string) error {
	switch {
	case cfg.Path != "" && line > 0:
		return &wgquick.ParseError{File: cfg.Path, Line: line, Msg: msg}
	case cfg.Path != "":
		return fmt.Errorf("%s: %s", cfg.Path, msg)
	default:
		return errors.New(msg)
	}
}

// setLink adds the addresses, sets the MTU (the file's, else autoMTU's)
// and brings the link up.
func setLink(nc *netcfg.Conf, cfg *wgquick.Config, endpoints []netip.AddrPort) error {
	name := cfg.Name
	for _, a := range cfg.Interface.Addresses {
		if err := nc.AddAddress(name, a); err != nil {
			return err
		}
	}
	mtu := cfg.Interface.MTU
	if mtu == 0 {
		mtu = autoMTU(nc, endpoints)
	}
	if err := nc.SetMTU(name, mtu); err != nil {
		return err
	}
	return nc.SetUp(name)
}

// DeviceConfig returns the wg part of cfg (what `wg setconf` applies) and
// the peers' endpoints, resolved (names through ctx's resolver, for at most
// 15 s each). An endpoint that does not resolve is an error at its line.
func DeviceConfig(ctx context.Context, cfg *wgquick.Config) (wgtypes.Config, []netip.AddrPort, error) {
	in := cfg.Interface
	wcfg := wgtypes.Config{ReplacePeers: true}
	if in.PrivateKey != nil {
		k := wgtypes.Key(*in.PrivateKey)
		wcfg.PrivateKey = &k
	}
	if in.ListenPort != nil {
		p := int(*in.ListenPort)
		wcfg.ListenPort = &p
	}
	if in.FwMark != nil {
		m := int(*in.FwMark)
		wcfg.FirewallMark = &m
	}
	var eps []netip.AddrPort
	for _, p := range cfg.Peers {
		pc := wgtypes.PeerConfig{PublicKey: wgtypes.Key(p.PublicKey), ReplaceAllowedIPs: true}
		if p.PresharedKey != nil {
			k := wgtypes.Key(*p.PresharedKey)
			pc.PresharedKey = &k
		}
		if p.PersistentKeepalive != nil {
			d := time.Duration(*p.PersistentKeepalive) * time.Second
			pc.PersistentKeepaliveInterval = &d
		}
		for _, a := range p.AllowedIPs {
			pc.AllowedIPs = append(pc.AllowedIPs, net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())})
		}
		if p.Endpoint != "" {
			ap, err := resolveEndpoint(ctx, p.Endpoint)
			if err != nil {
				return wgtypes.Config{}, nil, &wgquick.ParseError{File: cfg.Path, Line: p.EndpointLine, Msg: "Endpoint: " + err.Error()}
			}
			eps = append(eps, ap)
			pc.Endpoint = net.UDPAddrFromAddrPort(ap)
		}
		wcfg.Peers = append(wcfg.Peers, pc)
	}
	return wcfg, eps, nil
}

// setConfig applies the wg part of the file (as `wg setconf` would) and
// returns the resolved endpoints.
func setConfig(ctx context.Context, eng Engine, cfg *wgquick.Config, o *Options) ([]netip.AddrPort, error) {
	wcfg, eps, err := DeviceConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	o.logf("wg setconf %s (%d peer(s))", cfg.Name, len(cfg.Peers))
	if err := eng.Configure(cfg.Name, wcfg); err != nil {
		return nil, fmt.Errorf("configure %s: %w", cfg.Name, explainUAPIError(err, cfg))
	}
	return eps, nil
}

// uapiErrnoRE finds the daemon's answer in a wgctrl error ("errno=-98").
var uapiErrnoRE = regexp.MustCompile(`errno=(-?\d+)`)

// explainUAPIError turns the daemon's negative errno, which wgctrl passes
// on as text, into words a user can act on.
func explainUAPIError(err error, cfg *wgquick.Config) error {
	m := uapiErrnoRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	n, perr := strconv.Atoi(m[1])
	if perr != nil {
		return err
	}
	if n < 0 {
		n = -n
	}
	errno := syscall.Errno(n)
	if errno == syscall.EADDRINUSE {
		if p := cfg.Interface.ListenPort; p != nil && *p != 0 {
			return fmt.Errorf("ListenPort %d is already in use (%w)", *p, errno)
		}
		return fmt.Errorf("cannot bind the UDP socket or set FwMark (%w)", errno)
	}
	return fmt.Errorf("the daemon refused the configuration: %w", errno)
}

// resolveEndpoint turns "host:port" into an address, resolving names.
func resolveEndpoint(ctx context.Context, s string) (netip.AddrPort, error) {
	host, port, err := wgquick.SplitEndpoint(s)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(a, port), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("cannot resolve %q: %v", host, err)
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), port), nil
}

// autoMTU picks wg-quick's MTU: the largest MTU of the routes to the
// endpoints, else of the default route, else 1500; minus 80 for the
// WireGuard, UDP and IPv6 headers.
func autoMTU(nc *netcfg.Conf, eps []netip.AddrPort) int {
	mtu := 0
	for _, ep := range eps {
		if m, ok := nc.RouteMTU(ep.Addr()); ok && m > mtu {
			mtu = m
		}
	}
	if mtu == 0 {
		if m, ok := nc.DefaultRouteMTU(); ok {
			mtu = m
		}
	}
	if mtu == 0 {
		mtu = 1500
	}
	return mtu - 80
}
