package ovpntunnel

// Pushed routes to netlink routes:
//
//	PUSH_REPLY -> planRoutes (pure: server address + pushed options)
//	    -> routePlan{outside: host routes past the tunnel, routes: via the
//	       tunnel, notes: what was skipped and why}
//	    -> installRoutes -> netConf.addHostRouteOutside / addRoute
//
// IPv4: `route` lines via the pushed gateway (route-gateway or the
// net30 peer); `redirect-gateway` (unless `!ipv4`) adds 0.0.0.0/1 and
// 128.0.0.0/1 plus a host route for an IPv4 server.
//
// IPv6: `route-ipv6 NET/LEN [GATEWAY]` via GATEWAY when given, else via
// the ifconfig-ipv6 remote, else on-link; a gateway outside the device's
// IPv6 prefix (and not link-local) is not reachable as a next hop, so
// such routes go on-link (on a TUN device every packet reaches the server
// anyway). `redirect-gateway ... ipv6` adds 2000::/4 and 3000::/4 (the
// whole global unicast space 2000::/3, as OpenVPN 2.6 does; its manual:
// "more specific IPv6 routes are added (2000::/4, 3000::/4)") plus a host
// route for an IPv6 server. IPv6 routes need a pushed ifconfig-ipv6;
// without one they are skipped with a note.
//
// block-ipv6 (block6.go) with a redirect-gateway: 2000::/4 and 3000::/4
// go into the tunnel even without ifconfig-ipv6 or the `ipv6` flag (on-link
// then), plus a host route for an IPv6 server, so that IPv6 is answered
// with "no route" there instead of leaving through the local router.

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/wirelane/wirelane/ovpn/control"
)

// Split default routes: together they cover the default route while
// staying more specific than it.
var (
	redirect4 = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/1"), netip.MustParsePrefix("128.0.0.0/1")}
	redirect6 = []netip.Prefix{netip.MustParsePrefix("2000::/4"), netip.MustParsePrefix("3000::/4")}
)

// redirect is what a pushed redirect-gateway asks for.
type redirect struct {
	v4, v6 bool
	line   string // the option as pushed
}

// parseRedirect reads the last redirect-gateway option of push (a later
// one replaces an earlier one, as in OpenVPN). Without the option nothing
// is redirected; with it IPv4 is, unless `!ipv4`, and IPv6 with `ipv6`.
func parseRedirect(push *control.PushReply) redirect {
	var r redirect
	for _, o := range push.Options {
		f := strings.Fields(o)
		if len(f) == 0 || f[0] != "redirect-gateway" {
			continue
		}
		r = redirect{v4: true, line: o}
		for _, fl := range f[1:] {
			switch fl {
			case "ipv6":
				r.v6 = true
			case "!ipv4":
				r.v4 = false
			}
		}
	}
	return r
}

// routeSpec is one route through the tunnel device; gw is invalid for an
// on-link route.
type routeSpec struct {
	dst netip.Prefix
	gw  netip.Addr
}

// routePlan is what installRoutes adds, in order: host routes outside
// the tunnel first, then the routes through it.
type routePlan struct {
	outside []netip.Addr
	routes  []routeSpec
	notes   []string // skipped options, for the progress output
}

// gateway6 returns gw when it can be a next hop on the device (inside the
// device's IPv6 prefix, or link-local), else the invalid address.
func gateway6(local6 netip.Prefix, gw netip.Addr) netip.Addr {
	if gw.IsValid() && (local6.Masked().Contains(gw) || gw.IsLinkLocalUnicast()) {
		return gw
	}
	return netip.Addr{}
}

// redirects6 reports whether the global IPv6 space is routed into the
// tunnel for push: redirect-gateway ipv6 with an IPv6 address, or
// block-ipv6 (block) with any redirect-gateway.
func redirects6(push *control.PushReply, block bool) bool {
	rd := parseRedirect(push)
	return rd.v6 && push.Local6.IsValid() || block && (rd.v4 || rd.v6)
}

// planRoutes computes the routes for push; server is the address of the
// server that answered, block whether block-ipv6 is in force.
func planRoutes(server netip.Addr, push *control.PushReply, block bool) routePlan {
	var p routePlan
	gw4 := push.Remote
	gw6 := gateway6(push.Local6, push.Remote6)
	if gw4.IsValid() && push.Local.IsValid() && !push.Local.Contains(gw4) {
		// net30 and p2p: the interface has a /32 and the peer address
		// (ifconfig LOCAL PEER) is not on it; OpenVPN sets it as the
		// address's peer, this routes it on-link, so that routes via it
		// can be added.
		p.routes = append(p.routes, routeSpec{netip.PrefixFrom(gw4, 32), netip.Addr{}})
	}
	for _, r := range push.Routes {
		if r.Addr().Is4() {
			p.routes = append(p.routes, routeSpec{r.Masked(), gw4})
			continue
		}
		if !push.Local6.IsValid() {
			p.notes = append(p.notes, fmt.Sprintf("IPv6 route %s skipped (no IPv6 address pushed)", r))
			continue
		}
		gw := gw6
		if g, ok := push.RouteGateways[r]; ok {
			if gw = gateway6(push.Local6, g); !gw.IsValid() {
				p.notes = append(p.notes, fmt.Sprintf("IPv6 route %s: gateway %s is outside %s, routed on-link", r, g, push.Local6.Masked()))
			}
		}
		p.routes = append(p.routes, routeSpec{r.Masked(), gw})
	}
	rd := parseRedirect(push)
	if rd.v4 {
		if server.Is4() {
			p.outside = append(p.outside, server)
		}
		for _, h := range redirect4 {
			p.routes = append(p.routes, routeSpec{h, gw4})
		}
	}
	if redirects6(push, block) {
		if server.Is6() {
			p.outside = append(p.outside, server)
		}
		for _, h := range redirect6 {
			p.routes = append(p.routes, routeSpec{h, gw6})
		}
		if block {
			p.notes = append(p.notes, "block-ipv6: IPv6 to 2000::/3 goes into the tunnel and is answered there with ICMPv6 \"no route\"")
		}
	} else if rd.v6 {
		p.notes = append(p.notes, fmt.Sprintf("%q: IPv6 not redirected, the server pushed no IPv6 address (ifconfig-ipv6)", rd.line))
	}
	if block && !rd.v4 && !rd.v6 {
		p.notes = append(p.notes, "block-ipv6 without redirect-gateway: only IPv6 routed into the tunnel is answered with \"no route\"")
	}
	return p
}

// installRoutes adds the routes planned for push and returns the plan
// (for the summary line); each route is logged.
func installRoutes(nc *netConf, server netip.Addr, push *control.PushReply, block bool) (routePlan, error) {
	p := planRoutes(server, push, block)
	for _, n := range p.notes {
		progress("%s", n)
	}
	if !push.Local6.IsValid() && slices.ContainsFunc(p.routes, func(r routeSpec) bool { return r.dst.Addr().Is6() }) {
		// IPv6 routes without an IPv6 address (block-ipv6): the device
		// must have IPv6 enabled to take them.
		if err := nc.nc.EnableIPv6(nc.name); err != nil {
			return p, err
		}
	}
	for _, a := range p.outside {
		if err := nc.addHostRouteOutside(a); err != nil {
			return p, err
		}
	}
	for _, r := range p.routes {
		if err := nc.addRoute(r.dst, r.gw); err != nil {
			return p, err
		}
		nc.log.Info("route added", "dst", r.dst, "gateway", addrString(r.gw), "dev", nc.name)
	}
	return p, nil
}
