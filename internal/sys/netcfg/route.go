package netcfg

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// AddRoute adds a route for p through the interface in table (0 = main),
// as `ip route add P dev NAME [table T]` does: link scope for IPv4,
// protocol "boot". Removed on undo.
func (c *Conf) AddRoute(name string, p netip.Prefix, table int) error {
	return c.addRoute(name, p, netip.Addr{}, table)
}

// AddRouteVia adds a route for p through the interface and the gateway gw
// in the main table, as `ip route add P via GW dev NAME` does; an invalid
// gw makes it AddRoute. p is masked first. Removed on undo.
func (c *Conf) AddRouteVia(name string, p netip.Prefix, gw netip.Addr) error {
	return c.addRoute(name, p.Masked(), gw, 0)
}

func (c *Conf) addRoute(name string, p netip.Prefix, gw netip.Addr, table int) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	r := &netlink.Route{
		LinkIndex: l.Attrs().Index,
		Dst:       ipNet(p),
		Family:    family(p.Addr()),
		Protocol:  unix.RTPROT_BOOT,
		Table:     table,
	}
	via := ""
	if gw.IsValid() {
		r.Gw = gw.AsSlice()
		via = " via " + gw.String()
	} else if p.Addr().Is4() {
		r.Scope = netlink.SCOPE_LINK
	}
	if table != 0 {
		c.logf("ip %s route add %s%s dev %s table %d", famFlag(r.Family), p, via, name, table)
	} else {
		c.logf("ip %s route add %s%s dev %s", famFlag(r.Family), p, via, name)
	}
	if err := c.h.RouteAdd(r); err != nil {
		return fmt.Errorf("add route %s%s dev %s: %w", p, via, name, err)
	}
	c.Undo.Push("route "+p.String(), func() error { return ignoreGone(c.h.RouteDel(r)) })
	return nil
}

// PinHostRoute adds a host route for dst through whatever route reaches
// it now (same interface, same gateway), so that dst stays reachable
// outside a tunnel that is about to take the default route (a VPN
// server's own address). A host route that already exists is left alone
// and not recorded. Removed on undo.
func (c *Conf) PinHostRoute(dst netip.Addr) error {
	rs, err := c.h.RouteGet(dst.AsSlice())
	if err != nil || len(rs) == 0 {
		return fmt.Errorf("no route to %s: %v", dst, err)
	}
	cur := rs[0]
	r := &netlink.Route{LinkIndex: cur.LinkIndex, Dst: ipNet(netip.PrefixFrom(dst, dst.BitLen())), Gw: cur.Gw, Protocol: unix.RTPROT_BOOT}
	if cur.Gw != nil {
		c.logf("ip %s route add %s via %v (outside the tunnel)", famFlag(family(dst)), dst, cur.Gw)
	} else {
		c.logf("ip %s route add %s dev index %d (outside the tunnel)", famFlag(family(dst)), dst, cur.LinkIndex)
	}
	if err := c.h.RouteAdd(r); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
		return fmt.Errorf("host route to %s: %w", dst, err)
	}
	c.Undo.Push("route "+dst.String(), func() error { return ignoreGone(c.h.RouteDel(r)) })
	return nil
}

// RouteCovered reports whether the main table already routes p through the
// interface with a route at least as wide (what `ip route show dev NAME
// match P` finds); wg-quick then adds no route of its own.
func (c *Conf) RouteCovered(name string, p netip.Prefix) (bool, error) {
	l, err := c.Link(name)
	if err != nil {
		return false, err
	}
	routes, err := c.h.RouteListFiltered(family(p.Addr()), &netlink.Route{LinkIndex: l.Attrs().Index, Table: unix.RT_TABLE_MAIN},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return false, err
	}
	for _, r := range routes {
		dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if p.Addr().Is6() {
			dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		if r.Dst != nil {
			a, ok := netip.AddrFromSlice(r.Dst.IP)
			ones, _ := r.Dst.Mask.Size()
			if !ok {
				continue
			}
			if p.Addr().Is4() {
				a = a.Unmap()
			}
			dst = netip.PrefixFrom(a, ones)
		}
		if dst.Bits() <= p.Bits() && dst.Contains(p.Addr()) {
			return true, nil
		}
	}
	return false, nil
}

// TableInUse reports whether table holds any IPv4 or IPv6 route.
func (c *Conf) TableInUse(table int) (bool, error) {
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := c.h.RouteListFiltered(fam, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return false, err
		}
		if len(rs) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// FreeTable returns the first table number from start on that holds no
// route (wg-quick's choice of fwmark and table for a default route).
func (c *Conf) FreeTable(start int) (int, error) {
	for t := start; t < start+1<<16; t++ {
		used, err := c.TableInUse(t)
		if err != nil {
			return 0, err
		}
		if !used {
			return t, nil
		}
	}
	return 0, fmt.Errorf("no free routing table from %d on", start)
}

// RouteMTU returns the MTU of the route the kernel would use to reach
// dst: the route's own mtu metric, else its interface's MTU. ok is false
// when there is no route.
func (c *Conf) RouteMTU(dst netip.Addr) (mtu int, ok bool) {
	rs, err := c.h.RouteGet(net.IP(dst.AsSlice()))
	if err != nil || len(rs) == 0 {
		return 0, false
	}
	return c.mtuOf(rs[0])
}

func (c *Conf) mtuOf(r netlink.Route) (int, bool) {
	if r.MTU > 0 {
		return r.MTU, true
	}
	l, err := c.h.LinkByIndex(r.LinkIndex)
	if err != nil {
		return 0, false
	}
	return l.Attrs().MTU, true
}

// DefaultRouteMTU returns the MTU of the main table's first IPv4 default
// route (what `ip route show default` lists first).
func (c *Conf) DefaultRouteMTU() (int, bool) {
	rs, err := c.h.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return 0, false
	}
	for _, r := range rs {
		if r.Dst == nil || r.Dst.IP.IsUnspecified() {
			if ones, _ := maskSize(r.Dst); ones == 0 {
				return c.mtuOf(r)
			}
		}
	}
	return 0, false
}

func maskSize(n *net.IPNet) (int, int) {
	if n == nil {
		return 0, 0
	}
	return n.Mask.Size()
}

// LinkRoute is a route through an interface, as LinkRoutes lists it.
type LinkRoute struct {
	Dst netip.Prefix
	// Table is the route's table (unix.RT_TABLE_MAIN for the main one).
	Table int
}

// LinkRoutes lists the routes through the interface that a tool added
// (protocol boot, as AddRoute makes them), in every table. The kernel's
// own routes (those of its addresses, local and multicast ones) are left
// out.
func (c *Conf) LinkRoutes(name string) ([]LinkRoute, error) {
	l, err := c.Link(name)
	if err != nil {
		return nil, err
	}
	rs, err := c.h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: l.Attrs().Index, Table: unix.RT_TABLE_UNSPEC},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes of %s: %w", name, err)
	}
	var out []LinkRoute
	for _, r := range rs {
		if r.Protocol != unix.RTPROT_BOOT || r.Gw != nil {
			continue
		}
		var dst netip.Prefix
		if r.Dst == nil {
			a := netip.IPv4Unspecified()
			if r.Family == unix.AF_INET6 {
				a = netip.IPv6Unspecified()
			}
			dst = netip.PrefixFrom(a, 0)
		} else {
			a, ok := netip.AddrFromSlice(r.Dst.IP)
			if !ok {
				continue
			}
			if r.Family == unix.AF_INET {
				a = a.Unmap()
			}
			ones, _ := r.Dst.Mask.Size()
			dst = netip.PrefixFrom(a, ones)
		}
		out = append(out, LinkRoute{Dst: dst, Table: r.Table})
	}
	return out, nil
}

// DeleteRoute removes the route for p through the interface in table (0 =
// main), as AddRoute made it; one that is not there counts as removed. It
// is added again on undo.
func (c *Conf) DeleteRoute(name string, p netip.Prefix, table int) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	// Scope "nowhere" matches a route of any scope, as `ip route del`
	// asks (the kernel otherwise matches only scope universe).
	r := &netlink.Route{LinkIndex: l.Attrs().Index, Dst: ipNet(p), Family: family(p.Addr()), Table: table, Scope: netlink.SCOPE_NOWHERE}
	if table != 0 && table != unix.RT_TABLE_MAIN {
		c.logf("ip %s route del %s dev %s table %d", famFlag(r.Family), p, name, table)
	} else {
		c.logf("ip %s route del %s dev %s", famFlag(r.Family), p, name)
	}
	if err := ignoreGone(c.h.RouteDel(r)); err != nil {
		return fmt.Errorf("remove route %s dev %s: %w", p, name, err)
	}
	c.Undo.Push("removed route "+p.String(), func() error { return c.withoutUndo(func() error { return c.addRoute(name, p, netip.Addr{}, table) }) })
	return nil
}
