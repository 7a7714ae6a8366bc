package main

// wg-quick's commands. `up` runs these steps, pushing the inverse of each
// change on an undo stack; any failure (or Ctrl-C) rolls the stack back, so
// a failed `up` leaves no interface, route, rule or DNS entry behind:
//
//	parse file -> check the interface is free -> PreUp hooks
//	-> start daemon (wirelane daemon IFNAME), wait for its UAPI socket   [undo: delete link]
//	-> configure keys, port, fwmark, peers over UAPI (endpoints resolved)
//	-> addresses -> MTU (given, or route MTU to the endpoints - 80) -> link up
//	-> DNS through resolvconf                                            [undo: resolvconf -d]
//	-> routes for every peer's AllowedIPs, longest prefix first;
//	   a /0 gets fwmark + table + "not fwmark" and suppress rules        [undo: delete rules]
//	   and the nftables table wg-quick-IFNAME of its family
//	   (anti-spoofing drop + fwmark save/restore)                       [undo: delete table]
//	-> PostUp hooks -> done (undo stack discarded)
//
// `down` runs PreDown, saves (SaveConfig), deletes the rules, the nftables
// tables and the link (the daemon exits when its TUN goes), removes DNS and
// runs PostDown.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

const quickFileHelp = `CONFIG_FILE is a wg-quick file; an argument that is a valid interface name
(1-15 of [a-zA-Z0-9_=+.-]) means /etc/wireguard/INTERFACE.conf, and a path
names the interface after its base name (wg0.conf -> wg0).`

const upHelp = `Creates the interface: starts the userspace daemon, applies the keys and
peers, then Address, MTU, DNS, Table, routes for AllowedIPs (policy routing
and an nftables anti-spoofing firewall for a default route) and the
PreUp/PostUp hooks (%i = interface name).
If any step fails, or on Ctrl-C, everything done so far is undone.

` + quickFileHelp + `

Environment: WIRELANE_DAEMON=PATH runs "PATH IFNAME" instead of the
built-in daemon (any userspace implementation with the wireguard-go
command line, such as wirelaned). WIRELANE_FIREWALL=off brings a default
route up without the nftables firewall (for kernels without nftables;
hosts on your other networks can then reach the tunnel's addresses).`

const downHelp = `Runs PreDown, writes the configuration back if SaveConfig is true, removes
the interface, its policy rules, nftables tables and DNS, then runs
PostDown. If the daemon is no longer running (it crashed or was killed),
removes what it left behind (interface, stale socket, policy rules,
nftables tables, DNS) without hooks.

` + quickFileHelp

const stripHelp = `Prints the file without the keys only wg-quick understands (Address, DNS,
MTU, Table, hooks, SaveConfig), in a form 'wg setconf' accepts.

` + quickFileHelp

const saveHelp = `Writes the running interface's configuration (keys, peers, endpoints,
addresses) back to its file, keeping the file's DNS, Table and hooks.

` + quickFileHelp

// socketDir is where userspace daemons put their UAPI sockets.
const socketDir = "/var/run/wireguard"

// logCmd prints a "[#] ..." line, as wg-quick does for every change.
func logCmd(s string) { fmt.Fprintf(os.Stderr, "[#] %s\n", s) }

func loadConfig(name string, args []string) (*wgquick.Config, int) {
	rest, st := parseFlags(flag.NewFlagSet(name, flag.ContinueOnError), name, args, 1, 1)
	if st >= 0 {
		return nil, st
	}
	if name != "strip" && os.Geteuid() != 0 {
		return nil, fail(fmt.Errorf("%s needs root: it changes interfaces, routes and rules (try: sudo %s %s %s)", name, prog, name, rest[0]))
	}
	cfg, err := wgquick.LoadFile(rest[0])
	if err != nil {
		return nil, fail(err)
	}
	if wgquick.WorldAccessible(cfg.Path) {
		fmt.Fprintf(os.Stderr, "Warning: `%s' is world accessible\n", cfg.Path)
	}
	return cfg, -1
}

func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
}

func cmdUp(args []string) int {
	cfg, st := loadConfig("up", args)
	if st >= 0 {
		return st
	}
	ctx, stop := signalContext()
	defer stop()
	if err := up(ctx, cfg); err != nil {
		return failCtx(ctx, "up", err)
	}
	return 0
}

func cmdDown(args []string) int {
	cfg, st := loadConfig("down", args)
	if st >= 0 {
		return st
	}
	if err := down(cfg); err != nil {
		return fail(err)
	}
	return 0
}

func cmdStrip(args []string) int {
	cfg, st := loadConfig("strip", args)
	if st >= 0 {
		return st
	}
	os.Stdout.Write(cfg.Strip())
	return 0
}

func cmdSave(args []string) int {
	cfg, st := loadConfig("save", args)
	if st >= 0 {
		return st
	}
	if err := save(cfg); err != nil {
		return fail(err)
	}
	return 0
}

func up(ctx context.Context, cfg *wgquick.Config) (err error) {
	name := cfg.Name
	nc, err := netcfg.New()
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.Log = logCmd
	if nc.LinkExists(name) {
		return fmt.Errorf("`%s' already exists", name)
	}
	// Sockets live in one directory for all network namespaces: a daemon
	// answering on ours serves an interface of that name elsewhere.
	if c, err := net.DialTimeout("unix", filepath.Join(socketDir, name+".sock"), time.Second); err == nil {
		c.Close()
		return fmt.Errorf("`%s' is in use by a running daemon (%s/%s.sock answers), probably in another network namespace; interface names must be unique across namespaces", name, socketDir, name)
	}
	// Check what can be checked before anything changes.
	firewall, err := firewallWanted()
	if err != nil {
		return err
	}
	var table int
	if t := cfg.Interface.Table; t != "" && t != "auto" && t != "off" {
		if table, err = netcfg.ResolveTable(t); err != nil {
			return err
		}
	}
	daemonStarted := false
	defer func() {
		if err != nil {
			if n := nc.Undo.Len(); n > 0 {
				fmt.Fprintf(os.Stderr, "%s: up failed; undoing %d change(s)\n", prog, n)
			}
			if rerr := nc.Undo.Rollback(); rerr != nil {
				err = errors.Join(err, rerr)
			}
			if daemonStarted {
				waitSocketGone(name, 2*time.Second)
			}
		}
	}()
	step := func() error { return ctx.Err() }

	if err := runHooks(ctx, cfg.Interface.PreUp, name); err != nil {
		return err
	}
	if err := step(); err != nil {
		return err
	}
	nc.PushDeleteLink(name)
	if err := startDaemon(ctx, name); err != nil {
		return err
	}
	// Only now is the socket ours to wait for (and, if our daemon hangs,
	// to remove) during a roll-back.
	daemonStarted = true
	wc, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer wc.Close()
	endpoints, err := setConfig(ctx, wc, cfg)
	if err != nil {
		return err
	}
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
	if err := nc.SetUp(name); err != nil {
		return err
	}
	if err := nc.SetDNS(name, cfg.Interface.DNS, cfg.Interface.DNSSearch); err != nil {
		if !errors.Is(err, netcfg.ErrNoResolvconf) {
			return err
		}
		fmt.Fprintf(os.Stderr, "Warning: %v\n", err)
	}
	if err := step(); err != nil {
		return err
	}
	if err := addRoutes(nc, wc, cfg, table, firewall); err != nil {
		return err
	}
	if err := runHooks(ctx, cfg.Interface.PostUp, name); err != nil {
		return err
	}
	if err := step(); err != nil {
		return err
	}
	nc.Undo.Discard()
	return nil
}

// startDaemon runs the daemon for name and waits until its UAPI socket
// answers. The daemon detaches itself once its TUN and socket are ready.
func startDaemon(ctx context.Context, name string) error { return startDaemonLog(ctx, name, logCmd) }

// startDaemonQuiet is startDaemon without the "[#]" line (for the demo).
func startDaemonQuiet(ctx context.Context, name string) error {
	return startDaemonLog(ctx, name, func(string) {})
}

func startDaemonLog(ctx context.Context, name string, log func(string)) error {
	var cmd *exec.Cmd
	if impl := os.Getenv("WIRELANE_DAEMON"); impl != "" {
		log(impl + " " + name)
		cmd = exec.CommandContext(ctx, impl, name)
	} else {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		log(prog + " daemon " + name)
		cmd = exec.CommandContext(ctx, exe, "daemon", name)
	}
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	// On Ctrl-C, interrupt rather than kill the starting daemon, so that it
	// can stop the detached copy it may already have started.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the daemon for %s failed to start: %w", name, err)
	}
	return waitUAPI(ctx, name, 5*time.Second)
}

// waitUAPI polls until a get on the interface's UAPI socket succeeds.
func waitUAPI(ctx context.Context, name string, d time.Duration) error {
	wc, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer wc.Close()
	deadline := time.Now().Add(d)
	for {
		_, err := wc.Device(name)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon's socket %s/%s.sock did not answer within %v: %w", socketDir, name, d, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// setConfig applies the wg part of the file (as `wg setconf` would) and
// returns the resolved endpoints.
func setConfig(ctx context.Context, wc *wgctrl.Client, cfg *wgquick.Config) ([]netip.AddrPort, error) {
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
				return nil, &wgquick.ParseError{File: cfg.Path, Line: p.EndpointLine, Msg: "Endpoint: " + err.Error()}
			}
			eps = append(eps, ap)
			pc.Endpoint = net.UDPAddrFromAddrPort(ap)
		}
		wcfg.Peers = append(wcfg.Peers, pc)
	}
	logCmd(fmt.Sprintf("wg setconf %s (%d peer(s))", cfg.Name, len(cfg.Peers)))
	if err := wc.ConfigureDevice(cfg.Name, wcfg); err != nil {
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

// addRoutes adds a route for every allowed IP the device reports, longest
// prefix first, as wg-quick does. A /0 (Table auto) also gets policy rules
// and, when firewall is set, wg-quick's nftables table for its family.
func addRoutes(nc *netcfg.Conf, wc *wgctrl.Client, cfg *wgquick.Config, table int, firewall bool) error {
	tableMode := cfg.Interface.Table
	if tableMode == "off" {
		return nil
	}
	dev, err := wc.Device(cfg.Name)
	if err != nil {
		return err
	}
	var pfxs []netip.Prefix
	for _, p := range dev.Peers {
		for _, n := range p.AllowedIPs {
			a, _ := netip.AddrFromSlice(n.IP)
			if n.IP.To4() != nil {
				a = a.Unmap()
			}
			ones, _ := n.Mask.Size()
			pfxs = append(pfxs, netip.PrefixFrom(a, ones))
		}
	}
	sort.SliceStable(pfxs, func(i, j int) bool { return pfxs[i].Bits() > pfxs[j].Bits() })
	fwmark := dev.FirewallMark
	for _, p := range pfxs {
		switch {
		case table != 0:
			if err := nc.AddRoute(cfg.Name, p, table); err != nil {
				return err
			}
		case p.Bits() == 0:
			if fwmark == 0 {
				t, err := nc.FreeTable(51820)
				if err != nil {
					return err
				}
				logCmd(fmt.Sprintf("wg set %s fwmark %d", cfg.Name, t))
				if err := wc.ConfigureDevice(cfg.Name, wgtypes.Config{FirewallMark: &t}); err != nil {
					return fmt.Errorf("set fwmark: %w", err)
				}
				fwmark = t
			}
			fam := unix.AF_INET
			if p.Addr().Is6() {
				fam = unix.AF_INET6
			}
			if err := nc.AddDefaultRouteRules(fam, fwmark); err != nil {
				return err
			}
			if err := nc.AddRoute(cfg.Name, p, fwmark); err != nil {
				return err
			}
			if fam == unix.AF_INET {
				if err := nc.Sysctl("net.ipv4.conf.all.src_valid_mark", "1"); err != nil {
					return err
				}
			}
			if err := addFirewall(nc, cfg.Name, fam, fwmark, firewall); err != nil {
				return err
			}
		default:
			covered, err := nc.RouteCovered(cfg.Name, p)
			if err != nil {
				return err
			}
			if !covered {
				if err := nc.AddRoute(cfg.Name, p, 0); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// firewallEnv names the variable that turns the nftables firewall of a
// default route off: "off" skips it, "" or "on" keep it.
const firewallEnv = "WIRELANE_FIREWALL"

// firewallWanted reads WIRELANE_FIREWALL; any other value is an error, so
// that a misspelt value never silently means "on" or "off".
func firewallWanted() (bool, error) {
	switch v := os.Getenv(firewallEnv); v {
	case "", "on":
		return true, nil
	case "off":
		return false, nil
	default:
		return false, fmt.Errorf("%s=%q: use \"on\" or \"off\"", firewallEnv, v)
	}
}

// addFirewall installs wg-quick's anti-spoofing and fwmark table for a
// default route in family fam. Without nftables in the kernel it fails
// (and `up` is undone) rather than bring up a full tunnel whose addresses
// other hosts on the LAN can reach: the user asked for a tunnel, and may
// only skip the protection knowingly, with WIRELANE_FIREWALL=off.
func addFirewall(nc *netcfg.Conf, name string, fam, fwmark int, enabled bool) error {
	if !enabled {
		v := "IPv4"
		if fam == unix.AF_INET6 {
			v = "IPv6"
		}
		fmt.Fprintf(os.Stderr, "Warning: %s=off: no nftables firewall for %s (%s); hosts on your other networks can send packets to its addresses\n", firewallEnv, name, v)
		return nil
	}
	err := nc.Firewall().AddAntiSpoofing(fam, name, uint32(fwmark))
	if errors.Is(err, netcfg.ErrNoNftables) {
		return fmt.Errorf("%w. Without it, hosts on your other networks could reach %s's addresses. Load the modules (modprobe nf_tables nft_fib_ipv4 nft_fib_ipv6 nft_ct) or, accepting that risk, set %s=off", err, name, firewallEnv)
	}
	return err
}

// runHooks runs hook commands through bash (sh if bash is missing) with %i
// replaced by the interface name; the first failure stops.
func runHooks(ctx context.Context, hooks []string, ifname string) error {
	shell := "/bin/bash"
	if _, err := os.Stat(shell); err != nil {
		shell = "/bin/sh"
	}
	for _, h := range hooks {
		h = strings.ReplaceAll(h, "%i", ifname)
		logCmd(h)
		cmd := exec.CommandContext(ctx, shell, "-c", h)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("hook %q failed: %w", h, err)
		}
	}
	return nil
}

func down(cfg *wgquick.Config) error {
	name := cfg.Name
	wc, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer wc.Close()
	dev, err := wc.Device(name)
	if err != nil {
		return downOrphan(cfg)
	}
	nc, err := netcfg.New()
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.Log = logCmd
	nc.Undo = nil
	if !nc.LinkExists(name) {
		// The socket answered, but sockets are shared by all network
		// namespaces: the interface lives in another one. Touch nothing
		// (removing the socket would stop that tunnel).
		return fmt.Errorf("`%s' is not an interface in this network namespace (a daemon for it answers, so it probably lives in another one)", name)
	}
	ctx := context.Background()
	if err := runHooks(ctx, cfg.Interface.PreDown, name); err != nil {
		return err
	}
	if cfg.Interface.SaveConfig {
		if err := saveDevice(cfg, dev, nc); err != nil {
			return err
		}
	}
	var errs []error
	if t := cfg.Interface.Table; (t == "" || t == "auto") && dev.FirewallMark != 0 && hasDefault(dev) {
		for _, fam := range netcfg.Families {
			if _, err := nc.DeleteDefaultRouteRules(fam, dev.FirewallMark); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if _, err := nc.Firewall().DeleteFirewall(name); err != nil {
		errs = append(errs, err)
	}
	if err := nc.DeleteLink(name); err != nil {
		errs = append(errs, err)
	}
	if len(cfg.Interface.DNS) > 0 {
		if err := nc.UnsetDNS(name); err != nil {
			errs = append(errs, err)
		}
	}
	waitSocketGone(name, 2*time.Second)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return runHooks(ctx, cfg.Interface.PostDown, name)
}

// downOrphan cleans up after a tunnel whose daemon is gone (it crashed or
// was killed): the interface if it is still there, the stale socket, the
// policy rules of a default route (only those no live tunnel needs) and
// the DNS record. Hooks are not run: the tunnel they belong to is already
// down. With nothing left to remove it fails as wg-quick does.
func downOrphan(cfg *wgquick.Config) error {
	name := cfg.Name
	nc, err := netcfg.New()
	if err != nil {
		return err
	}
	defer nc.Close()
	nc.Log = logCmd
	nc.Undo = nil
	removed := 0
	var errs []error
	if nc.LinkExists(name) {
		if err := nc.DeleteLink(name); err != nil {
			errs = append(errs, err)
		} else {
			removed++
		}
	}
	sock := filepath.Join(socketDir, name+".sock")
	if _, err := os.Lstat(sock); err == nil {
		if msg := removeStaleSocket(name); strings.HasPrefix(msg, "removed") {
			logCmd("rm " + sock + " (stale: its daemon is not running)")
			removed++
		} else {
			errs = append(errs, errors.New(msg))
		}
	}
	if t := cfg.Interface.Table; (t == "" || t == "auto") && cfg.HasDefaultRoute() {
		mark := 51820
		if m := cfg.Interface.FwMark; m != nil && *m != 0 {
			mark = int(*m)
		}
		for _, fam := range netcfg.Families {
			n, err := nc.DeleteOrphanedDefaultRouteRules(fam, mark)
			removed += n
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	n, err := nc.Firewall().DeleteFirewall(name)
	removed += n
	if err != nil {
		errs = append(errs, err)
	}
	if removed > 0 && len(cfg.Interface.DNS)+len(cfg.Interface.DNSSearch) > 0 {
		if err := nc.UnsetDNS(name); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if removed == 0 {
		return fmt.Errorf("`%s' is not a WireGuard interface", name)
	}
	fmt.Fprintf(os.Stderr, "Warning: the daemon for %s was not running; removed what it left behind (PreDown/PostDown not run)\n", name)
	return nil
}

func hasDefault(dev *wgtypes.Device) bool {
	for _, p := range dev.Peers {
		for _, n := range p.AllowedIPs {
			if ones, _ := n.Mask.Size(); ones == 0 {
				return true
			}
		}
	}
	return false
}

// waitSocketGone waits for the daemon to remove its socket as it exits,
// so that `up` right after `down` finds the name free. A daemon that has
// not noticed its interface going away within d is told to stop the other
// way the protocol offers: its socket file is removed.
func waitSocketGone(name string, d time.Duration) {
	p := filepath.Join(socketDir, name+".sock")
	gone := func() bool {
		for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(p); err != nil {
				return true
			}
		}
		return false
	}
	if gone() {
		return
	}
	logCmd("rm " + p + " (the daemon did not exit when its interface was deleted)")
	os.Remove(p)
	gone()
}

func save(cfg *wgquick.Config) error {
	wc, err := wgctrl.New()
	if err != nil {
		return err
	}
	defer wc.Close()
	dev, err := wc.Device(cfg.Name)
	if err != nil {
		return fmt.Errorf("`%s' is not a WireGuard interface", cfg.Name)
	}
	nc, err := netcfg.New()
	if err != nil {
		return err
	}
	defer nc.Close()
	return saveDevice(cfg, dev, nc)
}

// saveDevice writes the running configuration to cfg.Path (atomically,
// mode 0600), keeping the file's wg-quick-only settings.
func saveDevice(cfg *wgquick.Config, dev *wgtypes.Device, nc *netcfg.Conf) error {
	out := &wgquick.Config{Name: cfg.Name}
	in := &out.Interface
	if dev.PrivateKey != (wgtypes.Key{}) {
		k := wgquick.Key(dev.PrivateKey)
		in.PrivateKey = &k
	}
	if dev.ListenPort != 0 {
		p := uint16(dev.ListenPort)
		in.ListenPort = &p
	}
	if dev.FirewallMark != 0 {
		m := uint32(dev.FirewallMark)
		in.FwMark = &m
	}
	addrs, err := nc.Addresses(cfg.Name)
	if err != nil {
		return err
	}
	in.Addresses = addrs
	in.DNS, in.DNSSearch = cfg.Interface.DNS, cfg.Interface.DNSSearch
	if cfg.Interface.MTU != 0 {
		if l, err := nc.Link(cfg.Name); err == nil {
			in.MTU = l.Attrs().MTU
		}
	}
	in.Table, in.SaveConfig = cfg.Interface.Table, cfg.Interface.SaveConfig
	in.PreUp, in.PostUp, in.PreDown, in.PostDown = cfg.Interface.PreUp, cfg.Interface.PostUp, cfg.Interface.PreDown, cfg.Interface.PostDown
	for _, p := range dev.Peers {
		q := wgquick.Peer{PublicKey: wgquick.Key(p.PublicKey)}
		if p.PresharedKey != (wgtypes.Key{}) {
			k := wgquick.Key(p.PresharedKey)
			q.PresharedKey = &k
		}
		for _, n := range p.AllowedIPs {
			a, _ := netip.AddrFromSlice(n.IP)
			if n.IP.To4() != nil {
				a = a.Unmap()
			}
			ones, _ := n.Mask.Size()
			q.AllowedIPs = append(q.AllowedIPs, netip.PrefixFrom(a, ones))
		}
		if p.Endpoint != nil {
			q.Endpoint = p.Endpoint.AddrPort().String()
			if ap := p.Endpoint.AddrPort(); ap.Addr().Is4In6() {
				q.Endpoint = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String()
			}
		}
		if p.PersistentKeepaliveInterval > 0 {
			s := uint16(p.PersistentKeepaliveInterval / time.Second)
			q.PersistentKeepalive = &s
		}
		out.Peers = append(out.Peers, q)
	}
	logCmd("wg showconf " + cfg.Name + " > " + cfg.Path)
	// A new file with a random name (O_EXCL, mode 0600): a fixed name
	// could be a symbolic link someone planted next to a file in a
	// shared directory, and root would write through it.
	f, err := os.CreateTemp(filepath.Dir(cfg.Path), "."+filepath.Base(cfg.Path)+".tmp*")
	if err != nil {
		return fmt.Errorf("could not write configuration file: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(out.Marshal())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, cfg.Path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("could not write configuration file: %w", err)
	}
	return nil
}
