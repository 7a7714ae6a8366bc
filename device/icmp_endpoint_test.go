package device

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
)

// TestUnreachableNoEndpoint: a packet routed to a peer that has no
// endpoint (none configured, none learnt yet) is dropped and answered with
// an ICMP host unreachable (ICMPv6 address unreachable), as the kernel's
// WireGuard does (-EDESTADDRREQ in wg_xmit, then the same error as for no
// peer), instead of waiting staged for a handshake that cannot start. Once
// the peer's own handshake gives it an endpoint, the same packet goes
// through. Both families, through two real devices on the in-memory network.
func TestUnreachableNoEndpoint(t *testing.T) {
	p := newPair(t, pairOpts{aOnly: true}) // B does not know A's endpoint
	for _, tc := range []struct {
		name     string
		src, dst netip.Addr
	}{{"IPv4", ipB4, ipA4}, {"IPv6", ipB6, ipA6}} {
		t.Run(tc.name, func(t *testing.T) {
			in := ipPacket(tc.src, tc.dst, []byte("to a peer without endpoint"))
			if err := p.tb.Inject(in); err != nil {
				t.Fatal(err)
			}
			select {
			case m := <-p.tb.Outbound():
				checkUnreachable(t, m, tc.dst, tc.src, in)
			case <-time.After(5 * time.Second):
				t.Fatal("no ICMP error for a packet to a peer without endpoint")
			}
		})
	}
	if n := p.b.Counters().Dropped[DropNoEndpoint]; n != 2 {
		t.Errorf("no_endpoint drops: %d, want 2", n)
	}
	if n := p.b.Counters().Dropped[DropNoPeer]; n != 0 {
		t.Errorf("no_peer drops: %d, want 0 (the peer exists)", n)
	}
	// Nothing was staged: A has not received anything.
	p.expectNone(p.ta, 100*time.Millisecond)

	// A's handshake gives B the endpoint; B's packets then go through.
	p.send(p.ta, p.tb, ipA4, ipB4, "a first")
	p.send(p.tb, p.ta, ipB4, ipA4, "b now has an endpoint")
	p.send(p.tb, p.ta, ipB6, ipA6, "b now has an endpoint, v6")
	if n := p.b.Counters().Dropped[DropNoEndpoint]; n != 2 {
		t.Errorf("no_endpoint drops after the handshake: %d, want still 2", n)
	}
}

// TestUnreachableNoEndpointRateLimited: the errors for a peer without an
// endpoint share the device's ICMP budget (icmpBurst at once): a burst of
// packets gets at most that many errors, and every packet is counted.
func TestUnreachableNoEndpointRateLimited(t *testing.T) {
	p := newPair(t, pairOpts{aOnly: true})
	const n = 400
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := p.tb.Inject(ipPacket(ipB4, ipA4, []byte{byte(i)})); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "every packet counted", func() bool { return p.b.Counters().Dropped[DropNoEndpoint] == n })
	elapsed := time.Since(start)
	got := 0
	for done := false; !done; {
		select {
		case <-p.tb.Outbound():
			got++
		case <-time.After(200 * time.Millisecond):
			done = true
		}
	}
	// The burst plus what refills while the packets are read (1000/s).
	limit := icmpBurst + int(elapsed.Seconds()*icmpPerSecond) + 1
	if got == 0 || got > limit {
		t.Fatalf("%d ICMP errors for %d packets read in %v, want between 1 and %d (burst %d, %d/s)", got, n, elapsed, limit, icmpBurst, icmpPerSecond)
	}
}

// checkUnreachable checks that m is the ICMP (ICMPv6) unreachable error
// from src to dst quoting in: host unreachable (type 3 code 1) for IPv4,
// address unreachable (type 1 code 3) for IPv6, with valid checksums.
func checkUnreachable(t *testing.T, m []byte, src, dst netip.Addr, in []byte) {
	t.Helper()
	if src.Is4() {
		if len(m) != 28+len(in) || m[9] != 1 || inetsum.Checksum(m[:20]) != 0 || inetsum.Checksum(m[20:]) != 0 {
			t.Fatalf("not a well-formed ICMP error: % x", m[:min(len(m), 28)])
		}
		if m[20] != 3 || m[21] != 1 {
			t.Fatalf("ICMP type %d code %d, want 3 (destination unreachable) code 1 (host unreachable)", m[20], m[21])
		}
		if netip.AddrFrom4([4]byte(m[12:16])) != src || netip.AddrFrom4([4]byte(m[16:20])) != dst {
			t.Fatalf("addresses % x", m[12:20])
		}
		if string(m[28:]) != string(in) {
			t.Fatal("the offending packet is not quoted")
		}
		return
	}
	if len(m) != 48+len(in) || m[6] != 58 {
		t.Fatalf("not an ICMPv6 error: % x", m[:min(len(m), 48)])
	}
	if m[40] != 1 || m[41] != 3 {
		t.Fatalf("ICMPv6 type %d code %d, want 1 (destination unreachable) code 3 (address unreachable)", m[40], m[41])
	}
	if netip.AddrFrom16([16]byte(m[8:24])) != src || netip.AddrFrom16([16]byte(m[24:40])) != dst {
		t.Fatal("wrong addresses")
	}
	if string(m[48:]) != string(in) {
		t.Fatal("the offending packet is not quoted")
	}
}
