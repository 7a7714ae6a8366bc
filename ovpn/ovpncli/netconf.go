package ovpncli

// Interface configuration through netlink: MTU, address, link up, routes,
// each recorded so that teardown removes exactly what was added.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// netConf configures one TUN interface in the current network namespace.
// It is used from one goroutine.
type netConf struct {
	link   netlink.Link
	routes []*netlink.Route // added routes, removed by teardown
	logf   func(string, ...any)
}

func openLink(name string, logf func(string, ...any)) (*netConf, error) {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	return &netConf{link: l, logf: logf}, nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// up sets the MTU, adds the address and brings the link up.
func (c *netConf) up(addr netip.Prefix, mtu int) error {
	name := c.link.Attrs().Name
	if mtu > 0 {
		c.logf("ip link set dev %s mtu %d", name, mtu)
		if err := netlink.LinkSetMTU(c.link, mtu); err != nil {
			return fmt.Errorf("set MTU of %s to %d: %w", name, mtu, err)
		}
	}
	c.logf("ip address add %s dev %s", addr, name)
	if err := netlink.AddrAdd(c.link, &netlink.Addr{IPNet: ipNet(addr)}); err != nil {
		return fmt.Errorf("add address %s to %s: %w", addr, name, err)
	}
	c.logf("ip link set dev %s up", name)
	if err := netlink.LinkSetUp(c.link); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	return nil
}

// replaceAddr swaps the interface address old for new.
func (c *netConf) replaceAddr(old, new netip.Prefix) error {
	name := c.link.Attrs().Name
	c.logf("ip address del %s dev %s", old, name)
	if err := netlink.AddrDel(c.link, &netlink.Addr{IPNet: ipNet(old)}); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("remove address %s from %s: %w", old, name, err)
	}
	c.logf("ip address add %s dev %s", new, name)
	if err := netlink.AddrAdd(c.link, &netlink.Addr{IPNet: ipNet(new)}); err != nil {
		return fmt.Errorf("add address %s to %s: %w", new, name, err)
	}
	return nil
}

// addRoute routes dst through the interface, via gw when valid.
func (c *netConf) addRoute(dst netip.Prefix, gw netip.Addr) error {
	r := &netlink.Route{LinkIndex: c.link.Attrs().Index, Dst: ipNet(dst.Masked()), Protocol: unix.RTPROT_BOOT}
	desc := fmt.Sprintf("ip route add %s dev %s", dst.Masked(), c.link.Attrs().Name)
	if gw.IsValid() {
		r.Gw = gw.AsSlice()
		desc = fmt.Sprintf("ip route add %s via %s dev %s", dst.Masked(), gw, c.link.Attrs().Name)
	} else {
		r.Scope = netlink.SCOPE_LINK
	}
	c.logf("%s", desc)
	if err := netlink.RouteAdd(r); err != nil {
		return fmt.Errorf("%s: %w", desc, err)
	}
	c.routes = append(c.routes, r)
	return nil
}

// addHostRouteOutside keeps traffic to the VPN server itself off the
// tunnel (needed before redirecting the default route): a /32 through
// whatever route reaches it now.
func (c *netConf) addHostRouteOutside(server netip.Addr) error {
	rs, err := netlink.RouteGet(server.AsSlice())
	if err != nil || len(rs) == 0 {
		return fmt.Errorf("no route to the server %s: %v", server, err)
	}
	cur := rs[0]
	r := &netlink.Route{LinkIndex: cur.LinkIndex, Dst: ipNet(netip.PrefixFrom(server, server.BitLen())), Gw: cur.Gw, Protocol: unix.RTPROT_BOOT}
	c.logf("ip route add %s via %v (the server, outside the tunnel)", server, cur.Gw)
	if err := netlink.RouteAdd(r); err != nil && !errorsIsExist(err) {
		return fmt.Errorf("route to the server %s: %w", server, err)
	}
	c.routes = append(c.routes, r)
	return nil
}

func errorsIsExist(err error) bool { return errors.Is(err, unix.EEXIST) }

// teardown removes the routes added (the address goes with the device).
func (c *netConf) teardown() {
	for i := len(c.routes) - 1; i >= 0; i-- {
		_ = netlink.RouteDel(c.routes[i])
	}
	c.routes = nil
}
