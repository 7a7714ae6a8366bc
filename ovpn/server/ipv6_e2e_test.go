package server

// server-ipv6 against Debian's openvpn 2.6 clients:
//
//	o6c1 (openvpn, tun0)  c1 ==veth== s1  o6s (Wirelane server, wlsrv6 10.8.0.1/24 fd42:42::1/64,
//	o6c2 (openvpn, tun0)  c2 ==veth== s2        fd99::1 on lo behind a pushed route-ipv6)
//
// Each client gets its IPv6 address from the pool and the pushed
// route-ipv6, pings the server's tunnel address and the network behind it
// over IPv6, and the other client (client-to-client).

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

func TestE2EOpenVPNClientsIPv6(t *testing.T) {
	f, dir := e2eFixture(t)
	srvNS, c1NS, c2NS := twoClientNet(t, "o6", 73)
	netns.Run(t, srvNS, "ip", "-6", "addr", "add", "fd99::1/128", "dev", "lo")

	dev := tunIn(t, srvNS, "wlsrv6")

	cfg := f.serverConfig(UDP)
	cfg.Listen = netip.MustParseAddrPort("0.0.0.0:1194")
	cfg.Network6 = netip.MustParsePrefix("fd42:42::/64")
	cfg.ClientToClient = true
	cfg.Push = append(cfg.Push, "route-ipv6 fd99::/64")
	s := startServer(t, cfg, Options{WrapSocket: udpIn(srvNS)})
	netns.Run(t, srvNS, "ip", "addr", "add", s.TunnelAddress().String(), "dev", "wlsrv6")
	netns.Run(t, srvNS, "ip", "-6", "addr", "add", s.TunnelAddress6().String(), "dev", "wlsrv6", "nodad")
	netns.Run(t, srvNS, "ip", "link", "set", "wlsrv6", "up")
	attached := make(chan error, 1)
	go func() { attached <- s.AttachTUN(dev) }()

	cl1 := startOpenVPNClient(t, f, dir, c1NS, "client1", "192.168.73.1")
	startOpenVPNClient(t, f, dir, c2NS, "client2", "192.168.74.1")
	i1, ok1 := clientByName(s, "client1")
	i2, ok2 := clientByName(s, "client2")
	if !ok1 || !ok2 || !i1.Address6.IsValid() || !i2.Address6.IsValid() || i1.Address6 == i2.Address6 {
		t.Fatalf("server lists %+v", s.Clients())
	}
	if !strings.Contains(cl1.logText(), "ifconfig-ipv6 "+i1.Address6.String()+"/64 fd42:42::1") {
		t.Fatalf("client 1 log lacks the pushed ifconfig-ipv6:\n%s", cl1.logText())
	}
	for _, c := range []struct {
		ns   *netns.NS
		info ClientInfo
	}{{c1NS, i1}, {c2NS, i2}} {
		tun0Has6(t, c.ns, c.info)
		if r := netns.Run(t, c.ns, "ip", "-6", "route", "show", "dev", "tun0"); !strings.Contains(r, "fd99::/64") {
			t.Fatalf("%s: pushed route-ipv6 missing:\n%s", c.info.CommonName, r)
		}
		netns.Run(t, c.ns, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd42:42::1")
		netns.Run(t, c.ns, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", "fd99::1")
	}
	netns.Run(t, c1NS, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", i2.Address6.String())
	// Larger packets, fragmented by the sender's kernel, and IPv4 beside.
	netns.Run(t, c2NS, "ping", "-6", "-c", "2", "-s", "3000", "-W", "2", "fd42:42::1")
	netns.Run(t, c1NS, "ping", "-4", "-c", "2", "-i", "0.2", "-W", "2", "10.8.0.1")
	s.Close()
	if err := <-attached; err != nil {
		t.Fatalf("AttachTUN: %v", err)
	}
}

// An IPv6-only server (server-ipv6 without server) against openvpn 2.6
// clients: each gets only its IPv6 address, reaches the server and the
// other client over IPv6, and its tunnel carries no IPv4 address.
func TestE2EOpenVPNClientsIPv6Only(t *testing.T) {
	f, dir := e2eFixture(t)
	srvNS, c1NS, c2NS := twoClientNet(t, "o7", 75)

	dev := tunIn(t, srvNS, "wlsrv7")

	cfg := f.serverConfig(UDP)
	cfg.Listen = netip.MustParseAddrPort("0.0.0.0:1194")
	cfg.Network = netip.Prefix{}
	cfg.Network6 = netip.MustParsePrefix("fd42:44::/64")
	cfg.ClientToClient = true
	s := startServer(t, cfg, Options{WrapSocket: udpIn(srvNS)})
	if s.TunnelAddress().IsValid() {
		t.Fatalf("IPv6-only server has IPv4 tunnel address %s", s.TunnelAddress())
	}
	netns.Run(t, srvNS, "ip", "-6", "addr", "add", s.TunnelAddress6().String(), "dev", "wlsrv7", "nodad")
	netns.Run(t, srvNS, "ip", "link", "set", "wlsrv7", "up")
	attached := make(chan error, 1)
	go func() { attached <- s.AttachTUN(dev) }()

	startOpenVPNClient(t, f, dir, c1NS, "client1", "192.168.75.1")
	startOpenVPNClient(t, f, dir, c2NS, "client2", "192.168.76.1")
	i1, ok1 := clientByName(s, "client1")
	i2, ok2 := clientByName(s, "client2")
	if !ok1 || !ok2 || i1.Address.IsValid() || !i1.Address6.IsValid() || !i2.Address6.IsValid() || i1.Address6 == i2.Address6 {
		t.Fatalf("server lists %+v", s.Clients())
	}
	for _, c := range []struct {
		ns   *netns.NS
		info ClientInfo
	}{{c1NS, i1}, {c2NS, i2}} {
		tun0Has6(t, c.ns, c.info)
		if a := netns.Run(t, c.ns, "ip", "-4", "addr", "show", "dev", "tun0"); strings.Contains(a, "inet ") {
			t.Fatalf("%s: tun0 has an IPv4 address:\n%s", c.info.CommonName, a)
		}
		netns.Run(t, c.ns, "ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", "fd42:44::1")
	}
	netns.Run(t, c1NS, "ping", "-6", "-c", "2", "-i", "0.2", "-W", "2", i2.Address6.String())
	s.Close()
	if err := <-attached; err != nil {
		t.Fatalf("AttachTUN: %v", err)
	}
}

// tun0Has6 fails unless the openvpn client in ns has the IPv6 address the
// server lists for it on tun0.
func tun0Has6(t *testing.T, ns *netns.NS, info ClientInfo) {
	t.Helper()
	if a := netns.Run(t, ns, "ip", "-6", "addr", "show", "dev", "tun0"); !strings.Contains(a, info.Address6.String()+"/64") {
		t.Fatalf("%s: tun0 lacks %s/64:\n%s", info.CommonName, info.Address6, a)
	}
}
