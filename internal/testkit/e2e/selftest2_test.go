package e2e

// Further behaviours of the kernel's WireGuard self-test (netns.sh), in
// our own words, against wirelaned: ICMP errors, source-address
// stickiness, wg-quick-style policy routing, onion routing.

import (
	"strings"
	"testing"

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
