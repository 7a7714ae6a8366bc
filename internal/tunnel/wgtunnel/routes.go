package wgtunnel

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"

	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// defaultTable is wg-quick's first choice of fwmark and routing table for
// a default route.
const defaultTable = 51820

// allowedPrefixes returns every allowed IP of the device's peers.
func allowedPrefixes(dev *wgtypes.Device) []netip.Prefix {
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
	return pfxs
}

// hasDefault reports whether a peer of dev is allowed a /0.
func hasDefault(dev *wgtypes.Device) bool {
	for _, p := range allowedPrefixes(dev) {
		if p.Bits() == 0 {
			return true
		}
	}
	return false
}

// addRoutes adds a route for every allowed IP the device reports, longest
// prefix first, as wg-quick does. A /0 (Table auto) also gets policy rules
// and, unless o.NoFirewall, wg-quick's nftables table for its family.
func addRoutes(nc *netcfg.Conf, eng Engine, cfg *wgquick.Config, table int, o *Options) error {
	if cfg.Interface.Table == "off" {
		return nil
	}
	dev, err := eng.Device(cfg.Name)
	if err != nil {
		return err
	}
	pfxs := allowedPrefixes(dev)
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
				t, err := nc.FreeTable(defaultTable)
				if err != nil {
					return err
				}
				o.logf("wg set %s fwmark %d", cfg.Name, t)
				if err := eng.Configure(cfg.Name, wgtypes.Config{FirewallMark: &t}); err != nil {
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
			if err := addFirewall(nc, cfg.Name, fam, fwmark, o); err != nil {
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

// addFirewall installs wg-quick's anti-spoofing and fwmark table for a
// default route in family fam. Without nftables in the kernel it fails
// (and Up is undone) rather than bring up a full tunnel whose addresses
// other hosts on the LAN can reach: the user asked for a tunnel, and may
// only skip the protection knowingly, with WIRELANE_FIREWALL=off.
func addFirewall(nc *netcfg.Conf, name string, fam, fwmark int, o *Options) error {
	if o.NoFirewall {
		v := "IPv4"
		if fam == unix.AF_INET6 {
			v = "IPv6"
		}
		o.warnf("%s=off: no nftables firewall for %s (%s); hosts on your other networks can send packets to its addresses", FirewallEnv, name, v)
		return nil
	}
	err := nc.Firewall().AddAntiSpoofing(fam, name, uint32(fwmark))
	if errors.Is(err, netcfg.ErrNoNftables) {
		return fmt.Errorf("%w. Without it, hosts on your other networks could reach %s's addresses. Load the modules (modprobe nf_tables nft_fib_ipv4 nft_fib_ipv6 nft_ct) or, accepting that risk, set %s=off", err, name, FirewallEnv)
	}
	return err
}
