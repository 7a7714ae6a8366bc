package device

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

// TestConfigurationChurnUnderTraffic runs traffic from a hub to several
// spokes while the hub's configuration changes underneath: endpoints move,
// allowed IPs are replaced, peers are removed and re-added, the port is
// rebound. Run with -race, it checks the locking of the whole device; the
// traffic must keep flowing afterwards.
func TestConfigurationChurnUnderTraffic(t *testing.T) {
	const spokes = 4
	nw := conntest.NewNetwork()
	hubTun := memtun.New("hub", 1420)
	hubBind := nw.NewBind(netip.MustParseAddr("192.0.2.1"))
	hub := NewDevice(hubTun, hubBind, Options{})
	t.Cleanup(hub.Close)
	hubKey := mustKey(t)
	must(t, hub.Up())
	must(t, hub.Configure(&Config{PrivateKey: ptr(hubKey)}))
	type spoke struct {
		d   *Device
		tun *memtun.Device
		key noise.PrivateKey
		ep  netip.AddrPort
		ip  netip.Addr
	}
	var ss []*spoke
	for i := 0; i < spokes; i++ {
		s := &spoke{tun: memtun.New("s", 1420), key: mustKey(t), ip: netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)})}
		b := nw.NewBind(netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}))
		s.d = NewDevice(s.tun, b, Options{})
		t.Cleanup(s.d.Close)
		must(t, s.d.Up())
		s.ep = b.Addr()
		hubEP := hubBind.Addr()
		must(t, s.d.Configure(&Config{PrivateKey: ptr(s.key), Peers: []PeerConfig{{
			PublicKey: hubKey.PublicKey(), Endpoint: &hubEP, AllowedIPs: prefixes("10.0.0.1/32"),
			PersistentKeepalive: ptr(uint16(1)),
		}}}))
		ss = append(ss, s)
	}
	addSpoke := func(s *spoke) {
		must(t, hub.Configure(&Config{Peers: []PeerConfig{{
			PublicKey: s.key.PublicKey(), Endpoint: &s.ep, ReplaceAllowedIPs: true,
			AllowedIPs: prefixes(netip.PrefixFrom(s.ip, 32).String()),
		}}}))
	}
	for _, s := range ss {
		addSpoke(s)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(2)
		go func(s *spoke) { // hub -> spoke
			defer wg.Done()
			pkt := ipPacket(netip.MustParseAddr("10.0.0.1"), s.ip, []byte("churn"))
			for {
				select {
				case <-stop:
					return
				default:
				}
				hubTun.Inject(pkt)
				time.Sleep(200 * time.Microsecond)
			}
		}(s)
		go func(s *spoke) { // drain
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-s.tun.Outbound():
				}
			}
		}(s)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-hubTun.Outbound():
			}
		}
	}()
	for round := 0; round < 20; round++ {
		s := ss[round%spokes]
		switch round % 5 {
		case 0:
			must(t, hub.Configure(&Config{Peers: []PeerConfig{{PublicKey: s.key.PublicKey(), Remove: true}}}))
			addSpoke(s)
		case 1:
			elsewhere := netip.MustParseAddrPort(fmt.Sprintf("198.51.100.%d:1", round))
			must(t, hub.Configure(&Config{Peers: []PeerConfig{{PublicKey: s.key.PublicKey(), Endpoint: &elsewhere}}}))
			must(t, hub.Configure(&Config{Peers: []PeerConfig{{PublicKey: s.key.PublicKey(), Endpoint: &s.ep}}}))
		case 2:
			must(t, hub.Configure(&Config{ListenPort: ptr(uint16(30000 + round))}))
		case 3:
			status(t, hub)
		case 4:
			must(t, hub.Configure(&Config{FwMark: ptr(uint32(round))}))
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	// Everything still works: each spoke gets a fresh packet.
	for _, s := range ss {
		pkt := ipPacket(netip.MustParseAddr("10.0.0.1"), s.ip, []byte("after churn"))
		hubTun.Inject(pkt)
		(&pair{t: t}).expectWithin(s.tun, pkt, 15*time.Second)
	}
}
