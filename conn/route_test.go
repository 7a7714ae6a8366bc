package conn

import (
	"net/netip"
	"sync"
	"testing"
)

func ep4(s string) Endpoint { return Endpoint{Dst: netip.MustParseAddrPort(s)} }

func TestSetPublishesOnlyOnChange(t *testing.T) {
	var c RouteCache
	if c.Borrow() != nil {
		t.Fatal("empty cache has a route")
	}
	r1, changed := c.Set(ep4("192.0.2.1:51820"))
	if !changed || r1.Gen != 1 {
		t.Fatalf("first set: changed %v gen %d", changed, r1.Gen)
	}
	// 4in6 is the same place as plain IPv4.
	r2, changed := c.Set(Endpoint{Dst: netip.MustParseAddrPort("[::ffff:192.0.2.1]:51820")})
	if changed || r2 != r1 {
		t.Fatalf("same endpoint published again: changed %v gen %d", changed, r2.Gen)
	}
	r3, changed := c.Set(Endpoint{Dst: r1.Endpoint.Dst, Src: netip.MustParseAddr("198.51.100.1"), SrcIfindex: 3})
	if !changed || r3.Gen != 2 || r3.Control() == nil {
		t.Fatalf("new source: changed %v gen %d ctrl %v", changed, r3.Gen, r3.Control())
	}
	if r1.Endpoint.Src.IsValid() || r1.Control() != nil {
		t.Fatal("publishing a new route modified the old one")
	}
	if !c.ClearSrc() || c.ClearSrc() {
		t.Fatal("ClearSrc must publish once, then not again")
	}
	if r := c.Borrow(); r.Gen != 3 || r.Control() != nil || r.Endpoint.Dst != r1.Endpoint.Dst {
		t.Fatalf("after ClearSrc: %+v", r.Endpoint)
	}
	c.Clear()
	if c.Borrow() != nil {
		t.Fatal("route after Clear")
	}
	if _, ok := c.Endpoint(); ok {
		t.Fatal("endpoint after Clear")
	}
	if r, _ := c.Set(ep4("192.0.2.1:1")); r.Gen != 5 {
		t.Fatalf("generation went from 4 to %d", r.Gen)
	}
}

func TestRouteFamilies(t *testing.T) {
	for _, tc := range []struct {
		ep   Endpoint
		v6   bool
		ctrl bool
	}{
		{ep4("192.0.2.1:1"), false, false},
		{Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:1"), Src: netip.MustParseAddr("192.0.2.2")}, false, true},
		{Endpoint{Dst: netip.MustParseAddrPort("192.0.2.1:1"), Src: netip.MustParseAddr("2001:db8::1")}, false, false},
		{Endpoint{Dst: netip.MustParseAddrPort("[2001:db8::1]:1"), Src: netip.MustParseAddr("2001:db8::2")}, true, true},
		{Endpoint{Dst: netip.MustParseAddrPort("[::ffff:192.0.2.1]:1")}, false, false},
	} {
		r := NewRoute(tc.ep, 1)
		if r.IsV6() != tc.v6 || (r.Control() != nil) != tc.ctrl {
			t.Errorf("%v: v6 %v ctrl %v, want %v %v", tc.ep, r.IsV6(), r.Control() != nil, tc.v6, tc.ctrl)
		}
		if got := r.UDPAddr().AddrPort(); got != normalize(tc.ep.Dst) {
			t.Errorf("%v: UDPAddr %v", tc.ep, got)
		}
		b := (*[28]byte)(ptrOf(&r.sa))[:r.saLen]
		if got, ok := parseSockaddr(b); !ok || got != normalize(tc.ep.Dst) {
			t.Errorf("%v: raw sockaddr reads back as %v %v", tc.ep, got, ok)
		}
	}
}

func TestRoamPublishesAtMostOncePerBatch(t *testing.T) {
	var c RouteCache
	a, b, d := ep4("192.0.2.1:1"), ep4("192.0.2.2:2"), ep4("192.0.2.3:3")
	c.Set(a)
	if c.Roam([]Endpoint{a, a, a}, nil) {
		t.Fatal("unchanged batch published")
	}
	if c.Borrow().Gen != 1 {
		t.Fatal("generation moved without a change")
	}
	// Unauthenticated datagrams must not move the endpoint.
	if c.Roam([]Endpoint{b, d}, []bool{false, false}) || c.Roam([]Endpoint{b}, []bool{}) {
		t.Fatal("unauthenticated batch published")
	}
	// Several new addresses in one batch: one publication, the last
	// authenticated one wins.
	if !c.Roam([]Endpoint{b, d, b, a, d, b}, []bool{true, true, true, true, true, false}) {
		t.Fatal("roaming batch did not publish")
	}
	if r := c.Borrow(); r.Gen != 2 || r.Endpoint != d {
		t.Fatalf("after roaming: gen %d endpoint %v, want gen 2 %v", r.Gen, r.Endpoint, d)
	}
	// A new sticky source alone is a change too.
	ds := d
	ds.Src = netip.MustParseAddr("198.51.100.9")
	if !c.Roam([]Endpoint{ds}, nil) || c.Borrow().Gen != 3 {
		t.Fatal("source change did not publish once")
	}
	if c.Roam(nil, nil) || c.Borrow().Gen != 3 {
		t.Fatal("empty batch published")
	}
}

func TestRoamUnchangedTakesNoLock(t *testing.T) {
	var c RouteCache
	a := ep4("192.0.2.1:1")
	c.Set(a)
	unlock := c.LockWriter()
	defer unlock()
	done := make(chan bool)
	go func() { done <- c.Roam([]Endpoint{a, a}, nil) }()
	if <-done {
		t.Fatal("unchanged roam published")
	}
}

func TestRoamConcurrent(t *testing.T) {
	var c RouteCache
	eps := []Endpoint{ep4("192.0.2.1:1"), ep4("192.0.2.2:2")}
	var wg sync.WaitGroup
	var mu sync.Mutex
	published := 0
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if c.Roam(eps[(g+i)%2:(g+i)%2+1], nil) {
					mu.Lock()
					published++
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	if got := c.Borrow().Gen; got != uint64(published) {
		t.Fatalf("generation %d after %d publications", got, published)
	}
}
