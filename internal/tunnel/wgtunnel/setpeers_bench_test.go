package wgtunnel

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/tun/memtun"
)

// uapiDevice serves a device on an in-memory TUN and network at the UAPI
// socket of name, as a daemon does (root: the socket is in
// /var/run/wireguard, where wgctrl looks), with n peers shaped like a
// fleet's sites; it returns them as wgquick peers.
func uapiDevice(b *testing.B, name string, n int) []wgquick.Peer {
	b.Helper()
	ln, err := uapi.Listen(name)
	if err != nil {
		b.Skipf("no UAPI socket (root needed): %v", err)
	}
	nw := conntest.NewNetwork()
	d := device.NewDevice(memtun.New(name, 1420), nw.NewBind(netip.MustParseAddr("192.0.2.1")), device.Options{})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go uapi.Serve(c, d)
		}
	}()
	b.Cleanup(func() { ln.Close(); d.Close(); os.Remove(uapi.SocketPath(name)) })
	k, _ := noise.GeneratePrivateKey()
	cfg := &device.Config{PrivateKey: &k}
	peers := make([]wgquick.Peer, n)
	ka := uint16(25)
	for i := range peers {
		pk, _ := noise.GeneratePrivateKey()
		pub := pk.PublicKey()
		ep := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 51820)
		net := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
		peers[i] = wgquick.Peer{PublicKey: wgquick.Key(pub), AllowedIPs: []netip.Prefix{net}, Endpoint: ep.String(), PersistentKeepalive: &ka}
		cfg.Peers = append(cfg.Peers, device.PeerConfig{PublicKey: pub, Endpoint: &ep, PersistentKeepalive: &ka,
			AllowedIPs: []device.AllowedIPChange{{Prefix: net}}})
	}
	if err := d.Configure(cfg); err != nil {
		b.Fatal(err)
	}
	return peers
}

// BenchmarkSetPeersOneOf1000 is the device's side of one fleet change
// among 1,000 sites: SetPeers sending one peer whose network moved, over
// a real UAPI socket to an in-process device (routes off: the route
// change is netlink's, measured by scripts/fleet-scale.sh).
// BenchmarkReadDevice1000 is the UAPI get of the same device that a full
// Reload makes first, wgctrl's parsing included.
func BenchmarkSetPeersOneOf1000(b *testing.B) {
	name := fmt.Sprintf("wlsp%d", os.Getpid()%100000)
	peers := uapiDevice(b, name, 1000)
	cfg := &wgquick.Config{Name: name, Interface: wgquick.Interface{Table: "off"}}
	eng := &Daemon{}
	defer eng.Close()
	o := Options{Engine: eng}
	now := peers
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		old := now
		now = append([]wgquick.Peer(nil), old...)
		j := i % len(now)
		now[j].AllowedIPs = []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 250, byte(i >> 8), byte(i)}), 32)}
		i++
		cfg.Peers = now
		res, err := SetPeers(context.Background(), cfg, old, now, o)
		if err != nil {
			b.Fatal(err)
		}
		if res.Updated != 1 {
			b.Fatalf("%+v for one changed peer", res)
		}
	}
}

// BenchmarkReadDevice1000: see BenchmarkSetPeersOneOf1000.
func BenchmarkReadDevice1000(b *testing.B) {
	name := fmt.Sprintf("wlrd%d", os.Getpid()%100000)
	uapiDevice(b, name, 1000)
	eng := &Daemon{}
	defer eng.Close()
	b.ReportAllocs()
	for b.Loop() {
		dev, err := eng.Device(name)
		if err != nil {
			b.Fatal(err)
		}
		if len(dev.Peers) != 1000 {
			b.Fatalf("%d peers read", len(dev.Peers))
		}
	}
}
