package conntest

import (
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn"
)

func recvOne(t *testing.T, fn conn.ReceiveFunc) ([]byte, conn.Endpoint) {
	t.Helper()
	bufs := [][]byte{make([]byte, 1500)}
	sizes := make([]int, 1)
	eps := make([]conn.Endpoint, 1)
	type res struct {
		n   int
		err error
	}
	ch := make(chan res, 1)
	go func() { n, err := fn(bufs, sizes, eps); ch <- res{n, err} }()
	select {
	case r := <-ch:
		if r.err != nil || r.n != 1 {
			t.Fatalf("receive: %d, %v", r.n, r.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("receive timed out")
	}
	return bufs[0][:sizes[0]], eps[0]
}

func TestPairDeliversAndHooks(t *testing.T) {
	nw, a, b := NewPair()
	_, pa, err := a.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	fnsB, pb, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	r := conn.NewRoute(conn.Endpoint{Dst: netip.AddrPortFrom(b.ip, pb)}, 1)
	if err := a.Send([][]byte{[]byte("one")}, r); err != nil {
		t.Fatal(err)
	}
	data, ep := recvOne(t, fnsB[0])
	if string(data) != "one" || ep.Dst != netip.AddrPortFrom(a.ip, pa) || ep.Src != b.ip {
		t.Fatalf("got %q from %v", data, ep)
	}

	nw.SetHook(func(d Datagram) Action {
		switch string(d.Data) {
		case "drop":
			return Drop
		case "dup":
			return Duplicate
		case "late":
			return Hold
		}
		return Pass
	})
	a.Send([][]byte{[]byte("drop"), []byte("late"), []byte("dup"), []byte("end")}, r)
	for _, want := range []string{"dup", "dup", "end"} {
		if got, _ := recvOne(t, fnsB[0]); string(got) != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if nw.ReleaseHeld() != 1 {
		t.Fatal("expected one held datagram")
	}
	if got, _ := recvOne(t, fnsB[0]); string(got) != "late" {
		t.Fatalf("got %q, want late", got)
	}
	if nw.SentTo(netip.AddrPortFrom(b.ip, pb)) != 5 {
		t.Fatalf("SentTo = %d", nw.SentTo(netip.AddrPortFrom(b.ip, pb)))
	}

	if _, _, err := b.Open(0); !errors.Is(err, conn.ErrBindAlreadyOpen) {
		t.Fatalf("second Open: %v", err)
	}
	b.Close()
	if _, err := fnsB[0](make([][]byte, 1), make([]int, 1), make([]conn.Endpoint, 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("receive after close: %v", err)
	}
	if err := b.Send([][]byte{{1}}, r); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("send after close: %v", err)
	}
	c := nw.NewBind(a.ip)
	if _, _, err := c.Open(pa); err == nil {
		t.Fatal("opening a used port succeeded")
	}
}

func TestUDPBindLoopback(t *testing.T) {
	a, b := NewUDPBind(), NewUDPBind()
	if _, _, err := a.Open(0); err != nil {
		t.Skipf("no UDP sockets here: %v", err)
	}
	defer a.Close()
	fns, pb, err := b.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := conn.NewRoute(conn.Endpoint{Dst: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), pb)}, 1)
	if err := a.Send([][]byte{[]byte("hello")}, r); err != nil {
		t.Fatal(err)
	}
	data, ep := recvOne(t, fns[0])
	if string(data) != "hello" || !ep.Dst.Addr().Is4() {
		t.Fatalf("got %q from %v", data, ep)
	}
}
