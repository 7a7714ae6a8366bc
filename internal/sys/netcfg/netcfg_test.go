package netcfg

import (
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// freshNS returns a Conf for a new, empty network namespace that vanishes
// when the test ends (only the test holds it), with a veth link "dum0"
// (peer "dum1"; this kernel has no dummy driver).
func freshNS(t *testing.T) (*Conf, netns.NsHandle) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and links in it")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.New()
	if serr := netns.Set(orig); serr != nil {
		t.Fatalf("cannot return to the original namespace: %v", serr) // thread stays locked
	}
	runtime.UnlockOSThread()
	orig.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	c, err := NewAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dum0"}, PeerName: "dum1"}); err != nil {
		t.Fatal(err)
	}
	return c, ns
}

func countRoutes(t *testing.T, c *Conf, table int) int {
	t.Helper()
	n := 0
	for _, fam := range Families {
		rs, err := c.h.RouteListFiltered(fam, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.Protocol == unix.RTPROT_BOOT {
				n++
			}
		}
	}
	return n
}

func ruleSummary(t *testing.T, c *Conf) string {
	t.Helper()
	var b strings.Builder
	for _, fam := range Families {
		rs, err := c.Rules(fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			b.WriteString(r.String() + "\n")
		}
	}
	return b.String()
}

func TestChangesAndRollback(t *testing.T) {
	c, _ := freshNS(t)
	rulesBefore := ruleSummary(t, c)
	if err := c.SetMTU("dum0", 1380); err != nil {
		t.Fatal(err)
	}
	if err := c.SetUp("dum0"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"10.5.0.1/24", "fd05::1/64"} {
		if err := c.AddAddress("dum0", netip.MustParsePrefix(p)); err != nil {
			t.Fatal(err)
		}
	}
	addrs, err := c.Addresses("dum0")
	if err != nil || len(addrs) != 2 || addrs[0] != netip.MustParsePrefix("10.5.0.1/24") {
		t.Fatalf("Addresses = %v, %v", addrs, err)
	}
	// The kernel's subnet route covers the /24 and narrower prefixes only.
	for p, want := range map[string]bool{"10.5.0.0/24": true, "10.5.0.7/32": true, "10.5.0.0/16": false, "10.6.0.0/24": false, "fd05::/64": true} {
		got, err := c.RouteCovered("dum0", netip.MustParsePrefix(p))
		if err != nil || got != want {
			t.Errorf("RouteCovered(%s) = %v, %v; want %v", p, got, err, want)
		}
	}
	if err := c.AddRoute("dum0", netip.MustParsePrefix("10.6.0.0/16"), 0); err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.RouteCovered("dum0", netip.MustParsePrefix("10.6.1.0/24")); !ok {
		t.Error("route just added does not cover a narrower prefix")
	}
	free, err := c.FreeTable(51820)
	if err != nil || free != 51820 {
		t.Fatalf("FreeTable = %d, %v", free, err)
	}
	if err := c.AddRoute("dum0", netip.MustParsePrefix("0.0.0.0/0"), 51820); err != nil {
		t.Fatal(err)
	}
	if err := c.AddRoute("dum0", netip.MustParsePrefix("::/0"), 51820); err != nil {
		t.Fatal(err)
	}
	if free, _ := c.FreeTable(51820); free != 51821 {
		t.Errorf("FreeTable after use = %d, want 51821", free)
	}
	for _, fam := range Families {
		if err := c.AddDefaultRouteRules(fam, 51820); err != nil {
			t.Fatal(err)
		}
	}
	rules := ruleSummary(t, c)
	if strings.Count(rules, "table 51820") != 2 || strings.Count(rules, "table 254") != 4 {
		t.Errorf("rules after adding:\n%s", rules)
	}
	if mtu, ok := c.RouteMTU(netip.MustParseAddr("10.6.3.4")); !ok || mtu != 1380 {
		t.Errorf("RouteMTU = %d, %v; want 1380", mtu, ok)
	}
	if n := countRoutes(t, c, 51820); n != 2 {
		t.Errorf("%d routes in table 51820, want 2", n)
	}

	if err := c.Undo.Rollback(); err != nil {
		t.Fatal(err)
	}
	if got := ruleSummary(t, c); got != rulesBefore {
		t.Errorf("rules after rollback:\n%s\nwant:\n%s", got, rulesBefore)
	}
	if n := countRoutes(t, c, 51820) + countRoutes(t, c, unix.RT_TABLE_MAIN); n != 0 {
		t.Errorf("%d routes left after rollback", n)
	}
	l, _ := c.Link("dum0")
	if l.Attrs().MTU != 1500 || l.Attrs().Flags&1 != 0 {
		t.Errorf("link after rollback: mtu %d flags %v", l.Attrs().MTU, l.Attrs().Flags)
	}
	if addrs, _ := c.Addresses("dum0"); len(addrs) != 0 {
		t.Errorf("addresses left: %v", addrs)
	}
}

func TestDeleteDefaultRouteRules(t *testing.T) {
	c, _ := freshNS(t)
	before := ruleSummary(t, c)
	c.Undo = nil // a later process removes the rules, not the undo stack
	for _, fam := range Families {
		if err := c.AddDefaultRouteRules(fam, 51821); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, fam := range Families {
		k, err := c.DeleteDefaultRouteRules(fam, 51821)
		if err != nil {
			t.Fatal(err)
		}
		n += k
	}
	if n != 4 {
		t.Errorf("deleted %d rules, want 4", n)
	}
	if got := ruleSummary(t, c); got != before {
		t.Errorf("rules left:\n%s", got)
	}
}

func TestDeleteLinkAndErrNoLink(t *testing.T) {
	c, _ := freshNS(t)
	c.PushDeleteLink("dum0")
	if err := c.Undo.Rollback(); err != nil {
		t.Fatal(err)
	}
	if c.LinkExists("dum0") {
		t.Fatal("link still there")
	}
	c.PushDeleteLink("dum0") // already gone: not an error
	if err := c.Undo.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := c.SetUp("nope0"); err == nil || !strings.Contains(err.Error(), "no such interface") {
		t.Errorf("SetUp on a missing link: %v", err)
	}
}

func TestResolveTable(t *testing.T) {
	for s, want := range map[string]int{"main": 254, "local": 255, "1234": 1234, "0x10": 16} {
		if got, err := ResolveTable(s); err != nil || got != want {
			t.Errorf("ResolveTable(%q) = %d, %v", s, got, err)
		}
	}
	for _, s := range []string{"0", "no-such-table-name"} {
		if _, err := ResolveTable(s); err == nil {
			t.Errorf("ResolveTable(%q) succeeded", s)
		}
	}
}

func TestUndoOrderAndErrors(t *testing.T) {
	var u Undo
	var got []int
	u.Push("one", func() error { got = append(got, 1); return nil })
	u.Push("two", func() error { got = append(got, 2); return os.ErrPermission })
	u.Push("three", func() error { got = append(got, 3); return nil })
	err := u.Rollback()
	if len(got) != 3 || got[0] != 3 || got[2] != 1 {
		t.Errorf("order = %v", got)
	}
	if err == nil || !strings.Contains(err.Error(), "undo two") {
		t.Errorf("err = %v", err)
	}
	if u.Len() != 0 {
		t.Error("stack not emptied")
	}
}

func TestDeleteOrphanedDefaultRouteRules(t *testing.T) {
	c, _ := freshNS(t)
	before := ruleSummary(t, c)
	c.Undo = nil
	if err := c.SetUp("dum0"); err != nil {
		t.Fatal(err)
	}
	// Two tunnels with a default route: 51820 died (no routes left in its
	// table), 51821 is alive (its table still routes).
	for _, table := range []int{51820, 51821} {
		if err := c.AddDefaultRouteRules(unix.AF_INET, table); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.AddRoute("dum0", netip.MustParsePrefix("0.0.0.0/0"), 51821); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DeleteOrphanedDefaultRouteRules(unix.AF_INET, 51821); err != nil || n != 0 {
		t.Fatalf("a live tunnel's rules: deleted %d (%v), want none", n, err)
	}
	n, err := c.DeleteOrphanedDefaultRouteRules(unix.AF_INET, 51820)
	if err != nil || n != 1 {
		t.Fatalf("dead tunnel: deleted %d rules (%v), want only its not-fwmark rule", n, err)
	}
	s := ruleSummary(t, c)
	if strings.Contains(s, "51820") || !strings.Contains(s, "51821") {
		t.Fatalf("rules after cleaning up 51820:\n%s", s)
	}
	// Once the second tunnel is gone too, the shared suppress rules go.
	if err := c.DeleteLink("dum0"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DeleteOrphanedDefaultRouteRules(unix.AF_INET, 51821); err != nil || n < 2 {
		t.Fatalf("last tunnel: deleted %d rules (%v), want its rule and the suppress rules", n, err)
	}
	if got := ruleSummary(t, c); got != before {
		t.Errorf("rules left:\n%s\nwant:\n%s", got, before)
	}
}

// FuzzParseRTTables checks the rt_tables reader: no panics, and every name
// it learns is a field of a line whose first field is the table's number.
func FuzzParseRTTables(f *testing.F) {
	f.Add("255\tlocal\n254\tmain\n# comment\n0x10 vpn # trailing\n")
	f.Add("1234\n\n abc 12\n")
	f.Add("4294967296 big\n-1 neg\n")
	f.Fuzz(func(t *testing.T, s string) {
		names := map[string]int{}
		parseRTTables(strings.NewReader(s), names)
		for name, n := range names {
			if name == "" || strings.ContainsAny(name, " \t\n#") || n < 0 || n > 1<<32-1 {
				t.Fatalf("learned %q = %d from %q", name, n, s)
			}
		}
	})
}

// TestTunnelAddressesAndRoutesVia covers what an OpenVPN client needs: a
// tunnel address, a route through a gateway, a host route pinned to the
// route that reaches it now, and an address swapped on reconnect.
func TestTunnelAddressesAndRoutesVia(t *testing.T) {
	c, _ := freshNS(t)
	if err := c.SetUp("dum0"); err != nil {
		t.Fatal(err)
	}
	if err := c.AddTunnelAddress("dum0", netip.MustParsePrefix("10.8.0.6/24")); err != nil {
		t.Fatal(err)
	}
	if err := c.AddRouteVia("dum0", netip.MustParsePrefix("10.9.1.7/16"), netip.MustParseAddr("10.8.0.1")); err != nil {
		t.Fatal(err)
	}
	if err := c.PinHostRoute(netip.MustParseAddr("10.9.3.3")); err != nil {
		t.Fatal(err)
	}
	// Pinning a host route that exists already changes and records nothing.
	n := c.Undo.Len()
	if err := c.PinHostRoute(netip.MustParseAddr("10.9.3.3")); err != nil || c.Undo.Len() != n {
		t.Errorf("second PinHostRoute: %v, %d inverses (want %d)", err, c.Undo.Len(), n)
	}
	rs, err := c.h.RouteListFiltered(unix.AF_INET, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rs {
		if r.Protocol == unix.RTPROT_BOOT {
			got = append(got, r.Dst.String()+" via "+r.Gw.String())
		}
	}
	want := "10.9.0.0/16 via 10.8.0.1,10.9.3.3/32 via 10.8.0.1"
	if strings.Join(got, ",") != want {
		t.Errorf("routes = %q, want %q", got, want)
	}
	if err := c.DeleteAddress("dum0", netip.MustParsePrefix("10.8.0.6/24")); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteAddress("dum0", netip.MustParsePrefix("10.8.0.6/24")); err != nil {
		t.Errorf("deleting an address that is gone: %v", err)
	}
	if addrs, _ := c.Addresses("dum0"); len(addrs) != 0 {
		t.Errorf("addresses left: %v", addrs)
	}
	if err := c.Undo.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countRoutes(t, c, unix.RT_TABLE_MAIN); n != 0 {
		t.Errorf("%d routes left after rollback", n)
	}
}

// TestTunnelAddressEnablesIPv6 gives an interface whose host disabled
// IPv6 on it an IPv6 tunnel address: IPv6 is enabled first, and the
// address skips duplicate address detection. /proc/sys/net is the
// namespace of the thread that opens it, so the test moves its thread.
func TestTunnelAddressEnablesIPv6(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and links in it")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Errorf("cannot return to the original namespace: %v", err) // thread stays locked
			return
		}
		runtime.UnlockOSThread()
		orig.Close()
		ns.Close()
	}()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dum0"}, PeerName: "dum1"}); err != nil {
		t.Fatal(err)
	}
	const sysctl = "/proc/sys/net/ipv6/conf/dum0/disable_ipv6"
	if err := os.WriteFile(sysctl, []byte("1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.AddTunnelAddress("dum0", netip.MustParsePrefix("fd08::6/64")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(sysctl); strings.TrimSpace(string(b)) != "0" {
		t.Errorf("disable_ipv6 = %q after adding an IPv6 tunnel address", b)
	}
	l, _ := c.Link("dum0")
	as, err := c.h.AddrList(l, netlink.FAMILY_V6)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range as {
		if a.IPNet.String() == "fd08::6/64" {
			found = true
			if a.Flags&unix.IFA_F_NODAD == 0 {
				t.Errorf("address flags %#x: no IFA_F_NODAD", a.Flags)
			}
		}
	}
	if !found {
		t.Errorf("fd08::6/64 not on dum0: %v", as)
	}
}
