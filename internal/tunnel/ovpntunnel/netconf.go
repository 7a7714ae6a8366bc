package ovpntunnel

// Interface configuration through netlink: MTU, address, link up, routes,
// each recorded so that teardown removes exactly what was added.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

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

// up sets the MTU, adds the addresses (addr6 may be invalid: IPv4 only)
// and brings the link up.
func (c *netConf) up(addr, addr6 netip.Prefix, mtu int) error {
	name := c.link.Attrs().Name
	if mtu > 0 {
		c.logf("ip link set dev %s mtu %d", name, mtu)
		if err := netlink.LinkSetMTU(c.link, mtu); err != nil {
			return fmt.Errorf("set MTU of %s to %d: %w", name, mtu, err)
		}
	}
	for _, a := range []netip.Prefix{addr, addr6} {
		if err := c.addAddr(a); err != nil {
			return err
		}
	}
	c.logf("ip link set dev %s up", name)
	if err := netlink.LinkSetUp(c.link); err != nil {
		return fmt.Errorf("bring %s up: %w", name, err)
	}
	return nil
}

// addAddr adds addr (nothing when invalid). The kernel adds the on-link
// route of its prefix. An IPv6 address skips duplicate address detection:
// the tunnel has no other hosts, and a tentative address could not send.
func (c *netConf) addAddr(addr netip.Prefix) error {
	if !addr.IsValid() {
		return nil
	}
	name := c.link.Attrs().Name
	a := &netlink.Addr{IPNet: ipNet(addr)}
	if addr.Addr().Is6() {
		if err := enableIPv6(name); err != nil {
			return err
		}
		a.Flags = unix.IFA_F_NODAD
	}
	c.logf("ip address add %s dev %s", addr, name)
	if err := netlink.AddrAdd(c.link, a); err != nil {
		return fmt.Errorf("add address %s to %s: %w", addr, name, err)
	}
	return nil
}

// enableIPv6 clears disable_ipv6 of the interface, which hosts with
// IPv6 disabled by default set on new devices.
func enableIPv6(name string) error {
	p := "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6"
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("IPv6 on %s: %w (is IPv6 disabled on this host?)", name, err)
	}
	if strings.TrimSpace(string(b)) == "0" {
		return nil
	}
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		return fmt.Errorf("enable IPv6 on %s: %w", name, err)
	}
	return nil
}

// replaceAddr swaps the interface address old for new; either may be
// invalid (none before, or none now).
func (c *netConf) replaceAddr(old, new netip.Prefix) error {
	name := c.link.Attrs().Name
	if old.IsValid() {
		c.logf("ip address del %s dev %s", old, name)
		if err := netlink.AddrDel(c.link, &netlink.Addr{IPNet: ipNet(old)}); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
			return fmt.Errorf("remove address %s from %s: %w", old, name, err)
		}
	}
	return c.addAddr(new)
}

// addRoute routes dst through the interface, via gw when valid.
func (c *netConf) addRoute(dst netip.Prefix, gw netip.Addr) error {
	r := &netlink.Route{LinkIndex: c.link.Attrs().Index, Dst: ipNet(dst.Masked()), Protocol: unix.RTPROT_BOOT}
	desc := fmt.Sprintf("ip route add %s dev %s", dst.Masked(), c.link.Attrs().Name)
	if gw.IsValid() {
		r.Gw = gw.AsSlice()
		desc = fmt.Sprintf("ip route add %s via %s dev %s", dst.Masked(), gw, c.link.Attrs().Name)
	} else if dst.Addr().Is4() {
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
	if cur.Gw != nil {
		c.logf("ip route add %s via %v (the server, outside the tunnel)", server, cur.Gw)
	} else {
		c.logf("ip route add %s dev index %d (the server, outside the tunnel)", server, cur.LinkIndex)
	}
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
