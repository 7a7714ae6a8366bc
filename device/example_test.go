package device_test

import (
	"fmt"
	"net/netip"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

// printer is a StatusWriter that prints what it is given (never the keys).
type printer struct{}

func (printer) Device(s device.Status) error {
	fmt.Println("listen port", s.ListenPort, "private key set:", !s.PrivateKey.IsZero())
	return nil
}

func (printer) Peer(p device.PeerStatus) error {
	fmt.Println("peer at", p.Endpoint, "keepalive", p.PersistentKeepalive)
	return nil
}

func (printer) AllowedIP(p netip.Prefix) error {
	fmt.Println("  allowed", p)
	return nil
}

func ExampleDevice_Configure() {
	d := device.NewDevice(memtun.New("wg0", 1420), conntest.NewNetwork().NewBind(netip.MustParseAddr("192.0.2.1")), device.Options{})
	defer d.Close()

	priv, _ := noise.GeneratePrivateKey()
	peer, _ := noise.GeneratePrivateKey()
	port, keepalive := uint16(51820), uint16(25)
	ep := netip.MustParseAddrPort("198.51.100.7:51820")
	err := d.Configure(&device.Config{
		PrivateKey: &priv,
		ListenPort: &port,
		Peers: []device.PeerConfig{{
			PublicKey:           peer.PublicKey(),
			Endpoint:            &ep,
			PersistentKeepalive: &keepalive,
			AllowedIPs: []device.AllowedIPChange{
				{Prefix: netip.MustParsePrefix("10.0.0.0/24")},
				{Prefix: netip.MustParsePrefix("fd00::/64")},
			},
		}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Later: the peer gives up its IPv6 prefix.
	err = d.Configure(&device.Config{Peers: []device.PeerConfig{{
		PublicKey:  peer.PublicKey(),
		UpdateOnly: true,
		AllowedIPs: []device.AllowedIPChange{{Prefix: netip.MustParsePrefix("fd00::/64"), Remove: true}},
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := d.WriteStatus(printer{}); err != nil {
		fmt.Println(err)
	}
	// Output:
	// listen port 51820 private key set: true
	// peer at 198.51.100.7:51820 keepalive 25
	//   allowed 10.0.0.0/24
}
