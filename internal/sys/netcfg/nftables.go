package netcfg

// wg-quick's firewall for a tunnel that carries a default route, built with
// nftables over netlink (github.com/google/nftables, no `nft` subprocess).
// For each address family with a /0 through the tunnel there is one table,
// named as wg-quick names it so that either tool removes the other's:
//
//	table ip|ip6 wg-quick-IFNAME
//	  chain preraw     hook prerouting  priority -300 (raw)
//	    iifname != "IFNAME" ip daddr ADDR fib saddr type != local drop   (one rule per address)
//	  chain premangle  hook prerouting  priority -150 (mangle)
//	    meta l4proto udp meta mark set ct mark
//	  chain postmangle hook postrouting priority -150 (mangle)
//	    meta l4proto udp mark FWMARK ct mark set mark
//
// preraw stops other hosts on a directly attached network from reaching the
// tunnel's addresses from outside the tunnel (Linux would otherwise accept
// them on any interface). The two mangle rules copy the fwmark of the
// tunnel's own UDP packets into their conntrack entry and back onto the
// replies, so that replies to the encrypted socket match the "not fwmark"
// policy rule's exception too.
//
// Pipeline of AddAntiSpoofing:
//
//	list the family's tables (a table of the same name left by a dead tunnel is replaced)
//	-> one netlink batch: [delete stale table] add table, 3 chains, rules
//	-> the kernel applies the batch atomically (all or nothing)
//	-> push "delete table" on Undo

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// ErrNoNftables is wrapped by errors from AddAntiSpoofing when the kernel
// cannot run the rules: no nf_tables, or no fib or ct expression.
var ErrNoNftables = errors.New("the kernel has no usable nftables support (nf_tables with the fib and ct expressions)")

// Names of wg-quick's chains and their hooks; shared with wg-quick so that
// `wg-quick down` and `wirelane down` each clean up after the other.
const (
	chainPreRaw     = "preraw"
	chainPreMangle  = "premangle"
	chainPostMangle = "postmangle"
)

// FirewallTableName is the nftables table wg-quick (and Wirelane) uses for
// the interface ifname, in both the ip and ip6 families.
func FirewallTableName(ifname string) string { return "wg-quick-" + ifname }

// Firewall installs and removes the nftables rules of a tunnel. It holds no
// socket: each operation opens and closes its own netlink connection, so a
// Firewall (and the inverses it pushes on the Conf's Undo stack) stays usable
// for as long as the namespace exists. Like Conf, it is not safe for
// concurrent use; its fields never change after creation.
type Firewall struct {
	c  *Conf
	ns int // namespace file descriptor for the netlink socket; 0 = the caller's
}

// Firewall returns the firewall of the calling process's network namespace
// (the one a Conf from New works in). Changes are logged through c.Log and
// their inverses pushed on c.Undo.
func (c *Conf) Firewall() *Firewall { return &Firewall{c: c} }

// FirewallAt returns the firewall of the namespace ns, which must be the one
// c works in (a Conf from NewAt(ns)). ns must stay open while it is used.
func (c *Conf) FirewallAt(ns netns.NsHandle) *Firewall { return &Firewall{c: c, ns: int(ns)} }

func (f *Firewall) conn() (*nftables.Conn, error) {
	return nftables.New(nftables.WithNetNSFd(f.ns))
}

func tableFamily(fam int) (nftables.TableFamily, string) {
	if fam == unix.AF_INET6 {
		return nftables.TableFamilyIPv6, "ip6"
	}
	return nftables.TableFamilyIPv4, "ip"
}

// firewallAddrs lists the interface's addresses of family fam that the
// anti-spoofing rules protect. IPv6 link-local addresses are left out: the
// kernel already accepts a link-local destination only on its own link,
// and they come and go with duplicate address detection, which would make
// the rule set depend on timing.
func (c *Conf) firewallAddrs(ifname string, fam int) ([]netip.Addr, error) {
	l, err := c.Link(ifname)
	if err != nil {
		return nil, err
	}
	as, err := c.h.AddrList(l, fam)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", ifname, err)
	}
	var out []netip.Addr
	for _, a := range as {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok {
			continue
		}
		if fam == unix.AF_INET {
			ip = ip.Unmap()
		}
		if ip.Is6() && ip.IsLinkLocalUnicast() {
			continue
		}
		out = append(out, ip)
	}
	return out, nil
}

// firewallRule is one rule of the table, as nft syntax (for the log) and
// as the expressions the kernel runs.
type firewallRule struct {
	chain string
	text  string
	exprs []expr.Any
}

// firewallRules returns the rules of the family's table, in wg-quick's
// order: the anti-spoofing drops, then postmangle, then premangle.
func firewallRules(fam int, ifname string, addrs []netip.Addr, fwmark uint32) []firewallRule {
	_, pf := tableFamily(fam)
	var name [unix.IFNAMSIZ]byte // nft compares the whole, zero-padded name
	copy(name[:], ifname)
	daddrOff, daddrLen := uint32(16), uint32(4) // IPv4 header: destination address
	if fam == unix.AF_INET6 {
		daddrOff, daddrLen = 24, 16
	}
	var rules []firewallRule
	for _, a := range addrs {
		rules = append(rules, firewallRule{
			chain: chainPreRaw,
			text:  fmt.Sprintf("iifname != %q %s daddr %s fib saddr type != local drop", ifname, pf, a),
			exprs: []expr.Any{
				&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: name[:]},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddrOff, Len: daddrLen},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()},
				&expr.Fib{Register: 1, FlagSADDR: true, ResultADDRTYPE: true},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, unix.RTN_LOCAL)},
				&expr.Verdict{Kind: expr.VerdictDrop},
			},
		})
	}
	udp := []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
	}
	rules = append(rules, firewallRule{
		chain: chainPostMangle,
		text:  fmt.Sprintf("meta l4proto udp mark %d ct mark set mark", fwmark),
		exprs: append(append([]expr.Any{}, udp...),
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.NativeEndian.AppendUint32(nil, fwmark)},
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Ct{Key: expr.CtKeyMARK, Register: 1, SourceRegister: true},
		),
	}, firewallRule{
		chain: chainPreMangle,
		text:  "meta l4proto udp meta mark set ct mark",
		exprs: append(append([]expr.Any{}, udp...),
			&expr.Ct{Key: expr.CtKeyMARK, Register: 1},
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1, SourceRegister: true},
		),
	})
	return rules
}

// AddAntiSpoofing installs wg-quick's table for the tunnel ifname in family
// fam (unix.AF_INET or AF_INET6): a drop rule for every current address of
// ifname in that family (IPv6 link-local ones aside) and the two rules that
// keep fwmark on the tunnel's UDP flows. The whole table goes in as one
// atomic batch; a table of the same name (left behind by a tunnel of that
// name that died) is replaced. The table is deleted on undo.
//
// If the kernel cannot run the rules the error wraps ErrNoNftables and
// nothing has changed.
func (f *Firewall) AddAntiSpoofing(fam int, ifname string, fwmark uint32) error {
	tf, pf := tableFamily(fam)
	tname := FirewallTableName(ifname)
	addrs, err := f.c.firewallAddrs(ifname, fam)
	if err != nil {
		return err
	}
	cc, err := f.conn()
	if err != nil {
		return f.addError(pf, tname, err)
	}
	tables, err := cc.ListTablesOfFamily(tf)
	if err != nil {
		return f.addError(pf, tname, err)
	}
	table := &nftables.Table{Name: tname, Family: tf}
	for _, t := range tables {
		if t.Name == tname {
			f.c.logf("nft delete table %s %s (left behind by an earlier %s)", pf, tname, ifname)
			cc.DelTable(table)
		}
	}
	f.c.logf("nft add table %s %s", pf, tname)
	cc.AddTable(table)
	chains := map[string]*nftables.Chain{}
	for _, ch := range []struct {
		name string
		hook *nftables.ChainHook
		hn   string
		prio *nftables.ChainPriority
	}{
		{chainPreRaw, nftables.ChainHookPrerouting, "prerouting", nftables.ChainPriorityRaw},
		{chainPreMangle, nftables.ChainHookPrerouting, "prerouting", nftables.ChainPriorityMangle},
		{chainPostMangle, nftables.ChainHookPostrouting, "postrouting", nftables.ChainPriorityMangle},
	} {
		f.c.logf("nft add chain %s %s %s { type filter hook %s priority %d; }", pf, tname, ch.name, ch.hn, *ch.prio)
		chains[ch.name] = cc.AddChain(&nftables.Chain{
			Name: ch.name, Table: table, Type: nftables.ChainTypeFilter, Hooknum: ch.hook, Priority: ch.prio,
		})
	}
	for _, r := range firewallRules(fam, ifname, addrs, fwmark) {
		f.c.logf("nft add rule %s %s %s %s", pf, tname, r.chain, r.text)
		cc.AddRule(&nftables.Rule{Table: table, Chain: chains[r.chain], Exprs: r.exprs})
	}
	if err := cc.Flush(); err != nil {
		return f.addError(pf, tname, err)
	}
	f.c.Undo.Push("nftables table "+pf+" "+tname, func() error {
		cc, err := f.conn()
		if err != nil {
			return err
		}
		f.c.logf("nft delete table %s %s", pf, tname)
		cc.DelTable(table)
		return ignoreGone(cc.Flush())
	})
	return nil
}

// addError explains a failure to install the table; a kernel without
// nftables (or without the fib and ct expressions) gets ErrNoNftables.
func (f *Firewall) addError(pf, tname string, err error) error {
	if noNftables(err) {
		return fmt.Errorf("nftables: cannot add table %s %s: %w: %v", pf, tname, ErrNoNftables, err)
	}
	return fmt.Errorf("nftables: add table %s %s: %w", pf, tname, err)
}

// noNftables reports whether err is how the kernel says it lacks what the
// rules need: no netfilter netlink at all, no nf_tables subsystem, or no
// such expression or chain type (the module is missing).
func noNftables(err error) bool {
	for _, e := range []error{unix.EPROTONOSUPPORT, unix.EAFNOSUPPORT, unix.EOPNOTSUPP, unix.ENOENT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// DeleteFirewall removes the tables named FirewallTableName(ifname) in
// every family, as `wg-quick down` does, whoever created them. It returns
// how many it removed. A kernel without nftables has none to remove, which
// is not an error.
func (f *Firewall) DeleteFirewall(ifname string) (int, error) {
	tname := FirewallTableName(ifname)
	cc, err := f.conn()
	if err != nil {
		if noNftables(err) {
			return 0, nil
		}
		return 0, err
	}
	tables, err := cc.ListTables()
	if err != nil {
		if noNftables(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("nftables: list tables: %w", err)
	}
	n := 0
	for _, t := range tables {
		if t.Name != tname {
			continue
		}
		f.c.logf("nft delete table %s %s", familyName(t.Family), tname)
		cc.DelTable(t)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if err := cc.Flush(); err != nil {
		return 0, fmt.Errorf("nftables: delete table %s: %w", tname, err)
	}
	return n, nil
}

// FirewallTables lists the families ("ip", "ip6", ...) in which a table
// named FirewallTableName(ifname) exists.
func (f *Firewall) FirewallTables(ifname string) ([]string, error) {
	cc, err := f.conn()
	if err != nil {
		return nil, err
	}
	tables, err := cc.ListTables()
	if err != nil {
		return nil, fmt.Errorf("nftables: list tables: %w", err)
	}
	var out []string
	for _, t := range tables {
		if t.Name == FirewallTableName(ifname) {
			out = append(out, familyName(t.Family))
		}
	}
	return out, nil
}

func familyName(tf nftables.TableFamily) string {
	switch tf {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family %d", tf)
}

// RebuildAntiSpoofing replaces the family's table of ifname with one for
// the addresses the interface has now (AddAntiSpoofing, in one atomic
// batch). It records no inverse: the caller that changes addresses records
// a rebuild of its own.
func (f *Firewall) RebuildAntiSpoofing(fam int, ifname string, fwmark uint32) error {
	return f.c.withoutUndo(func() error { return f.AddAntiSpoofing(fam, ifname, fwmark) })
}

// RemoveAntiSpoofing deletes the family's table of ifname (if there is
// one). On undo the table is built again for fwmark and the addresses the
// interface has then.
func (f *Firewall) RemoveAntiSpoofing(fam int, ifname string, fwmark uint32) error {
	tf, pf := tableFamily(fam)
	tname := FirewallTableName(ifname)
	cc, err := f.conn()
	if err != nil {
		return err
	}
	tables, err := cc.ListTablesOfFamily(tf)
	if err != nil {
		return fmt.Errorf("nftables: list tables: %w", err)
	}
	for _, t := range tables {
		if t.Name != tname {
			continue
		}
		f.c.logf("nft delete table %s %s", pf, tname)
		cc.DelTable(t)
		if err := cc.Flush(); err != nil {
			return fmt.Errorf("nftables: delete table %s %s: %w", pf, tname, err)
		}
		f.c.Undo.Push("removed nftables table "+pf+" "+tname, func() error { return f.RebuildAntiSpoofing(fam, ifname, fwmark) })
	}
	return nil
}
