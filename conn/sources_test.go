package conn

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// hookCounter registers a device-like hook: clear the cache's sticky source.
type hookCounter struct {
	rounds, rebuilds atomic.Int64
}

func (h *hookCounter) register(b *StdBind, c *RouteCache) {
	b.OnSourceInvalid(func() {
		h.rounds.Add(1)
		if c.ClearSrc() {
			h.rebuilds.Add(1)
		}
	})
}

// expect waits for the wanted rebuilds, then for the settle time, and
// checks the counts. Rebuilds must match exactly; hook rounds may exceed
// the wanted count by slack (a loaded machine can delay part of a netlink
// burst past the quiet period: that costs a round, never a rebuild, because
// the source is already cleared).
func (h *hookCounter) expect(t *testing.T, what string, rounds, rebuilds int64) {
	h.expectSlack(t, what, rounds, rebuilds, 0)
}

func (h *hookCounter) expectSlack(t *testing.T, what string, rounds, rebuilds, slack int64) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for h.rebuilds.Load() < rebuilds && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(12 * sourceQuiet)
	if r, rb := h.rounds.Load(), h.rebuilds.Load(); r < rounds || r > rounds+slack || rb != rebuilds {
		t.Fatalf("%s: %d hook rounds and %d rebuilds, want %d (+%d) and %d", what, r, rb, rounds, slack, rebuilds)
	}
	h.rounds.Store(rounds) // later steps count from the wanted value
}

func TestSourceInvalidCoalescesBursts(t *testing.T) {
	b, _, port := openBind(t, Options{DisableSourceWatch: true})
	var c RouteCache
	arm := func() { c.Set(Endpoint{Dst: loop4(port), Src: netip.MustParseAddr("127.0.0.1"), SrcIfindex: 1}) }
	arm()
	var h hookCounter
	h.register(b, &c)
	for i := 0; i < 1000; i++ {
		b.inval.signal()
	}
	h.expect(t, "burst of 1000 signals", 1, 1)
	b.inval.signal()
	h.expect(t, "signal with no sticky source left", 2, 1)
	arm()
	b.inval.signal()
	h.expect(t, "second event", 3, 2)
}

func TestSourceHookRemoval(t *testing.T) {
	b, _, _ := openBind(t, Options{DisableSourceWatch: true})
	var n atomic.Int64
	remove := b.OnSourceInvalid(func() { n.Add(1) })
	remove()
	b.inval.signal()
	time.Sleep(12 * sourceQuiet)
	if n.Load() != 0 {
		t.Fatal("removed hook ran")
	}
}

// TestSourceWatchOneRebuildPerEvent changes addresses and routes in a
// private network namespace and checks that each change, which the kernel
// announces in several netlink messages, rebuilds the route once.
func TestSourceWatchOneRebuildPerEvent(t *testing.T) {
	lo := enterNetns(t)
	b, _, port := openBind(t, Options{DisableGRO: true})
	var c RouteCache
	arm := func() { c.Set(Endpoint{Dst: loop4(port), Src: netip.MustParseAddr("127.0.0.1"), SrcIfindex: 1}) }
	var h hookCounter
	h.register(b, &c)
	time.Sleep(12 * sourceQuiet) // let start-up noise pass
	h.rounds.Store(0)
	h.rebuilds.Store(0)

	addr, _ := netlink.ParseAddr("10.99.0.1/32")
	addr6, _ := netlink.ParseAddr("fd00:99::1/128")
	addr6.Flags = unix.IFA_F_NODAD
	route := &netlink.Route{LinkIndex: lo.Attrs().Index, Dst: &net.IPNet{IP: net.IPv4(10, 98, 0, 0), Mask: net.CIDRMask(24, 32)}}
	steps := []struct {
		what string
		do   func() error
	}{
		{"address added", func() error { return netlink.AddrAdd(lo, addr) }},
		{"address removed", func() error { return netlink.AddrDel(lo, addr) }},
		{"route added", func() error { return netlink.RouteAdd(route) }},
		{"route removed", func() error { return netlink.RouteDel(route) }},
		{"v6 address added", func() error { return netlink.AddrAdd(lo, addr6) }},
		{"v6 address removed", func() error { return netlink.AddrDel(lo, addr6) }},
	}
	for i, s := range steps {
		arm()
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		h.expectSlack(t, s.what, int64(i+1), int64(i+1), 1)
	}
	// With no sticky source left, an event costs no rebuild.
	if err := netlink.AddrAdd(lo, addr); err != nil {
		t.Fatal(err)
	}
	h.expectSlack(t, "event without a sticky source", int64(len(steps)+1), int64(len(steps)), 1)
}

func nlmsg(typ uint16, payload int) []byte {
	l := unix.NLMSG_HDRLEN + payload
	b := make([]byte, (l+3)&^3)
	binary.NativeEndian.PutUint32(b[0:4], uint32(l))
	binary.NativeEndian.PutUint16(b[4:6], typ)
	return b
}

func TestInvalidatesSources(t *testing.T) {
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []byte
		want bool
	}{
		{"empty", nil, false},
		{"new address alone", nlmsg(unix.RTM_NEWADDR, 8), false},
		{"address removed", nlmsg(unix.RTM_DELADDR, 8), true},
		{"route added after an address", cat(nlmsg(unix.RTM_NEWADDR, 5), nlmsg(unix.RTM_NEWROUTE, 12)), true},
		{"route removed", nlmsg(unix.RTM_DELROUTE, 0), true},
		{"link change", nlmsg(unix.RTM_NEWLINK, 16), false},
		{"length past the end", func() []byte { b := nlmsg(unix.RTM_DELADDR, 4); binary.NativeEndian.PutUint32(b, 99); return b }(), false},
		{"length below the header", func() []byte { b := nlmsg(unix.RTM_DELADDR, 4); binary.NativeEndian.PutUint32(b, 3); return b }(), false},
		{"truncated header", nlmsg(unix.RTM_DELADDR, 0)[:10], false},
	} {
		if got := invalidatesSources(tc.in); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
