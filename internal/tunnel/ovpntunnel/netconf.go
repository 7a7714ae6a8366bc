package ovpntunnel

// Interface configuration, through internal/sys/netcfg: MTU, addresses,
// link up and routes. Only the routes are recorded for teardown (the
// addresses go with the device, and a reconnect replaces them one by one).

import (
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
)

// netConf configures one TUN interface in the current network namespace.
// It is used from one goroutine.
type netConf struct {
	name   string
	log    *slog.Logger
	nc     *netcfg.Conf
	routes netcfg.Undo // inverses of the routes added, run by teardown
}

func openLink(name string, log *slog.Logger) (*netConf, error) {
	nc, err := netcfg.New()
	if err != nil {
		return nil, err
	}
	if _, err := nc.Link(name); err != nil {
		nc.Close()
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	nc.Log = func(s string) { log.Info("netcfg", "op", s) }
	nc.Undo = nil
	return &netConf{name: name, log: log, nc: nc}, nil
}

// up sets the MTU, adds the addresses (addr6 may be invalid: IPv4 only)
// and brings the link up.
func (c *netConf) up(addr, addr6 netip.Prefix, mtu int) error {
	if mtu > 0 {
		if err := c.nc.SetMTU(c.name, mtu); err != nil {
			return err
		}
	}
	for _, a := range []netip.Prefix{addr, addr6} {
		if err := c.addAddr(a); err != nil {
			return err
		}
	}
	return c.nc.SetUp(c.name)
}

// addAddr adds addr (nothing when invalid).
func (c *netConf) addAddr(addr netip.Prefix) error {
	if !addr.IsValid() {
		return nil
	}
	return c.nc.AddTunnelAddress(c.name, addr)
}

// replaceAddr swaps the interface address old for new; either may be
// invalid (none before, or none now).
func (c *netConf) replaceAddr(old, new netip.Prefix) error {
	if old.IsValid() {
		if err := c.nc.DeleteAddress(c.name, old); err != nil {
			return err
		}
	}
	return c.addAddr(new)
}

// recording runs f with the changes it makes recorded for teardown.
func (c *netConf) recording(f func() error) error {
	c.nc.Undo = &c.routes
	defer func() { c.nc.Undo = nil }()
	return f()
}

// addRoute routes dst through the interface, via gw when valid.
func (c *netConf) addRoute(dst netip.Prefix, gw netip.Addr) error {
	return c.recording(func() error { return c.nc.AddRouteVia(c.name, dst, gw) })
}

// addHostRouteOutside keeps traffic to the VPN server itself off the
// tunnel (needed before redirecting the default route): a host route
// through whatever route reaches it now.
func (c *netConf) addHostRouteOutside(server netip.Addr) error {
	return c.recording(func() error { return c.nc.PinHostRoute(server) })
}

// teardown removes the routes added (the address goes with the device).
func (c *netConf) teardown() {
	_ = c.routes.Rollback()
}
