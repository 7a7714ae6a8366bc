package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/client"
)

// ipv6Packet builds an IPv6 packet from src to dst carrying payload with
// next header 59 (no next header): enough for routing by address.
func ipv6Packet(src, dst netip.Addr, payload []byte) []byte {
	p := make([]byte, 40+len(payload))
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:], uint16(len(payload)))
	p[6], p[7] = 59, 64
	copy(p[8:24], src.AsSlice())
	copy(p[24:40], dst.AsSlice())
	copy(p[40:], payload)
	return p
}

// readUntil reads packets from read until one equals want.
func readUntil(t *testing.T, what string, read func([]byte) (int, error), want []byte) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := read(buf)
			if err != nil {
				got <- err
				return
			}
			if bytes.Equal(buf[:n], want) {
				got <- nil
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: packet did not arrive", what)
	}
}

// server-ipv6 with ovpn/client: pushed addresses, IPv6 both ways, source
// checks, client to client by IPv6 address, and the address freed and
// handed out again after a client leaves.
func TestServerIPv6Pool(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.Network6 = netip.MustParsePrefix("fd42:42::/64")
	cfg.ClientToClient = true
	s := startServer(t, cfg, Options{})
	if s.TunnelAddress6() != netip.MustParsePrefix("fd42:42::1/64") {
		t.Fatalf("server IPv6 address %s", s.TunnelAddress6())
	}
	a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
	b := dialClient(t, f.clientConfig(t, s, "b", ""), client.Options{})
	pa, pb := a.Pushed(), b.Pushed()
	srv6 := netip.MustParseAddr("fd42:42::1")
	if pa.Local6 != netip.MustParsePrefix("fd42:42::1000/64") || pa.Remote6 != srv6 ||
		pb.Local6 != netip.MustParsePrefix("fd42:42::1001/64") || pa.Local != netip.MustParsePrefix("10.8.0.2/24") {
		t.Fatalf("pushed a %v %v %v, b %v", pa.Local, pa.Local6, pa.Remote6, pb.Local6)
	}
	a6, b6 := pa.Local6.Addr(), pb.Local6.Addr()

	// Client to the host side, and back.
	up := ipv6Packet(a6, srv6, []byte("a to server"))
	if err := a.WritePacket(up); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "a to the host side", s.ReadPacket, up)
	down := ipv6Packet(srv6, a6, []byte("server to a"))
	if err := s.WritePacket(down); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "host side to a", a.ReadPacket, down)

	// b's IPv6 address and an address outside the pool as the source:
	// dropped; the client's IPv4 address in an IPv6 packet cannot occur.
	spoofed := s.Stats().Spoofed.Load()
	for _, src := range []netip.Addr{b6, netip.MustParseAddr("fd42:42::77"), netip.MustParseAddr("fe80::1")} {
		if err := a.WritePacket(ipv6Packet(src, srv6, []byte("spoofed"))); err != nil {
			t.Fatal(err)
		}
	}
	good := ipv6Packet(a6, srv6, []byte("after the spoofed ones"))
	if err := a.WritePacket(good); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "a's own packet after spoofed ones", s.ReadPacket, good)
	if got := s.Stats().Spoofed.Load() - spoofed; got != 3 {
		t.Fatalf("spoofed IPv6 packets counted %d, want 3", got)
	}

	// Client to client by IPv6 address.
	c2c := ipv6Packet(a6, b6, []byte("a to b"))
	if err := a.WritePacket(c2c); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "a to b", b.ReadPacket, c2c)

	infos := s.Clients()
	if len(infos) != 2 {
		t.Fatalf("clients %+v", infos)
	}
	for _, ci := range infos {
		if (ci.CommonName == "a" && ci.Address6 != a6) || (ci.CommonName == "b" && ci.Address6 != b6) {
			t.Fatalf("client %+v", ci)
		}
	}

	// a leaves: its addresses no longer route, and the next client gets them.
	a.Close()
	eventually(t, 5*time.Second, "a gone", func() bool { return len(s.Clients()) == 1 })
	if err := s.WritePacket(ipv6Packet(srv6, a6, nil)); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("write to a's old IPv6 address: %v", err)
	}
	c := dialClient(t, f.clientConfig(t, s, "c", ""), client.Options{})
	if c.Pushed().Local6 != pa.Local6 || c.Pushed().Local != pa.Local {
		t.Fatalf("c got %v %v, want a's freed %v %v", c.Pushed().Local, c.Pushed().Local6, pa.Local, pa.Local6)
	}
	down = ipv6Packet(srv6, a6, []byte("server to c"))
	if err := s.WritePacket(down); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "host side to c", c.ReadPacket, down)
}

// Without server-ipv6 nothing IPv6 is pushed and IPv6 packets from
// clients are dropped as spoofed.
func TestServerWithoutIPv6(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
	if a.Pushed().Local6.IsValid() || s.TunnelAddress6().IsValid() {
		t.Fatalf("IPv6 without server-ipv6: %v %v", a.Pushed().Local6, s.TunnelAddress6())
	}
	if err := a.WritePacket(ipv6Packet(netip.MustParseAddr("fd42::1000"), netip.MustParseAddr("fd42::1"), nil)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "IPv6 packet counted as spoofed", func() bool { return s.Stats().Spoofed.Load() == 1 })
}

// An IPv6-only server (server-ipv6 without server): clients get an IPv6
// address and nothing IPv4 (no ifconfig, no route-gateway), the server's
// TUN carries only its IPv6 address, IPv6 flows both ways and between
// clients, and every IPv4 packet is refused, whichever source it claims
// (the IPv4 slot that numbers a client included).
func TestServerIPv6Only(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.Network = netip.Prefix{}
	cfg.Network6 = netip.MustParsePrefix("fd42:43::/64")
	cfg.ClientToClient = true
	s := startServer(t, cfg, Options{})
	if s.TunnelAddress().IsValid() || s.TunnelAddress6() != netip.MustParsePrefix("fd42:43::1/64") {
		t.Fatalf("server addresses %v %v", s.TunnelAddress(), s.TunnelAddress6())
	}
	a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
	b := dialClient(t, f.clientConfig(t, s, "b", ""), client.Options{})
	pa, pb := a.Pushed(), b.Pushed()
	if pa.Local.IsValid() || pa.Remote.IsValid() || pa.Local6 != netip.MustParsePrefix("fd42:43::1000/64") ||
		pb.Local6 != netip.MustParsePrefix("fd42:43::1001/64") {
		t.Fatalf("pushed a %v %v %v, b %v", pa.Local, pa.Remote, pa.Local6, pb.Local6)
	}
	for _, o := range pa.Options {
		if strings.HasPrefix(o, "ifconfig ") || strings.HasPrefix(o, "route-gateway") {
			t.Fatalf("IPv6-only server pushed %q", o)
		}
	}
	srv6 := netip.MustParseAddr("fd42:43::1")
	a6, b6 := pa.Local6.Addr(), pb.Local6.Addr()
	up := ipv6Packet(a6, srv6, []byte("a to server"))
	if err := a.WritePacket(up); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "a to the host side", s.ReadPacket, up)
	down := ipv6Packet(srv6, b6, []byte("server to b"))
	if err := s.WritePacket(down); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "host side to b", b.ReadPacket, down)
	c2c := ipv6Packet(a6, b6, []byte("a to b"))
	if err := a.WritePacket(c2c); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "a to b", b.ReadPacket, c2c)

	// IPv4: nothing routes to a client, nothing from one is accepted.
	slot := v6OnlySlots.Addr().Next().Next() // a's slot
	if err := s.WritePacket(testnet.ICMPEcho(8, netip.MustParseAddr("10.0.0.1"), slot, 1, 1, nil)); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("IPv4 write to a's slot: %v", err)
	}
	spoofed := s.Stats().Spoofed.Load()
	for _, src := range []netip.Addr{slot, netip.MustParseAddr("10.8.0.2")} {
		if err := a.WritePacket(testnet.ICMPEcho(8, src, netip.MustParseAddr("10.0.0.1"), 1, 1, nil)); err != nil {
			t.Fatal(err)
		}
	}
	good := ipv6Packet(a6, srv6, []byte("after the IPv4 ones"))
	if err := a.WritePacket(good); err != nil {
		t.Fatal(err)
	}
	readUntil(t, "a's IPv6 packet after IPv4 ones", s.ReadPacket, good)
	if got := s.Stats().Spoofed.Load() - spoofed; got != 2 {
		t.Fatalf("IPv4 packets refused %d, want 2", got)
	}

	// Listed by their IPv6 addresses; a leaving frees its slot for c.
	infos := s.Clients()
	if len(infos) != 2 {
		t.Fatalf("clients %+v", infos)
	}
	for _, ci := range infos {
		if ci.Address.IsValid() || (ci.CommonName == "a" && ci.Address6 != a6) || (ci.CommonName == "b" && ci.Address6 != b6) {
			t.Fatalf("client %+v", ci)
		}
	}
	a.Close()
	eventually(t, 5*time.Second, "a gone", func() bool { return len(s.Clients()) == 1 })
	c := dialClient(t, f.clientConfig(t, s, "c", ""), client.Options{})
	if c.Pushed().Local6 != pa.Local6 {
		t.Fatalf("c got %v, want a's freed %v", c.Pushed().Local6, pa.Local6)
	}
}
