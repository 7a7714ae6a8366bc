package e2e

import (
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestICMPUnreachableNoEndpoint is the self-test's other ICMP error: a
// ping routed to a peer that has no endpoint (configured without one, and
// never heard from) gets "Destination Host Unreachable" (ICMPv6: "Address
// unreachable") at once, as the kernel answers -EDESTADDRREQ in wg_xmit,
// rather than vanishing. Once the endpoint is set the pings go through.
func TestICMPUnreachableNoEndpoint(t *testing.T) {
	im := pairImpl(t)
	ns0, ns1, ns2 := netns.New(t, "wl0n"), netns.New(t, "wl1n"), netns.New(t, "wl2n")
	a := newSide(t, im, ns1, ns0, 10001, "192.168.241.1", "fd00::1")
	b := newSide(t, im, ns2, ns0, 10002, "192.168.241.2", "fd00::2")
	a.up(t)
	b.up(t)
	a.addPeer(t, b, "") // no endpoint
	b.addPeer(t, a, "")
	for _, c := range []struct{ addr, want string }{
		{b.v4, "From " + b.v4 + " icmp_seq=1 Destination Host Unreachable"},
		{b.v6, "From " + b.v6 + " icmp_seq=1 Destination unreachable: Address unreachable"},
	} {
		out, err := netns.Try(a.ns, nil, "ping", "-c", "1", "-W", "2", c.addr)
		if err == nil || !strings.Contains(out, c.want) {
			t.Fatalf("ping %s (peer without endpoint): err %v, want %q in:\n%s", c.addr, err, c.want, out)
		}
	}
	a.wg(t, "set", a.ifname, "peer", b.pub(), "endpoint", "127.0.0.1:10002")
	a.ping(t, b.v4)
	a.ping(t, b.v6)
	b.ping(t, a.v4) // B learnt A's endpoint from the handshake
}
