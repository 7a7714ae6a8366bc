package ovpntunnel

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/control"
)

func TestParseRedirect(t *testing.T) {
	for _, c := range []struct {
		opts   []string
		v4, v6 bool
	}{
		{[]string{"ping 10"}, false, false},
		{[]string{"route 10.0.0.0 255.0.0.0", "redirect-private def1"}, false, false},
		{[]string{"redirect-gateway def1 bypass-dhcp"}, true, false},
		{[]string{"redirect-gateway def1 ipv6"}, true, true},
		{[]string{"redirect-gateway ipv6 !ipv4"}, false, true},
		{[]string{"redirect-gateway ipv6", "redirect-gateway def1"}, true, false}, // the last one counts
	} {
		rd := parseRedirect(&control.PushReply{Options: c.opts})
		if rd.v4 != c.v4 || rd.v6 != c.v6 {
			t.Errorf("%q: v4 %v v6 %v, want %v %v", c.opts, rd.v4, rd.v6, c.v4, c.v6)
		}
	}
}

func push(t *testing.T, opts ...string) *control.PushReply {
	t.Helper()
	p, err := control.ParsePushOptions(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// planString renders a plan for comparison: "outside A", "DST via GW" or
// "DST on-link", then the notes.
func planString(p routePlan) string {
	var l []string
	for _, a := range p.outside {
		l = append(l, "outside "+a.String())
	}
	for _, r := range p.routes {
		if r.gw.IsValid() {
			l = append(l, fmt.Sprintf("%s via %s", r.dst, r.gw))
		} else {
			l = append(l, fmt.Sprintf("%s on-link", r.dst))
		}
	}
	return strings.Join(append(l, p.notes...), "\n")
}

const blockNote = `block-ipv6: IPv6 to 2000::/3 goes into the tunnel and is answered there with ICMPv6 "no route"`

func TestPlanRoutes(t *testing.T) {
	v4 := netip.MustParseAddr("192.0.2.1")
	v6 := netip.MustParseAddr("2001:db8::1")
	base := []string{"topology subnet", "route-gateway 10.8.0.1", "ifconfig 10.8.0.2 255.255.255.0"}
	with6 := append(slices.Clone(base), "ifconfig-ipv6 fd42:42::1000/64 fd42:42::1")
	for _, c := range []struct {
		name   string
		server netip.Addr
		opts   []string
		want   string
		block  bool // block-ipv6
	}{
		{"net30: the peer on-link first, then routes via it", v4,
			[]string{"route 10.23.0.1", "topology net30", "ifconfig 10.23.0.6 10.23.0.5", "redirect-gateway def1"},
			"outside 192.0.2.1\n10.23.0.5/32 on-link\n10.23.0.1/32 via 10.23.0.5\n0.0.0.0/1 via 10.23.0.5\n128.0.0.0/1 via 10.23.0.5", false},
		{"IPv4 routes, IPv6 route without an IPv6 address", v4,
			append(slices.Clone(base), "route 10.98.0.0 255.255.255.0", "route-ipv6 fd99::/64"),
			"10.98.0.0/24 via 10.8.0.1\nIPv6 route fd99::/64 skipped (no IPv6 address pushed)", false},
		{"IPv4 redirect keeps IPv6 out", v4, append(slices.Clone(with6), "redirect-gateway def1"),
			"outside 192.0.2.1\n0.0.0.0/1 via 10.8.0.1\n128.0.0.0/1 via 10.8.0.1", false},
		{"route-ipv6 via the ifconfig-ipv6 remote or its own gateway", v4,
			append(slices.Clone(with6), "route-ipv6 fd99::1/64", "route-ipv6 2001:db8:5::/48 fd42:42::7", "route-ipv6 2001:db8:6::/48 fd43::1"),
			"fd99::/64 via fd42:42::1\n2001:db8:5::/48 via fd42:42::7\n2001:db8:6::/48 on-link\n" +
				"IPv6 route 2001:db8:6::/48: gateway fd43::1 is outside fd42:42::/64, routed on-link", false},
		{"both families redirected, IPv4 server", v4, append(slices.Clone(with6), "redirect-gateway def1 ipv6"),
			"outside 192.0.2.1\n0.0.0.0/1 via 10.8.0.1\n128.0.0.0/1 via 10.8.0.1\n2000::/4 via fd42:42::1\n3000::/4 via fd42:42::1", false},
		{"IPv6 only redirected, IPv6 server", v6, append(slices.Clone(with6), "redirect-gateway ipv6 !ipv4"),
			"outside 2001:db8::1\n2000::/4 via fd42:42::1\n3000::/4 via fd42:42::1", false},
		{"IPv6 address without remote: on-link, no IPv4 host route for an IPv6 server", v6, append(slices.Clone(base), "ifconfig-ipv6 2001:db8:9::2/64", "redirect-gateway ipv6"),
			"outside 2001:db8::1\n0.0.0.0/1 via 10.8.0.1\n128.0.0.0/1 via 10.8.0.1\n2000::/4 on-link\n3000::/4 on-link", false},
		{"IPv6 redirect without an IPv6 address", v4, append(slices.Clone(base), "redirect-gateway def1 ipv6"),
			"outside 192.0.2.1\n0.0.0.0/1 via 10.8.0.1\n128.0.0.0/1 via 10.8.0.1\n" +
				`"redirect-gateway def1 ipv6": IPv6 not redirected, the server pushed no IPv6 address (ifconfig-ipv6)`, false},
		{"block-ipv6 with an IPv4 redirect and no IPv6 address", v4, append(slices.Clone(base), "redirect-gateway def1"),
			"outside 192.0.2.1\n0.0.0.0/1 via 10.8.0.1\n128.0.0.0/1 via 10.8.0.1\n2000::/4 on-link\n3000::/4 on-link\n" + blockNote, true},
		{"block-ipv6 with redirect-gateway ipv6 and no IPv6 address, IPv6 server", v6, append(slices.Clone(base), "redirect-gateway def1 ipv6"),
			"outside 2001:db8::1\n0.0.0.0/1 via 10.8.0.1\n128.0.0.0/1 via 10.8.0.1\n2000::/4 on-link\n3000::/4 on-link\n" + blockNote, true},
		{"block-ipv6 with an IPv6 address and an IPv4 redirect", v4, append(slices.Clone(with6), "redirect-gateway def1"),
			"outside 192.0.2.1\n0.0.0.0/1 via 10.8.0.1\n128.0.0.0/1 via 10.8.0.1\n2000::/4 via fd42:42::1\n3000::/4 via fd42:42::1\n" + blockNote, true},
		{"block-ipv6 without redirect", v4, append(slices.Clone(base), "route 10.98.0.0 255.255.255.0"),
			"10.98.0.0/24 via 10.8.0.1\nblock-ipv6 without redirect-gateway: only IPv6 routed into the tunnel is answered with \"no route\"", true},
	} {
		got := planString(planRoutes(c.server, push(t, c.opts...), c.block))
		if got != c.want {
			t.Errorf("%s:\ngot\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}
