package conn

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"
)

// Many peers on one socket: SendEach with a route per datagram, three
// peers interleaved in runs (which segmented messages must never mix),
// delivers every datagram to its own peer, once, in order.
func TestSendEachManyPeersOneSocket(t *testing.T) {
	srv, _, _ := openBind(t, Options{Addr: netip.MustParseAddr("127.0.0.1"), DisableGRO: true, DisableSourceWatch: true})
	const peers = 3
	var routes [peers]RouteCache
	var chans [peers]<-chan received
	for i := range peers {
		_, fns, port := openBind(t, Options{DisableGSO: true, DisableGRO: true, DisableSourceWatch: true})
		chans[i] = startReceivers(t, fns, 2048)
		routes[i].Set(Endpoint{Dst: loop4(port)})
	}
	var bufs [][]byte
	var rs []*Route
	want := [peers][]uint32{}
	for i := 0; i < IdealBatchSize; i++ {
		p := (i / 5) % peers // runs of five per peer
		size := 1000
		if i%11 == 10 {
			size = 200 // a shorter one ends a run
		}
		b := make([]byte, size)
		binary.BigEndian.PutUint32(b[0:4], uint32(p))
		binary.BigEndian.PutUint32(b[4:8], uint32(i))
		bufs = append(bufs, b)
		rs = append(rs, routes[p].Borrow())
		want[p] = append(want[p], uint32(i))
	}
	if err := srv.SendEach(bufs, rs); err != nil {
		t.Fatal(err)
	}
	for p := range peers {
		got := collect(t, chans[p], len(want[p]), 5*time.Second)
		for k, g := range got {
			if binary.BigEndian.Uint32(g.data[0:4]) != uint32(p) || binary.BigEndian.Uint32(g.data[4:8]) != want[p][k] {
				t.Fatalf("peer %d datagram %d: got peer %d seq %d, want seq %d", p, k,
					binary.BigEndian.Uint32(g.data[0:4]), binary.BigEndian.Uint32(g.data[4:8]), want[p][k])
			}
			if g.ep.Dst != srv.LocalAddr() {
				t.Fatalf("peer %d: datagram from %v, want %v", p, g.ep.Dst, srv.LocalAddr())
			}
		}
		select {
		case extra := <-chans[p]:
			t.Fatalf("peer %d: extra datagram %d", p, binary.BigEndian.Uint32(extra.data[4:8]))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// SendEach cuts a batch with both families into one send per family run,
// each on its own socket.
func TestSendEachMixedFamilies(t *testing.T) {
	srv, _, _ := openBind(t, Options{DisableSourceWatch: true})
	needIPv6(t, srv)
	_, fns, port := openBind(t, Options{DisableGSO: true, DisableGRO: true, DisableSourceWatch: true})
	ch := startReceivers(t, fns, 2048)
	r4, r6 := NewRoute(Endpoint{Dst: loop4(port)}, 1), NewRoute(Endpoint{Dst: loop6(port)}, 1)
	bufs := stamped(12, 500, 9)
	var rs []*Route
	for i := range bufs {
		if (i/3)%2 == 0 {
			rs = append(rs, r4)
		} else {
			rs = append(rs, r6)
		}
	}
	if err := srv.SendEach(bufs, rs); err != nil {
		t.Fatal(err)
	}
	got := collect(t, ch, len(bufs), 5*time.Second)
	var v4, v6 int
	for _, g := range got {
		i := binary.BigEndian.Uint32(g.data[4:8])
		if is6 := g.ep.Dst.Addr().Is6(); is6 != rs[i].IsV6() {
			t.Fatalf("datagram %d arrived over IPv6=%v", i, is6)
		} else if is6 {
			v6++
		} else {
			v4++
		}
	}
	if v4 != 6 || v6 != 6 {
		t.Fatalf("%d over IPv4 and %d over IPv6, want 6 and 6", v4, v6)
	}
}

// SendEach checks its arguments like Send.
func TestSendEachArguments(t *testing.T) {
	b, _, port := openBind(t, Options{DisableSourceWatch: true})
	r := NewRoute(Endpoint{Dst: loop4(port)}, 1)
	if err := b.SendEach(stamped(2, 10, 1), []*Route{r}); !errors.Is(err, ErrRoutesMismatch) {
		t.Fatalf("fewer routes than buffers: %v", err)
	}
	if err := b.SendEach(stamped(2, 10, 1), []*Route{r, nil}); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("a nil route: %v", err)
	}
	if err := b.SendEach(nil, nil); err != nil {
		t.Fatalf("nothing to send: %v", err)
	}
	many := make([]*Route, IdealBatchSize+1)
	for i := range many {
		many[i] = r
	}
	if err := b.SendEach(stamped(IdealBatchSize+1, 10, 1), many); !errors.Is(err, ErrBatchTooLarge) {
		t.Fatalf("too large a batch: %v", err)
	}
	s, release := b.NewSender()
	defer release()
	if err := s.(interface {
		SendEach([][]byte, []*Route) error
	}).SendEach(stamped(3, 10, 1), []*Route{r, r, r}); err != nil {
		t.Fatalf("a Sender's SendEach: %v", err)
	}
	b.Close()
	if err := b.SendEach(stamped(1, 10, 1), []*Route{r}); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
