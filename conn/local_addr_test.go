package conn

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// A bind given a local address opens one socket of that address's family,
// bound to it: LocalAddr says so, datagrams to it arrive, and replies
// leave from it.
func TestOpenBindsLocalAddress(t *testing.T) {
	for _, c := range []struct {
		name string
		addr netip.Addr
		v6   bool
	}{
		{"IPv4 loopback", netip.MustParseAddr("127.0.0.1"), false},
		{"IPv4 wildcard", netip.IPv4Unspecified(), false},
		{"4in6 is IPv4", netip.MustParseAddr("::ffff:127.0.0.1"), false},
		{"IPv6 loopback", netip.IPv6Loopback(), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.v6 {
				probe, _, _ := openBind(t, Options{DisableSourceWatch: true})
				needIPv6(t, probe)
			}
			b, fns, port := openBind(t, Options{Addr: c.addr, DisableSourceWatch: true})
			if len(fns) != 1 {
				t.Fatalf("%d sockets, want 1", len(fns))
			}
			if got, want := b.LocalAddr(), netip.AddrPortFrom(c.addr.Unmap(), port); got != want {
				t.Fatalf("LocalAddr %v, want %v", got, want)
			}
			if b.HasIPv6() != c.v6 {
				t.Fatalf("HasIPv6 %v, want %v", b.HasIPv6(), c.v6)
			}
			dst := loop4(port)
			network := "udp4"
			if c.v6 {
				dst, network = loop6(port), "udp6"
			}
			peer, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst.Addr(), 0)))
			if err != nil {
				t.Fatal(err)
			}
			defer peer.Close()
			ch := startReceivers(t, fns, 2048)
			if _, err := peer.WriteToUDPAddrPort([]byte("hello"), dst); err != nil {
				t.Fatal(err)
			}
			got := collect(t, ch, 1, 3*time.Second)[0]
			from := peer.LocalAddr().(*net.UDPAddr).AddrPort()
			if string(got.data) != "hello" || got.ep.Dst.Port() != from.Port() {
				t.Fatalf("got %q from %v, want hello from %v", got.data, got.ep.Dst, from)
			}
			if err := b.Send([][]byte{[]byte("back")}, NewRoute(got.ep, 1)); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 64)
			peer.SetReadDeadline(time.Now().Add(3 * time.Second))
			n, src, err := peer.ReadFromUDPAddrPort(buf)
			if err != nil || string(buf[:n]) != "back" || src.Port() != port || src.Addr().Unmap() != dst.Addr() {
				t.Fatalf("reply %q from %v (%v), want back from %v", buf[:n], src, err, dst)
			}
		})
	}
}

// A bind on one address leaves the others of the host free: a second
// bind may take the same port on another address.
func TestOpenLocalAddressLeavesOthersFree(t *testing.T) {
	a, _, port := openBind(t, Options{Addr: netip.MustParseAddr("127.0.0.1"), DisableSourceWatch: true})
	_ = a
	b := NewStdBindOptions(Options{Addr: netip.MustParseAddr("127.0.0.2"), DisableSourceWatch: true})
	if _, _, err := b.Open(port); err != nil {
		t.Fatalf("second address, same port: %v", err)
	}
	b.Close()
	c := NewStdBindOptions(Options{Addr: netip.MustParseAddr("127.0.0.1"), DisableSourceWatch: true})
	if _, _, err := c.Open(port); err == nil {
		c.Close()
		t.Fatal("the same address and port opened twice")
	}
}
