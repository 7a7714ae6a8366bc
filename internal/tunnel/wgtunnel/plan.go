package wgtunnel

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Plan is what Reload changes in a running tunnel to make it what `up` of
// the file would have made it: only the differences, each applied in
// place. Peers that stay keep their sessions, keypairs, counters and
// handshake state; only the fields listed for them change. An empty Plan
// (Empty) means the tunnel already matches its file and Reload makes no
// change at all.
type Plan struct {
	// Name is the interface.
	Name string
	// PrivateKey is set when the file's private key differs from the
	// running one: every session of every peer restarts (a new handshake).
	PrivateKey bool
	// ListenPort is the new port when it changed (the socket is rebound);
	// 0 = unchanged.
	ListenPort int
	// FwMark is the new firewall mark when it changed; nil = unchanged.
	FwMark *int
	// RemovePeers, AddPeers and UpdatePeers change the device's peers.
	RemovePeers []wgtypes.Key
	AddPeers    []wgtypes.PeerConfig
	UpdatePeers []PeerUpdate
	// AddAddresses and RemoveAddresses change the interface's addresses.
	AddAddresses, RemoveAddresses []netip.Prefix
	// MTU is the new MTU when it changed; 0 = unchanged.
	MTU int
	// AddRoutes and RemoveRoutes change the routes derived from the peers'
	// allowed IPs (AddRoutes longest prefix first, as up adds them).
	AddRoutes, RemoveRoutes []Route
	// AddDefault and RemoveDefault list the address families (unix.AF_INET,
	// unix.AF_INET6) whose default route through the tunnel starts or ends:
	// its policy rules and its nftables table.
	AddDefault, RemoveDefault []int
	// RefreshFirewall lists the families whose nftables table stays but is
	// rebuilt because the interface's addresses changed.
	RefreshFirewall []int
	// DNS is set when the link's DNS settings change.
	DNS *DNSChange
	// Notes are what the plan could not compare or will not change, for
	// the user (such as DNS settings that cannot be read back).
	Notes []string

	// run is the state the plan was computed from (what undo restores).
	run *running
	// newKey is the file's private key when PrivateKey is set.
	newKey wgtypes.Key
}

// PeerUpdate is the change to a peer that stays. Only the fields that
// changed are set in Config (UpdateOnly, never a replace of the peer).
type PeerUpdate struct {
	// Config is what is sent for the peer (update_only).
	Config wgtypes.PeerConfig
	// Changed names what changes ("allowed IPs", "endpoint", ...).
	Changed []string
}

// DNSChange is a change of the link's DNS settings.
type DNSChange struct {
	Old, New netcfg.DNS
}

// Route is one route through the tunnel's interface.
type Route struct {
	Prefix netip.Prefix
	// Table is the routing table; unix.RT_TABLE_MAIN for the main one.
	Table int
}

func (r Route) String() string {
	if r.Table == unix.RT_TABLE_MAIN {
		return r.Prefix.String()
	}
	return fmt.Sprintf("%s table %d", r.Prefix, r.Table)
}

// Empty reports whether the plan changes nothing.
func (p *Plan) Empty() bool { return len(p.Lines()) == 0 }

// Lines describes the plan, one change a line, in the order Reload
// applies them.
func (p *Plan) Lines() []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if p.PrivateKey {
		add("private key changes: every peer's session restarts (a new handshake with each)")
	}
	for _, k := range p.RemovePeers {
		add("remove peer %s", k)
	}
	for _, u := range p.UpdatePeers {
		add("peer %s: %s (its session stays)", u.Config.PublicKey, strings.Join(u.Changed, ", "))
	}
	for _, pc := range p.AddPeers {
		add("add peer %s (allowed IPs %s)", pc.PublicKey, ipNetsString(pc.AllowedIPs))
	}
	for _, a := range p.RemoveAddresses {
		add("remove address %s", a)
	}
	for _, a := range p.AddAddresses {
		add("add address %s", a)
	}
	if p.MTU != 0 {
		add("MTU %d -> %d", p.run.mtu, p.MTU)
	}
	if p.FwMark != nil {
		add("fwmark %d -> %d", p.run.dev.FirewallMark, *p.FwMark)
	}
	for _, f := range p.RemoveDefault {
		add("remove the default route's policy rules and firewall (%s)", famName(f))
	}
	for _, r := range p.RemoveRoutes {
		add("remove route %s", r)
	}
	for _, r := range p.AddRoutes {
		add("add route %s", r)
	}
	for _, f := range p.AddDefault {
		add("add the default route's policy rules and firewall (%s)", famName(f))
	}
	for _, f := range p.RefreshFirewall {
		add("rebuild the firewall (%s) for the interface's addresses", famName(f))
	}
	if p.DNS != nil {
		add("DNS %s -> %s", dnsString(p.DNS.Old), dnsString(p.DNS.New))
	}
	if p.ListenPort != 0 {
		add("listen port %d -> %d (the socket is rebound)", p.run.dev.ListenPort, p.ListenPort)
	}
	return out
}

func dnsString(d netcfg.DNS) string {
	if len(d.Servers) == 0 {
		return "(none)"
	}
	var s []string
	for _, a := range d.Servers {
		s = append(s, a.String())
	}
	s = append(s, d.Search...)
	if d.Default {
		s = append(s, "~.")
	}
	return strings.Join(s, ", ")
}

func famName(fam int) string {
	if fam == unix.AF_INET6 {
		return "IPv6"
	}
	return "IPv4"
}

// running is a tunnel as it runs: the device's configuration (UAPI get)
// and what netlink shows of its interface.
type running struct {
	dev   *wgtypes.Device
	addrs []netip.Prefix
	mtu   int
	// routes are the routes through the interface that a tool added
	// (protocol boot), in every table; kernel routes are left out.
	routes []Route
	// firewall lists the families that have the nftables table.
	firewall []int
}

// planInput is what the file asks for, resolved: the device part as
// DeviceConfig makes it, the table (0 = auto or off), the MTU up would
// set, and a source of a free table for a new default route's fwmark.
type planInput struct {
	cfg        *wgquick.Config
	wcfg       wgtypes.Config
	table      int
	mtu        int
	noFirewall bool
	freeTable  func() (int, error)
	// dns is the link's DNS now, held by resolver; dnsKnown is false
	// when it cannot be read back.
	dns      netcfg.DNS
	resolver netcfg.Resolver
	dnsKnown bool
}

// planReload computes the changes from run to what in asks for. It makes
// no system call (freeTable aside, which only reads).
func planReload(run *running, in planInput) (*Plan, error) {
	p := &Plan{Name: in.cfg.Name, run: run}
	dev := run.dev
	w := in.wcfg
	if w.PrivateKey != nil && *w.PrivateKey != dev.PrivateKey {
		p.PrivateKey, p.newKey = true, *w.PrivateKey
	}
	if w.ListenPort != nil && *w.ListenPort != 0 && *w.ListenPort != dev.ListenPort {
		p.ListenPort = *w.ListenPort
	}

	// Peers: removed, changed in place, added.
	old := map[wgtypes.Key]*wgtypes.Peer{}
	for i := range dev.Peers {
		old[dev.Peers[i].PublicKey] = &dev.Peers[i]
	}
	want := map[wgtypes.Key]bool{}
	for _, pc := range w.Peers {
		want[pc.PublicKey] = true
		op, ok := old[pc.PublicKey]
		if !ok {
			p.AddPeers = append(p.AddPeers, pc)
			continue
		}
		if u, ok := peerUpdate(op, pc); ok {
			p.UpdatePeers = append(p.UpdatePeers, u)
		}
	}
	for _, op := range dev.Peers {
		if !want[op.PublicKey] {
			p.RemovePeers = append(p.RemovePeers, op.PublicKey)
		}
	}

	// Addresses and MTU.
	wantAddrs := in.cfg.Interface.Addresses
	for _, a := range run.addrs {
		if !slices.Contains(wantAddrs, a) {
			p.RemoveAddresses = append(p.RemoveAddresses, a)
		}
	}
	for _, a := range wantAddrs {
		if !slices.Contains(run.addrs, a) && !slices.Contains(p.AddAddresses, a) {
			p.AddAddresses = append(p.AddAddresses, a)
		}
	}
	if in.mtu != 0 && in.mtu != run.mtu {
		p.MTU = in.mtu
	}

	// The fwmark: the file's; else, for a default route, the running one
	// or the first free table (as up picks it); else 0 once a default
	// route that needed one goes.
	var wantPfx []netip.Prefix
	for _, pc := range w.Peers {
		wantPfx = append(wantPfx, ipNetPrefixes(pc.AllowedIPs)...)
	}
	auto := in.cfg.Interface.Table == "" || in.cfg.Interface.Table == "auto"
	routed := in.cfg.Interface.Table != "off"
	wantDefault := familiesWithDefault(wantPfx, auto && routed)
	oldDefault := run.defaultFamilies()
	mark := dev.FirewallMark
	if w.FirewallMark != nil {
		mark = *w.FirewallMark
	}
	switch {
	case len(wantDefault) > 0 && mark == 0 && dev.FirewallMark != 0:
		mark = dev.FirewallMark // the running one (up picks a free table)
	case len(wantDefault) > 0 && mark == 0:
		t, err := in.freeTable()
		if err != nil {
			return nil, err
		}
		mark = t
	case w.FirewallMark == nil && len(wantDefault) == 0 && len(oldDefault) > 0:
		mark = 0 // picked for the default route that goes
	}
	if mark != dev.FirewallMark {
		m := mark
		p.FwMark = &m
	}

	// Routes, as addRoutes makes them.
	var wantRoutes []Route
	if routed {
		sorted := slices.Clone(wantPfx)
		sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Bits() > sorted[j].Bits() })
		oldPfx := allowedPrefixes(dev)
		var onLink []netip.Prefix // what the kernel and others route through the link
		for _, a := range wantAddrs {
			onLink = append(onLink, a.Masked())
		}
		for _, r := range run.routes {
			if r.Table == unix.RT_TABLE_MAIN && !slices.Contains(oldPfx, r.Prefix) {
				onLink = append(onLink, r.Prefix)
			}
		}
		for _, pf := range sorted {
			var r Route
			switch {
			case in.table != 0:
				r = Route{pf, in.table}
			case pf.Bits() == 0:
				r = Route{pf, mark}
			default:
				if covered(onLink, pf) {
					continue
				}
				r = Route{pf, unix.RT_TABLE_MAIN}
			}
			if !slices.Contains(wantRoutes, r) {
				wantRoutes = append(wantRoutes, r)
			}
		}
		for _, r := range run.routes {
			if slices.Contains(oldPfx, r.Prefix) && !slices.Contains(wantRoutes, r) {
				p.RemoveRoutes = append(p.RemoveRoutes, r)
			}
		}
	} else {
		oldPfx := allowedPrefixes(dev)
		for _, r := range run.routes {
			if slices.Contains(oldPfx, r.Prefix) {
				p.RemoveRoutes = append(p.RemoveRoutes, r)
			}
		}
	}
	for _, r := range wantRoutes {
		if !slices.Contains(run.routes, r) {
			p.AddRoutes = append(p.AddRoutes, r)
		}
	}

	// Policy rules and firewall of a default route.
	for _, f := range oldDefault {
		if !slices.Contains(wantDefault, f) || p.FwMark != nil {
			p.RemoveDefault = append(p.RemoveDefault, f)
		}
	}
	addrsChanged := len(p.AddAddresses)+len(p.RemoveAddresses) > 0
	for _, f := range wantDefault {
		switch {
		case !slices.Contains(oldDefault, f) || p.FwMark != nil:
			p.AddDefault = append(p.AddDefault, f)
		case addrsChanged && slices.Contains(run.firewall, f):
			p.RefreshFirewall = append(p.RefreshFirewall, f)
		case !in.noFirewall && !slices.Contains(run.firewall, f):
			// A default route that runs without its firewall (brought up
			// with WIRELANE_FIREWALL=off) gets it when asked for.
			p.RefreshFirewall = append(p.RefreshFirewall, f)
		}
	}
	if in.noFirewall {
		p.RefreshFirewall = nil
	}

	// DNS, as setDNS gives it.
	wantDNS := netcfg.DNS{Servers: in.cfg.Interface.DNS, Search: in.cfg.Interface.DNSSearch, Default: in.cfg.HasDefaultRoute()}
	if len(wantDNS.Servers) == 0 {
		wantDNS = netcfg.DNS{}
	}
	switch {
	case !in.dnsKnown:
		if len(wantDNS.Servers) > 0 {
			p.Notes = append(p.Notes, "DNS: the link's settings cannot be read back here, so they are left as they are")
		}
	case !sameDNS(in.dns, wantDNS, in.resolver == netcfg.Resolved):
		p.DNS = &DNSChange{Old: in.dns, New: wantDNS}
	}
	return p, nil
}

// sameDNS reports whether a and b are the same settings; Default counts
// only where the resolver keeps it (systemd-resolved).
func sameDNS(a, b netcfg.DNS, withDefault bool) bool {
	if len(a.Servers) == 0 && len(b.Servers) == 0 {
		return true
	}
	trim := func(s []string) []string {
		out := make([]string, len(s))
		for i, x := range s {
			out[i] = strings.TrimSuffix(x, ".")
		}
		return out
	}
	return slices.Equal(a.Servers, b.Servers) && slices.Equal(trim(a.Search), trim(b.Search)) && (!withDefault || a.Default == b.Default)
}

// peerUpdate returns the update_only change that makes the running peer op
// what pc asks for, and whether there is any.
func peerUpdate(op *wgtypes.Peer, pc wgtypes.PeerConfig) (PeerUpdate, bool) {
	u := PeerUpdate{Config: wgtypes.PeerConfig{PublicKey: pc.PublicKey, UpdateOnly: true}}
	wantPSK := wgtypes.Key{}
	if pc.PresharedKey != nil {
		wantPSK = *pc.PresharedKey
	}
	if wantPSK != op.PresharedKey {
		k := wantPSK
		u.Config.PresharedKey = &k
		u.Changed = append(u.Changed, "preshared key")
	}
	if pc.Endpoint != nil {
		want := pc.Endpoint.AddrPort()
		var cur netip.AddrPort
		if op.Endpoint != nil {
			cur = op.Endpoint.AddrPort()
		}
		if netip.AddrPortFrom(want.Addr().Unmap(), want.Port()) != netip.AddrPortFrom(cur.Addr().Unmap(), cur.Port()) {
			u.Config.Endpoint = pc.Endpoint
			u.Changed = append(u.Changed, "endpoint "+want.String())
		}
	}
	var wantKA time.Duration
	if pc.PersistentKeepaliveInterval != nil {
		wantKA = *pc.PersistentKeepaliveInterval
	}
	if wantKA != op.PersistentKeepaliveInterval {
		d := wantKA
		u.Config.PersistentKeepaliveInterval = &d
		u.Changed = append(u.Changed, fmt.Sprintf("persistent keepalive %d s", wantKA/time.Second))
	}
	if !samePrefixes(ipNetPrefixes(op.AllowedIPs), ipNetPrefixes(pc.AllowedIPs)) {
		u.Config.ReplaceAllowedIPs = true
		u.Config.AllowedIPs = pc.AllowedIPs
		u.Changed = append(u.Changed, "allowed IPs "+ipNetsString(op.AllowedIPs)+" -> "+ipNetsString(pc.AllowedIPs))
	}
	return u, len(u.Changed) > 0
}

// defaultFamilies lists the families whose default route runs through the
// tunnel with policy routing: a /0 route in the table of the fwmark.
func (r *running) defaultFamilies() []int {
	var out []int
	if r.dev.FirewallMark == 0 {
		return nil
	}
	for _, rt := range r.routes {
		if rt.Prefix.Bits() == 0 && rt.Table == r.dev.FirewallMark {
			out = append(out, prefixFamily(rt.Prefix))
		}
	}
	sort.Ints(out)
	return slices.Compact(out)
}

// familiesWithDefault lists the families of the /0 prefixes in pfxs when
// policy routing applies (Table auto).
func familiesWithDefault(pfxs []netip.Prefix, auto bool) []int {
	if !auto {
		return nil
	}
	var out []int
	for _, p := range pfxs {
		if p.Bits() == 0 {
			out = append(out, prefixFamily(p))
		}
	}
	sort.Ints(out)
	return slices.Compact(out)
}

func prefixFamily(p netip.Prefix) int {
	if p.Addr().Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// covered reports whether one of routes is as wide as p or wider and
// holds it (what RouteCovered checks against the kernel).
func covered(routes []netip.Prefix, p netip.Prefix) bool {
	for _, r := range routes {
		if r.Addr().Is4() == p.Addr().Is4() && r.Bits() <= p.Bits() && r.Contains(p.Addr()) {
			return true
		}
	}
	return false
}

// ipNetPrefixes converts wgtypes' allowed IPs to prefixes.
func ipNetPrefixes(ns []net.IPNet) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ns))
	for _, n := range ns {
		a, _ := netip.AddrFromSlice(n.IP)
		if n.IP.To4() != nil {
			a = a.Unmap()
		}
		ones, _ := n.Mask.Size()
		out = append(out, netip.PrefixFrom(a, ones).Masked())
	}
	return out
}

func samePrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	for _, p := range a {
		if !slices.Contains(b, p) {
			return false
		}
	}
	return true
}

func ipNetsString(ns []net.IPNet) string {
	if len(ns) == 0 {
		return "(none)"
	}
	var s []string
	for _, p := range ipNetPrefixes(ns) {
		s = append(s, p.String())
	}
	return strings.Join(s, ", ")
}
