package netcfg

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
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
