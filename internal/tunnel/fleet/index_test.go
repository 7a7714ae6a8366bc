package fleet

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
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

// TestDecodeCacheDecodesOnlyWhatChanged: a record whose value is the one
// decoded last comes from the cache; a new value is decoded; a record
// gone from the set is dropped.
func TestDecodeCacheDecodesOnlyWhatChanged(t *testing.T) {
	c := newDecodeCache()
	a := store.KV{Key: "/t/sites/a", Value: []byte(`{"v":1,"name":"a","public_key":"` + testKeyA + `","networks":["10.1.0.0/16"]}`)}
	r1, err := c.decode(a)
	if err != nil {
		t.Fatal(err)
	}
	c.sweep()
	if r2, _ := c.decode(a); r2 != r1 {
		t.Error("the same value was decoded again")
	}
	c.sweep()
	a.Value = []byte(`{"v":1,"name":"a","public_key":"` + testKeyA + `","networks":["10.2.0.0/16"]}`)
	if r3, _ := c.decode(a); r3 == r1 || r3.Networks[0].String() != "10.2.0.0/16" {
		t.Errorf("a new value gave %+v", r3)
	}
	c.sweep()
	c.sweep() // a resolve that did not see a
	if len(c.m) != 0 {
		t.Errorf("%d records kept after they went", len(c.m))
	}
}
