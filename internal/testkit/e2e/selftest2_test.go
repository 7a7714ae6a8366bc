package e2e

// Further behaviours of the kernel's WireGuard self-test (netns.sh), in
// our own words, against wirelaned: ICMP errors, source-address
// stickiness, wg-quick-style policy routing, onion routing.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestICMPUnreachableNoPeer: a packet to an address of the tunnel's subnet
// that no peer's allowed IPs hold is answered at once with an ICMP
// "host unreachable" (ICMPv6 "address unreachable") from that address,
// instead of vanishing.
func TestICMPUnreachableNoPeer(t *testing.T) {
	p := newSamePair(t)
	p.a.ping(t, p.b.v4)
	for _, c := range []struct{ addr, want string }{
		{"192.168.241.9", "From 192.168.241.9 icmp_seq=1 Destination Host Unreachable"},
		{"fd00::9", "From fd00::9 icmp_seq=1 Destination unreachable: Address unreachable"},
	} {
		out, err := netns.Try(p.a.ns, nil, "ping", "-c", "1", "-W", "2", c.addr)
		if err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("ping %s (no peer): err %v, want %q in:\n%s", c.addr, err, c.want, out)
		}
	}
	// A routed destination still works, and the peer's own address too.
	p.a.ping(t, p.b.v6)
}

// TestICMPUnreachableThroughNAT is the self-test's NAT case: B's namespace
// forwards pings from the router's network into its tunnel, source-NATed
// to B's tunnel address, after B has removed its only peer. The ICMP error
// B's daemon writes back is addressed to B's own tunnel address; only the
// kernel's connection tracking, which must recognise it as belonging to
// the NATed ping, sends it on to the router that pinged. The ping must see
// "Destination Host Unreachable".
//
// The kernel's WireGuard makes the error with the kernel's own ICMP code,
// which takes the forwarding router's address (10.0.0.100) as its source;
// a userspace daemon cannot know that address (nor the un-NATed sender),
// so its error comes from the unreachable destination (192.168.241.1), and
// the self-test's "manual rpfilter" on the router (drop anything on that
// link not from 10.0.0.0/24) is left out here.
func TestICMPUnreachableThroughNAT(t *testing.T) {
	im := pairImpl(t, "iptables")
	ns0, ns1, ns2 := netns.New(t, "wl0n"), netns.New(t, "wl1n"), netns.New(t, "wl2n")
	netns.Veth(t, ns0, "vethrc", ns1, "vethc")
	netns.Veth(t, ns0, "vethrs", ns2, "veths")
	netns.Run(t, ns0, "ip", "addr", "add", "192.168.1.1/24", "dev", "vethrc")
	netns.Run(t, ns0, "ip", "addr", "add", "10.0.0.1/24", "dev", "vethrs")
	netns.Run(t, ns1, "ip", "addr", "add", "192.168.1.100/24", "dev", "vethc")
	netns.Run(t, ns1, "ip", "route", "add", "default", "via", "192.168.1.1")
	netns.Run(t, ns2, "ip", "addr", "add", "10.0.0.100/24", "dev", "veths")
	netns.Run(t, ns0, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	netns.Run(t, ns0, "iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "192.168.1.0/24", "-d", "10.0.0.0/24", "-j", "SNAT", "--to", "10.0.0.1")

	a := newSide(t, im, ns1, ns1, 10001, "192.168.241.1", "fd00::1")
	b := newSide(t, im, ns2, ns2, 10002, "192.168.241.2", "fd00::2")
	a.up(t)
	b.up(t)
	b.addPeer(t, a, "")
	a.addPeer(t, b, "10.0.0.100:10002")
	a.ping(t, b.v4)
	b.ping(t, a.v4)

	netns.Run(t, ns2, "iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "10.0.0.0/24", "-d", "192.168.241.0/24", "-j", "SNAT", "--to", b.v4)
	netns.Run(t, ns2, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	netns.Run(t, ns0, "ip", "-4", "route", "add", a.v4, "via", "10.0.0.100")
	// While B still has the peer, the router's ping goes through.
	netns.Run(t, ns0, "ping", "-c", "1", "-W", "2", a.v4)
	b.wg(t, "set", b.ifname, "peer", a.pub(), "remove")
	out, err := netns.Try(ns0, nil, "ping", "-c", "1", "-W", "2", a.v4)
	want := "From " + a.v4 + " icmp_seq=1 Destination Host Unreachable"
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("router's ping into B's tunnel without a peer: err %v, want %q in:\n%s", err, want, out)
	}
}

// stickyPair is two daemons whose interfaces and sockets live in ns1 and
// ns2, joined by the veth pair veth1 (ns1) - veth2 (ns2) with no
// addresses yet: the self-test's topology for source addresses.
func stickyPair(t *testing.T) (a, b *side) {
	t.Helper()
	im := pairImpl(t)
	ns1, ns2 := netns.New(t, "wl1n"), netns.New(t, "wl2n")
	netns.Veth(t, ns1, "veth1", ns2, "veth2")
	for _, ns := range []*netns.NS{ns1, ns2} {
		netns.Run(t, ns, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
	}
	netns.Run(t, ns1, "sysctl", "-qw", "net.ipv6.conf.veth1.accept_dad=0")
	netns.Run(t, ns2, "sysctl", "-qw", "net.ipv6.conf.veth2.accept_dad=0")
	// Removing the primary address keeps (promotes) the secondary one.
	netns.Run(t, ns1, "sysctl", "-qw", "net.ipv4.conf.veth1.promote_secondaries=1")
	a = newSide(t, im, ns1, ns1, 10001, "192.168.241.1", "fd00::1")
	b = newSide(t, im, ns2, ns2, 10002, "192.168.241.2", "fd00::2")
	a.up(t)
	b.up(t)
	a.addPeer(t, b, "")
	b.addPeer(t, a, "")
	return a, b
}

// TestStickySourceFallsOver: A sends from the address its peer's packets
// came to (sticky source), but when that address is removed from its
// interface A must fall over to the one that remains, in both families,
// and the tunnel keeps working without a new configuration.
func TestStickySourceFallsOver(t *testing.T) {
	a, b := stickyPair(t)
	a.run(t, "ip", "addr", "add", "10.0.0.1/24", "dev", "veth1")
	a.run(t, "ip", "addr", "add", "fd00:aa::1/96", "dev", "veth1", "nodad")
	b.run(t, "ip", "addr", "add", "10.0.0.2/24", "dev", "veth2")
	b.run(t, "ip", "addr", "add", "fd00:aa::2/96", "dev", "veth2", "nodad")

	a.wg(t, "set", a.ifname, "peer", b.pub(), "endpoint", "10.0.0.2:10002")
	a.ping(t, b.v4)
	if ep := b.endpointOf(t, a); ep != "10.0.0.1:10001" {
		t.Fatalf("B sees A at %s, want 10.0.0.1:10001", ep)
	}
	a.run(t, "ip", "addr", "add", "10.0.0.10/24", "dev", "veth1")
	a.run(t, "ip", "addr", "del", "10.0.0.1/24", "dev", "veth1")
	a.ping(t, b.v4, "-W", "2")
	if ep := b.endpointOf(t, a); ep != "10.0.0.10:10001" {
		t.Fatalf("after 10.0.0.1 went away B sees A at %s, want 10.0.0.10:10001", ep)
	}

	a.wg(t, "set", a.ifname, "peer", b.pub(), "endpoint", "[fd00:aa::2]:10002")
	a.ping(t, b.v4)
	if ep := b.endpointOf(t, a); ep != "[fd00:aa::1]:10001" {
		t.Fatalf("B sees A at %s, want [fd00:aa::1]:10001", ep)
	}
	a.run(t, "ip", "addr", "add", "fd00:aa::10/96", "dev", "veth1", "nodad")
	a.run(t, "ip", "addr", "del", "fd00:aa::1/96", "dev", "veth1")
	a.ping(t, b.v4, "-W", "2")
	if ep := b.endpointOf(t, a); ep != "[fd00:aa::10]:10001" {
		t.Fatalf("after fd00:aa::1 went away B sees A at %s, want [fd00:aa::10]:10001", ep)
	}
}

// TestStickySourceRepliesFromDestination: A holds two addresses of each
// family on one interface; whichever of them B sends to, A answers from
// that one, so B's endpoint for A stays what B was told (were A to answer
// from its other address, B would roam there). An address on another
// interface (loopback) than the one the packets arrive on and leave by is
// answered from too.
func TestStickySourceRepliesFromDestination(t *testing.T) {
	a, b := stickyPair(t)
	for _, addr := range []string{"10.0.0.1/24", "10.0.0.2/24", "fd00:aa::1/96", "fd00:aa::2/96"} {
		a.run(t, "ip", "addr", "add", addr, "dev", "veth1", "nodad")
	}
	b.run(t, "ip", "addr", "add", "10.0.0.3/24", "dev", "veth2")
	b.run(t, "ip", "addr", "add", "fd00:aa::3/96", "dev", "veth2", "nodad")
	for _, ep := range []string{"10.0.0.1:10001", "[fd00:aa::1]:10001", "10.0.0.2:10001", "[fd00:aa::2]:10001"} {
		b.wg(t, "set", b.ifname, "peer", a.pub(), "endpoint", ep)
		b.ping(t, a.v4)
		if got := b.endpointOf(t, a); got != ep {
			t.Fatalf("B sent to A at %s and now sees A at %s: A answered from another address", ep, got)
		}
	}

	// The self-test uses a dummy interface; CI kernels may lack the
	// module, and loopback is just as much another interface.
	a.run(t, "ip", "link", "set", "lo", "up")
	a.run(t, "ip", "addr", "add", "10.50.0.1/32", "dev", "lo")
	b.run(t, "ip", "route", "add", "10.50.0.0/24", "dev", "veth2")
	b.wg(t, "set", b.ifname, "peer", a.pub(), "endpoint", "10.50.0.1:10001")
	b.ping(t, a.v4)
	if got := b.endpointOf(t, a); got != "10.50.0.1:10001" {
		t.Fatalf("B sent to A's loopback address and now sees A at %s", got)
	}
}

// TestStickySourceFollowsRoute: A's sticky source belongs to the
// interface its route to B used; when a better route through another
// interface (with its own preferred source) appears, A follows the route
// and its source changes with it, rather than keeping the old source on
// the new interface. The daemon learns of the route from netlink and
// drops its sticky sources once the burst of messages has been quiet for
// conn's sourceQuiet (15 ms, at most ten times that): unlike the kernel's
// route cache, not before the next packet, so the test pings until B
// sees the new source, for at most 3 s (a daemon that never follows the
// route fails).
func TestStickySourceFollowsRoute(t *testing.T) {
	a, b := stickyPair(t)
	netns.Veth(t, a.ns, "veth3", b.ns, "veth4")
	a.run(t, "ip", "addr", "add", "10.0.0.1/24", "dev", "veth1")
	b.run(t, "ip", "addr", "add", "10.0.0.2/24", "dev", "veth2")
	a.run(t, "ip", "addr", "add", "10.0.0.3/24", "dev", "veth3")
	a.run(t, "ip", "route", "flush", "dev", "veth1")
	a.run(t, "ip", "route", "flush", "dev", "veth3")
	a.run(t, "ip", "route", "add", "10.0.0.0/24", "dev", "veth1", "src", "10.0.0.1", "metric", "2")
	a.wg(t, "set", a.ifname, "peer", b.pub(), "endpoint", "10.0.0.2:10002")
	a.ping(t, b.v4)
	if got := b.endpointOf(t, a); got != "10.0.0.1:10001" {
		t.Fatalf("B sees A at %s, want 10.0.0.1:10001", got)
	}
	a.run(t, "ip", "route", "add", "10.0.0.0/24", "dev", "veth3", "src", "10.0.0.3", "metric", "1")
	for _, s := range []*side{a, b} {
		s.run(t, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=0")
	}
	a.run(t, "sysctl", "-qw", "net.ipv4.conf.veth1.rp_filter=0")
	b.run(t, "sysctl", "-qw", "net.ipv4.conf.veth4.rp_filter=0")
	deadline := time.Now().Add(3 * time.Second)
	for pings := 1; ; pings++ {
		a.ping(t, b.v4, "-W", "2")
		got := b.endpointOf(t, a)
		if got == "10.0.0.3:10001" {
			t.Logf("B saw the new source after %d ping(s)", pings)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("3 s after the route through veth3 appeared B still sees A at %s, want 10.0.0.3:10001", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// floodPing sends count flood pings from s to addr and fails unless every
// one is answered.
func floodPing(t *testing.T, s *side, addr string, count int) {
	t.Helper()
	out, err := netns.Try(s.ns, nil, "ping", "-f", "-c", strconv.Itoa(count), "-W", "1", addr)
	if want := fmt.Sprintf("%d packets transmitted, %d received", count, count); err != nil || !strings.Contains(out, want) {
		t.Fatalf("flood ping %s: err %v, want %q in:\n%s", addr, err, want, out)
	}
}

// TestPolicyRoutedDefaultRoute is the self-test's wg-quick(8)-style
// policy routing, set up by hand: A's default routes (both families) are
// in table 51820 and point into the tunnel, a rule sends every packet
// without A's fwmark there, and a second rule lets the main table answer
// for anything but its own default routes (suppress_prefixlength 0). The
// main table keeps default routes of both families out of the veth (the
// IPv6 one to a gateway that does not exist), which must catch neither
// the tunnel's traffic nor, thanks to the mark, the daemon's datagrams
// once they are in the tunnel. B's tunnel addresses outside the tunnel's
// subnet (192.168.99.7, abab::1111) are reached only through the default
// routes; 100 flood pings each way (the self-test floods to shake out
// route reference counting bugs).
//
// The same rules made by wg-quick itself carry traffic in
// TestWGQuickUpDown, and `wirelane up` makes them identically
// (cmd/wirelane TestSameStateAsWGQuick).
func TestPolicyRoutedDefaultRoute(t *testing.T) {
	a, b := stickyPair(t)
	a.run(t, "ip", "addr", "add", "10.9.0.1/24", "dev", "veth1")
	b.run(t, "ip", "addr", "add", "10.9.0.2/24", "dev", "veth2")
	a.run(t, "ip", "-4", "route", "add", "default", "via", "10.9.0.2")
	a.run(t, "ip", "-6", "addr", "add", "fc00::9/96", "dev", "veth1", "nodad")
	a.run(t, "ip", "-6", "route", "add", "default", "via", "fc00::1")
	b.run(t, "ip", "-4", "addr", "add", "192.168.99.7/32", "dev", b.ifname)
	b.run(t, "ip", "-6", "addr", "add", "abab::1111/128", "dev", b.ifname, "nodad")
	b.wg(t, "set", b.ifname, "peer", a.pub(), "endpoint", "10.9.0.1:10001")
	a.wg(t, "set", a.ifname, "fwmark", "51820", "peer", b.pub(), "endpoint", "10.9.0.2:10002",
		"allowed-ips", "192.168.99.7/32,abab::1111/128")
	for _, fam := range []string{"-4", "-6"} {
		a.run(t, "ip", fam, "route", "add", "default", "dev", a.ifname, "table", "51820")
		a.run(t, "ip", fam, "rule", "add", "not", "fwmark", "51820", "table", "51820")
		a.run(t, "ip", fam, "rule", "add", "table", "main", "suppress_prefixlength", "0")
	}
	a.run(t, "sysctl", "-qw", "net.ipv4.conf.veth1.rp_filter=0")
	for _, addr := range []string{"192.168.99.7", "abab::1111"} {
		if r := a.run(t, "ip", "route", "get", addr); !strings.Contains(r, "dev "+a.ifname) {
			t.Fatalf("A routes %s by %q, want its tunnel", addr, r)
		}
	}
	floodPing(t, a, "192.168.99.7", 100)
	floodPing(t, a, "abab::1111", 100)
	rx, tx := transfer(t, a, b)
	if rx < 200*84 || tx < 200*84 {
		t.Fatalf("A's transfer for B: %d received, %d sent: the pings did not go through the tunnel", rx, tx)
	}
}

// TestOnionRouting: one interface's peers nested three deep. A's device
// has three peers, all in B's namespace: B (the outer tunnel, over the
// veth), C (endpoint: an address inside B's tunnel) and D (endpoint: an
// address inside C's tunnel). A ping to D is sealed for D, its datagram
// routed back into A's own interface and sealed for C, that datagram
// again for B: three layers of WireGuard from one device. Then D's
// endpoint is pointed inside D's own allowed IPs, a loop within the one
// device: pings fail, the daemon lives, and once D is removed the outer
// layers work again.
func TestOnionRouting(t *testing.T) {
	a, b := stickyPair(t)
	a.run(t, "ip", "addr", "add", "10.0.0.1/24", "dev", "veth1")
	b.run(t, "ip", "addr", "add", "10.0.0.2/24", "dev", "veth2")
	a.wg(t, "set", a.ifname, "peer", b.pub(), "endpoint", "10.0.0.2:10002")
	a.ping(t, b.v4)

	c := newSide(t, b.im, b.ns, b.ns, 20005, "192.168.242.2", "fd00:242::2")
	d := newSide(t, b.im, b.ns, b.ns, 20006, "192.168.243.2", "fd00:243::2")
	c.up(t)
	d.up(t)
	a.run(t, "ip", "addr", "add", "192.168.242.1/24", "dev", a.ifname)
	a.run(t, "ip", "addr", "add", "192.168.243.1/24", "dev", a.ifname)
	c.wg(t, "set", c.ifname, "peer", a.pub(), "allowed-ips", "192.168.242.1/32")
	d.wg(t, "set", d.ifname, "peer", a.pub(), "allowed-ips", "192.168.243.1/32")
	a.wg(t, "set", a.ifname, "peer", c.pub(), "allowed-ips", "192.168.242.2/32", "endpoint", b.v4+":20005")
	a.wg(t, "set", a.ifname, "peer", d.pub(), "allowed-ips", "192.168.243.2/32", "endpoint", c.v4+":20006")
	a.ping(t, c.v4)
	a.ping(t, d.v4)
	handshakeDone(t, a, d)
	// D saw A's datagrams come out of C's tunnel, C out of B's.
	if ep := d.endpointOf(t, a); ep != "192.168.242.1:10001" {
		t.Fatalf("D sees A at %s, want A's address in C's tunnel", ep)
	}
	if ep := c.endpointOf(t, a); ep != "192.168.241.1:10001" {
		t.Fatalf("C sees A at %s, want A's address in B's tunnel", ep)
	}
	_, cTx := transfer(t, a, c)
	_, bTx := transfer(t, a, b)
	_, dTx := transfer(t, a, d)
	if !(bTx > cTx && cTx > dTx && dTx > 0) {
		t.Fatalf("A sent %d to B, %d to C, %d to D: want each outer layer to carry more than the one inside it", bTx, cTx, dTx)
	}

	t0 := time.Now()
	a.wg(t, "set", a.ifname, "peer", d.pub(), "endpoint", d.v4+":20006")
	a.pingFails(t, d.v4)
	defer func() {
		t.Logf("outer layers answered %v after the loop began (D removed after the first failed ping)", time.Since(t0))
	}()
	if _, err := netns.Try(nil, nil, "wg", "show", a.ifname); err != nil {
		t.Fatalf("A's daemon did not survive the loop: %v", err)
	}
	// Left alone, the loop starves the outer layers for about 15 s here
	// before it dies out; removing the peer ends it at once.
	a.wg(t, "set", a.ifname, "peer", d.pub(), "remove")
	netns.Eventually(t, 20*time.Second, "ping through the outer layers after the loop", func() error {
		if _, err := netns.Try(a.ns, nil, "ping", "-c", "1", "-W", "1", c.v4); err != nil {
			return err
		}
		_, err := netns.Try(a.ns, nil, "ping", "-c", "1", "-W", "1", b.v4)
		return err
	})
}

// TestBoundToDeviceAndMarkRerouting: a socket bound to the tunnel's
// interface (ping -I, SO_BINDTODEVICE) gets through, and so does all
// traffic, bound or not, when a mangle rule marks every packet leaving
// A's namespace (the daemon's datagrams too) and the kernel has to
// route them again after the mark changed.
func TestBoundToDeviceAndMarkRerouting(t *testing.T) {
	need(t, implWirelane, "iptables")
	a, b := stickyPair(t)
	a.run(t, "ip", "addr", "add", "10.0.0.1/24", "dev", "veth1")
	b.run(t, "ip", "addr", "add", "10.0.0.2/24", "dev", "veth2")
	a.wg(t, "set", a.ifname, "peer", b.pub(), "endpoint", "10.0.0.2:10002")
	a.ping(t, b.v4, "-I", a.ifname)
	a.run(t, "iptables", "-t", "mangle", "-I", "OUTPUT", "-j", "MARK", "--set-xmark", "1")
	a.ping(t, b.v4)
	a.ping(t, b.v4, "-I", a.ifname)
	a.ping(t, b.v6, "-I", a.ifname)
	a.run(t, "iptables", "-t", "mangle", "-D", "OUTPUT", "-j", "MARK", "--set-xmark", "1")
}
