package server

// client-config-dir: per-client entries (ovpn/config's ClientConfig) read
// with the server's file, checked against its pools, and applied when a
// client is set up and at a reload.
//
//	parse: client-config-dir DIR -> every file of DIR (not dot files)
//	       -> config.ParseClientConfig (FILE:LINE) -> checkCCD: fixed
//	       addresses inside the pools, unique, not in DEFAULT
//	setup (negotiate.go): common name -> its file, else DEFAULT
//	       -> disable / ccd-exclusive? AUTH_FAILED
//	       -> ifconfig-push / ifconfig-ipv6-push, else the pools (which
//	          never hand out another client's fixed address)
//	       -> iroutes into the server's internal routing table
//	push (push.go): the file's push, push-reset, push-remove; pushed
//	       routes that are the client's own iroutes are left out
//	packets (route.go): destination: a client's tunnel address, else the
//	       longest iroute; source: the client's addresses or its iroutes
//	reload (reload.go): iroutes change at once; disable, ccd-exclusive
//	       and an address change disconnect the client (AUTH_FAILED,
//	       RESTART); push changes wait for its next connection

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wirelane/wirelane/ovpn/config"
)

// ccdDefault is the file used for clients without a file of their own.
const ccdDefault = "DEFAULT"

// ccdDirective handles client-config-dir and ccd-exclusive, and refuses
// the client-config directives in the server's own file.
func (e *serverExt) ccdDirective(p *config.Parser, args []string) error {
	c := e.cfg
	switch name := args[0]; name {
	case "client-config-dir":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		dir := args[1]
		if !filepath.IsAbs(dir) {
			if p.Dir == "" {
				return p.Errorf(name, "file references are not allowed here (%q)", dir)
			}
			dir = filepath.Join(p.Dir, dir)
		}
		c.ClientConfigDir = dir
	case "ccd-exclusive":
		if err := p.Want(args, 0, 0); err != nil {
			return err
		}
		c.CCDExclusive = true
	default:
		return p.Errorf(name, "only allowed in a client-config-dir file (a client's own settings)")
	}
	return nil
}

// ccdMainDirectives are the client-config directives the server's own
// file refuses (ccdDirective).
var ccdMainDirectives = []string{"ifconfig-push", "ifconfig-ipv6-push", "iroute", "iroute-ipv6", "push-remove", "disable"}

// finishCCD reads the client-config-dir files (after the walk, so that
// the pools are known) and checks them.
func (e *serverExt) finishCCD(p *config.Parser) error {
	c := e.cfg
	if c.CCDExclusive && c.ClientConfigDir == "" {
		return p.Errorf("ccd-exclusive", "needs client-config-dir")
	}
	if c.ClientConfigDir == "" {
		return nil
	}
	serverOnly := e.Directives()
	for n := range serverUnsupported {
		serverOnly = append(serverOnly, n)
	}
	for n := range serverIgnored {
		serverOnly = append(serverOnly, n)
	}
	ents, err := ReadClientConfigDir(c.ClientConfigDir, serverOnly)
	if err != nil {
		if _, ok := err.(*config.Error); ok {
			return err
		}
		return p.Errorf("client-config-dir", "%v", err)
	}
	c.ClientConfigs = ents
	for _, name := range slices.Sorted(maps.Keys(ents)) {
		for _, w := range ents[name].Warnings {
			p.Warn("client-config-dir", fmt.Sprintf("%s:%d: %s: %s", ents[name].File, w.Line, w.Directive, w.Message))
		}
	}
	return checkCCD(c)
}

// ReadClientConfigDir parses every file of dir (dot files and
// directories skipped) as a client-config-dir file named after it.
// serverOnly lists the server file's directives, refused in them.
func ReadClientConfigDir(dir string, serverOnly []string) (map[string]*config.ClientConfig, error) {
	list, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]*config.ClientConfig{}
	for _, de := range list {
		name := de.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		fi, err := os.Stat(path) // symbolic links followed
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		ent, err := config.ParseClientConfig(b, name, path, serverOnly)
		if err != nil {
			return nil, err
		}
		out[name] = ent
	}
	return out, nil
}

// checkCCD checks the fixed addresses of c's client-config entries
// against its pools: inside them, not the server's, with the pool's
// prefix length, each for one client only; not in DEFAULT (shared by
// every client without a file).
func checkCCD(c *Config) error {
	if len(c.ClientConfigs) == 0 {
		return nil
	}
	p4, err := newPool(slotNetwork(c.Network))
	if err != nil {
		return err
	}
	var p6 *pool6
	if c.Network6.IsValid() {
		if p6, err = newPool6(c.Network6, p4); err != nil {
			return err
		}
	}
	owner := map[netip.Addr]string{}
	bad := func(e *config.ClientConfig, line int, directive, format string, args ...any) error {
		return &config.Error{File: e.File, Line: line, Directive: directive, Err: fmt.Errorf(format, args...)}
	}
	for _, name := range slices.Sorted(maps.Keys(c.ClientConfigs)) {
		e := c.ClientConfigs[name]
		if e.Address.IsValid() {
			switch {
			case name == ccdDefault:
				return bad(e, e.AddressLine, "ifconfig-push", "DEFAULT applies to every client without a file of its own: a fixed address there would be shared")
			case !c.Network.IsValid():
				return bad(e, e.AddressLine, "ifconfig-push", "the server has no IPv4 pool (server NET MASK)")
			case e.Address.Compare(p4.first) < 0 || e.Address.Compare(p4.last) > 0:
				return bad(e, e.AddressLine, "ifconfig-push", "%s is not a client address of the server's network %s (%s to %s)", e.Address, c.Network, p4.first, p4.last)
			case e.Netmask != c.Network.Bits():
				return bad(e, e.AddressLine, "ifconfig-push", "netmask /%d differs from the server's /%d (topology subnet: use %s)", e.Netmask, c.Network.Bits(), maskString(c.Network.Bits()))
			}
			if o, dup := owner[e.Address]; dup {
				return bad(e, e.AddressLine, "ifconfig-push", "%s is also the fixed address of %q", e.Address, o)
			}
			owner[e.Address] = name
		}
		if e.Address6.IsValid() {
			a := e.Address6.Addr()
			lo, hi := p6Range(p6, p4)
			switch {
			case name == ccdDefault:
				return bad(e, e.Address6Line, "ifconfig-ipv6-push", "DEFAULT applies to every client without a file of its own: a fixed address there would be shared")
			case p6 == nil:
				return bad(e, e.Address6Line, "ifconfig-ipv6-push", "the server has no IPv6 pool (server-ipv6)")
			case !p6.network.Contains(a) || a == p6.server || a == p6.network.Addr():
				return bad(e, e.Address6Line, "ifconfig-ipv6-push", "%s is not a client address of the server's IPv6 network %s", a, p6.network)
			case a.Compare(lo) >= 0 && a.Compare(hi) <= 0:
				return bad(e, e.Address6Line, "ifconfig-ipv6-push", "%s is in the range the IPv6 pool hands out (%s to %s); pick one outside it", a, lo, hi)
			case e.Address6.Bits() != p6.network.Bits():
				return bad(e, e.Address6Line, "ifconfig-ipv6-push", "prefix length /%d differs from the server's /%d", e.Address6.Bits(), p6.network.Bits())
			}
			if o, dup := owner[a]; dup {
				return bad(e, e.Address6Line, "ifconfig-ipv6-push", "%s is also the fixed address of %q", a, o)
			}
			owner[a] = name
		}
	}
	return nil
}

// p6Range is the first and last address the IPv6 pool hands out.
func p6Range(p6 *pool6, p4 *pool) (netip.Addr, netip.Addr) {
	if p6 == nil {
		return netip.Addr{}, netip.Addr{}
	}
	return p6.addrFor(p4.first), p6.addrFor(p4.last)
}

// reserved returns the fixed IPv4 addresses of c's entries by the file
// that fixes them: the pool never hands them to another client.
func reserved(c *Config) map[netip.Addr]string {
	var out map[netip.Addr]string
	for name, e := range c.ClientConfigs {
		if e.Address.IsValid() {
			if out == nil {
				out = map[netip.Addr]string{}
			}
			out[e.Address] = name
		}
	}
	return out
}

// clientConfig returns the entry of the client with common name cn: its
// file, else DEFAULT, else nil.
func (l *live) clientConfig(cn string) *config.ClientConfig {
	if e := l.cfg.ClientConfigs[cn]; e != nil && cn != "" {
		return e
	}
	return l.cfg.ClientConfigs[ccdDefault]
}

// ccdRefusal is why l refuses the client with common name cn before it
// gets an address ("" = admitted): disable, or ccd-exclusive without a
// file of its own.
func (l *live) ccdRefusal(cn string) string {
	if l.cfg.ClientConfigDir == "" {
		return ""
	}
	if l.cfg.CCDExclusive && (cn == "" || l.cfg.ClientConfigs[cn] == nil) {
		return fmt.Sprintf("client-config-dir authentication failed for common name %q (ccd-exclusive: no file of its own)", cn)
	}
	if e := l.clientConfig(cn); e != nil && e.Disable {
		return fmt.Sprintf("client %q is disabled (%s)", cn, e.File)
	}
	return ""
}

// assignLocked gives p its tunnel addresses from l (s.mu held): the
// entry's fixed ones, else the pools'. It records the entry's iroutes.
func (p *peer) assignLocked(l *live, cn string) error {
	s := p.s
	e := l.clientConfig(cn)
	var slot netip.Addr
	var err error
	if e != nil && e.Address.IsValid() {
		slot, err = l.pool.take(e.Address)
	} else {
		slot, err = l.pool.get()
	}
	if err != nil {
		return err
	}
	p.slot = slot
	if l.pool6 != nil {
		a6 := l.pool6.addrFor(slot)
		if e != nil && e.Address6.IsValid() {
			a6 = e.Address6.Addr()
		}
		if q := s.byVaddr[a6]; q != nil {
			l.pool.put(slot)
			p.slot = netip.Addr{}
			return fmt.Errorf("server: address %s is in use by another session", a6)
		}
		p.vaddr6.Store(&a6)
		s.byVaddr[a6] = p
	}
	if l.cfg.Network.IsValid() {
		// An IPv6-only server's slot is no address of the client's.
		p.vaddr.Store(&slot)
		s.byVaddr[slot] = p
	}
	if e != nil {
		s.setIRoutesLocked(p, e.IRoutes)
	}
	return nil
}

// take reserves the fixed address a (ifconfig-push) for one client.
func (p *pool) take(a netip.Addr) (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inUse[a] {
		return netip.Addr{}, fmt.Errorf("server: fixed address %s is in use by another session", a)
	}
	p.inUse[a] = true
	return a, nil
}

// irouteEntry is one network of the internal routing table.
type irouteEntry struct {
	net netip.Prefix
	to  *peer
}

// setIRoutesLocked gives p the iroutes routes (s.mu held) and rebuilds
// the table.
func (s *Server) setIRoutesLocked(p *peer, routes []netip.Prefix) {
	if len(routes) == 0 && len(p.iroutes) == 0 {
		return
	}
	p.iroutes = slices.Clone(routes)
	r := slices.Clone(routes)
	p.srcRoutes.Store(&r)
	s.rebuildIRoutesLocked()
}

// rebuildIRoutesLocked rebuilds the internal routing table from the
// clients' iroutes (s.mu held): longest prefix first, the most recent
// client first among equal ones.
func (s *Server) rebuildIRoutesLocked() {
	var t []irouteEntry
	for _, q := range s.byID {
		for _, n := range q.iroutes {
			t = append(t, irouteEntry{net: n, to: q})
		}
	}
	slices.SortStableFunc(t, func(a, b irouteEntry) int {
		if c := cmp.Compare(b.net.Bits(), a.net.Bits()); c != 0 {
			return c
		}
		return b.to.created.Compare(a.to.created)
	})
	s.iroutes = t
}

// routeLocked is the client a packet to dst goes to (s.mu held, read or
// write): the one with that tunnel address, else the one whose iroute
// holds dst, else nil.
func (s *Server) routeLocked(dst netip.Addr) *peer {
	if p := s.byVaddr[dst]; p != nil || len(s.iroutes) == 0 {
		return p
	}
	for _, e := range s.iroutes {
		if e.net.Contains(dst) {
			return e.to
		}
	}
	return nil
}

// ownsSource reports whether src is in one of p's iroutes (a packet from
// the network behind it). Lock-free.
func (p *peer) ownsSource(src netip.Addr) bool {
	r := p.srcRoutes.Load()
	if r == nil {
		return false
	}
	for _, n := range *r {
		if n.Contains(src) {
			return true
		}
	}
	return false
}

// ccdPush filters the pushed routes that are the client's own iroutes
// (OpenVPN does not push a route to the client that owns it).
func ccdPush(opts []string, iroutes []netip.Prefix) []string {
	if len(iroutes) == 0 {
		return opts
	}
	out := opts[:0:0]
	for _, o := range opts {
		if r, ok := pushedRoute(o); ok && slices.Contains(iroutes, r) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// pushedRoute parses a pushed "route NET [MASK ...]" or "route-ipv6
// NET/LEN ..." option.
func pushedRoute(o string) (netip.Prefix, bool) {
	f := strings.Fields(o)
	if len(f) < 2 {
		return netip.Prefix{}, false
	}
	switch f[0] {
	case "route":
		mask := "255.255.255.255"
		if len(f) >= 3 {
			mask = f[2]
		}
		pfx, err := prefixFromMask(f[1], mask)
		return pfx.Masked(), err == nil
	case "route-ipv6":
		pfx, err := netip.ParsePrefix(f[1])
		return pfx.Masked(), err == nil
	}
	return netip.Prefix{}, false
}

// admitsLocked says why l no longer admits the connected client q ("" =
// it stays) and whether it is told AUTH_FAILED (it stops) rather than
// RESTART (it reconnects): disable and ccd-exclusive, then its addresses
// against l's pools and fixed addresses. s.mu is held.
func (l *live) admitsLocked(q *peer) (why string, auth bool) {
	slot := q.slot
	if !slot.IsValid() {
		return "", false // not set up yet: it is, under l
	}
	cn := q.commonName()
	if why := l.ccdRefusal(cn); why != "" {
		return why, true
	}
	e := l.clientConfig(cn)
	have4, have6 := q.vaddrLoad(), q.vaddr6Load()
	if e != nil && e.Address.IsValid() && e.Address != slot {
		return fmt.Sprintf("its address changes from %s to %s (ifconfig-push in %s; it reconnects for the new one)", have4, e.Address, e.File), false
	}
	if e == nil || !e.Address.IsValid() {
		if name, taken := l.pool.reserved[slot]; taken && l.cfg.Network.IsValid() {
			return fmt.Sprintf("its address %s is now the fixed address of %q (ifconfig-push; it reconnects for another)", slot, name), false
		}
	}
	if l.pool6 != nil && l.pool6.network.Contains(have6) {
		switch want := l.want6(slot, e); {
		case want == have6:
		case e != nil && e.Address6.IsValid():
			return fmt.Sprintf("its IPv6 address changes from %s to %s (ifconfig-ipv6-push in %s; it reconnects for the new one)", have6, want, e.File), false
		case have6 != l.pool6.addrFor(slot):
			return fmt.Sprintf("its fixed IPv6 address %s is gone (it reconnects for one of the pool)", have6), false
		}
	}
	if !l.keeps(q) {
		return l.poolRefusal(q), false
	}
	return "", false
}

// want6 is the IPv6 address l gives the client in slot with entry e.
func (l *live) want6(slot netip.Addr, e *config.ClientConfig) netip.Addr {
	if l.pool6 == nil {
		return netip.Addr{}
	}
	if e != nil && e.Address6.IsValid() {
		return e.Address6.Addr()
	}
	return l.pool6.addrFor(slot)
}

// ccdChanges describes how a connected client that stays is affected by
// l's entry for it (s.mu held): iroute changes (applied at once) and push
// changes (its next connection).
func (l *live) ccdChangesLocked(q *peer, base *live) []string {
	cn := q.commonName()
	e, old := l.clientConfig(cn), base.clientConfig(cn)
	var out []string
	var now []netip.Prefix
	if e != nil {
		now = e.IRoutes
	}
	if !slices.Equal(q.iroutes, now) {
		out = append(out, fmt.Sprintf("client %q: iroutes %s -> %s (at once)", cn, prefixes(q.iroutes), prefixes(now)))
	}
	if !e.SamePush(old) {
		out = append(out, fmt.Sprintf("client %q: pushed options change (from its next connection)", cn))
	}
	return out
}

// prefixes formats a list of networks ("none" when empty).
func prefixes(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// applyIRoutesLocked gives every client that stays the iroutes of its
// entry in l (s.mu held), refused clients excepted.
func (s *Server) applyIRoutesLocked(l *live, gone []*peer) {
	changed := false
	for _, q := range s.byID {
		if !q.slot.IsValid() || slices.Contains(gone, q) {
			continue
		}
		var now []netip.Prefix
		if e := l.clientConfig(q.commonName()); e != nil {
			now = e.IRoutes
		}
		if !slices.Equal(q.iroutes, now) {
			q.iroutes = slices.Clone(now)
			r := slices.Clone(now)
			q.srcRoutes.Store(&r)
			changed = true
		}
	}
	if changed {
		s.rebuildIRoutesLocked()
	}
}

// diffCCD adds the plan's lines for the client-config settings.
func (p *ReloadPlan) diffCCD(o, n *Config) {
	line := func(format string, args ...any) { p.Changes = append(p.Changes, fmt.Sprintf(format, args...)) }
	if o.ClientConfigDir != n.ClientConfigDir {
		line("client-config-dir: %q -> %q", o.ClientConfigDir, n.ClientConfigDir)
	}
	if o.CCDExclusive != n.CCDExclusive {
		line("ccd-exclusive: %v -> %v", o.CCDExclusive, n.CCDExclusive)
	}
	names := map[string]bool{}
	for k := range o.ClientConfigs {
		names[k] = true
	}
	for k := range n.ClientConfigs {
		names[k] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		a, b := o.ClientConfigs[name], n.ClientConfigs[name]
		switch {
		case a == nil:
			line("client-config-dir: %s added", name)
		case b == nil:
			line("client-config-dir: %s removed", name)
		case !a.Equal(b):
			line("client-config-dir: %s changed", name)
		}
	}
}
