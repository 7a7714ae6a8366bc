package netcfg

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

// AddAddress adds an address with its prefix length, as
// `ip address add P dev NAME` does (no broadcast address). Removed on undo.
func (c *Conf) AddAddress(name string, p netip.Prefix) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is4() {
		a.Broadcast = net.IPv4zero // none, like ip(8) without "brd"
	}
	c.logf("ip %s address add %s dev %s", famFlag(family(p.Addr())), p, name)
	if err := c.h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("add address %s to %s: %w", p, name, err)
	}
	c.Undo.Push("address "+p.String(), func() error { return ignoreGone(c.h.AddrDel(l, a)) })
	return nil
}

// Addresses lists the interface's addresses with their prefix lengths,
// leaving out link-local ones (what `wg-quick save` writes back).
func (c *Conf) Addresses(name string) ([]netip.Prefix, error) {
	l, err := c.Link(name)
	if err != nil {
		return nil, err
	}
	as, err := c.h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, a := range as {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || ip.Unmap().IsLinkLocalUnicast() {
			continue
		}
		if a.IP.To4() != nil {
			ip = ip.Unmap()
		}
		ones, _ := a.Mask.Size()
		out = append(out, netip.PrefixFrom(ip, ones))
	}
	return out, nil
}

// AddTunnelAddress adds p to a point-to-point tunnel's interface, which has
// no other hosts on its link: an IPv6 address is added after IPv6 is
// enabled on the interface (hosts that disable IPv6 by default set
// disable_ipv6 on new devices) and without duplicate address detection
// (a tentative address could not send). The kernel adds the on-link route
// of the prefix. Removed on undo.
func (c *Conf) AddTunnelAddress(name string, p netip.Prefix) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	a := &netlink.Addr{IPNet: ipNet(p)}
	if p.Addr().Is4() {
		a.Broadcast = net.IPv4zero
	} else {
		if err := c.EnableIPv6(name); err != nil {
			return err
		}
		a.Flags = unix.IFA_F_NODAD
	}
	c.logf("ip %s address add %s dev %s", famFlag(family(p.Addr())), p, name)
	if err := c.h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("add address %s to %s: %w", p, name, err)
	}
	c.Undo.Push("address "+p.String(), func() error { return ignoreGone(c.h.AddrDel(l, a)) })
	return nil
}

// DeleteAddress removes p from the interface; an address that is not
// there counts as removed. Not undone.
func (c *Conf) DeleteAddress(name string, p netip.Prefix) error {
	l, err := c.Link(name)
	if err != nil {
		return err
	}
	c.logf("ip %s address del %s dev %s", famFlag(family(p.Addr())), p, name)
	if err := c.h.AddrDel(l, &netlink.Addr{IPNet: ipNet(p)}); err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) {
		return fmt.Errorf("remove address %s from %s: %w", p, name, err)
	}
	return nil
}

// EnableIPv6 clears the interface's disable_ipv6 sysctl if it is set (in
// the network namespace of the calling thread's /proc). Not undone: the
// setting goes with the interface.
func (c *Conf) EnableIPv6(name string) error {
	p := "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6"
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("IPv6 on %s: %w (is IPv6 disabled on this host?)", name, err)
	}
	if strings.TrimSpace(string(b)) == "0" {
		return nil
	}
	c.logf("sysctl -q net.ipv6.conf.%s.disable_ipv6=0", name)
	if err := os.WriteFile(p, []byte("0\n"), 0o644); err != nil {
		return fmt.Errorf("enable IPv6 on %s: %w", name, err)
	}
	return nil
}

// RemoveAddress removes p from the interface, as DeleteAddress does; the
// address is added again on undo (with AddAddress).
func (c *Conf) RemoveAddress(name string, p netip.Prefix) error {
	if err := c.DeleteAddress(name, p); err != nil {
		return err
	}
	c.Undo.Push("removed address "+p.String(), func() error { return c.withoutUndo(func() error { return c.AddAddress(name, p) }) })
	return nil
}
