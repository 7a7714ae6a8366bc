package fleet

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// randomPrefix is a prefix in a small space (so that many overlap): IPv4
// within 10.0.0.0/12 or IPv6 within fd00::/20, of any length from 8.
func randomPrefix(r *rand.Rand) netip.Prefix {
	if r.IntN(4) == 0 {
		var a [16]byte
		a[0], a[1], a[2] = 0xfd, 0, byte(r.IntN(16))
		a[3] = byte(r.IntN(256))
		return netip.PrefixFrom(netip.AddrFrom16(a), 8+r.IntN(121)).Masked()
	}
	a := [4]byte{10, byte(r.IntN(16)), byte(r.IntN(256)), byte(r.IntN(256))}
	return netip.PrefixFrom(netip.AddrFrom4(a), 8+r.IntN(25)).Masked()
}

// TestNetIndexFindsEveryOverlap: as networks are added, overlap answers
// as a scan of all of them does, and what it returns does overlap.
func TestNetIndexFindsEveryOverlap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	x := newNetIndex()
	var all []netip.Prefix
	var protected addrIndex
	var addrs []netip.Addr
	for i := range 3000 {
		p := randomPrefix(r)
		want := false
		for _, q := range all {
			want = want || q.Overlaps(p)
		}
		got, ok := x.overlap(p)
		if ok != want || ok && !got.pfx.Overlaps(p) {
			t.Fatalf("after %d networks, overlap(%v) = %v, %v; a scan says %v", len(all), p, got.pfx, ok, want)
		}
		wantIn := false
		for _, a := range addrs {
			wantIn = wantIn || p.Contains(a)
		}
		if g, ok := protected.in(p); ok != wantIn || ok && !p.Contains(g.addr) {
			t.Fatalf("in(%v) = %v, %v; a scan says %v", p, g.addr, ok, wantIn)
		}
		if i%3 == 0 || !ok {
			x.add(p, "n")
			all = append(all, p)
		}
		a := randomPrefix(r).Addr()
		protected.add(a, "a")
		addrs = append(addrs, a)
	}
}
