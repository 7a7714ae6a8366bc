package device

// Live interoperability with the reference Go implementation
// (golang.zx2c4.com/wireguard/device) over real loopback UDP.

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	wgconn "golang.zx2c4.com/wireguard/conn"
	wgdevice "golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/tuntest"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

// refPeer is a wireguard-go device with an in-memory TUN.
type refPeer struct {
	dev  *wgdevice.Device
	tun  *tuntest.ChannelTUN
	in   chan []byte // packets wireguard-go delivered to its TUN
	key  noise.PrivateKey
	port uint16
}

func newRefPeer(t *testing.T) *refPeer {
	t.Helper()
	r := &refPeer{tun: tuntest.NewChannelTUN(), in: make(chan []byte, 1024), key: mustKey(t)}
	r.dev = wgdevice.NewDevice(r.tun.TUN(), wgconn.NewDefaultBind(), wgdevice.NewLogger(wgdevice.LogLevelSilent, ""))
	go func() {
		for p := range r.tun.Inbound {
			select {
			case r.in <- p:
			default:
			}
		}
	}()
	t.Cleanup(r.dev.Close)
	r.up(t)
	return r
}

// up gives r's device its key and a random listen port, brings it up and
// records the port it got.
func (r *refPeer) up(tb testing.TB) {
	tb.Helper()
	if err := r.dev.IpcSet("private_key=" + hex.EncodeToString(r.key[:]) + "\nlisten_port=0\n"); err != nil {
		tb.Fatal(err)
	}
	if err := r.dev.Up(); err != nil {
		tb.Fatal(err)
	}
	get, err := r.dev.IpcGet()
	if err != nil {
		tb.Fatal(err)
	}
	for sc := bufio.NewScanner(strings.NewReader(get)); sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "listen_port="); ok {
			n, _ := strconv.Atoi(v)
			r.port = uint16(n)
		}
	}
	if r.port == 0 {
		tb.Fatal("wireguard-go reported no listen port")
	}
}

// expect waits for pkt on wireguard-go's TUN.
func (r *refPeer) expect(t *testing.T, pkt []byte) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-r.in:
			if string(got) == string(pkt) {
				return
			}
		case <-deadline:
			t.Fatalf("wireguard-go did not receive %x...", pkt[:20])
		}
	}
}

type bindMaker struct {
	name string
	make func() conn.Bind
}

// extraInteropBinds lists the production binds to prove as well (see
// interop_stdbind_test.go).
var extraInteropBinds []bindMaker

func interopBinds() []bindMaker {
	return append([]bindMaker{
		{"udpbind", func() conn.Bind { return conntest.NewUDPBind() }},
	}, extraInteropBinds...)
}

type interopSetup struct {
	ours    *Device
	ourTun  *memtun.Device
	ourKey  noise.PrivateKey
	ourPort uint16
	ref     *refPeer
}

func newInterop(t *testing.T, bm bindMaker, psk bool, tweak func(*Device)) *interopSetup {
	return newInteropAt(t, bm, psk, tweak, netip.MustParseAddr("127.0.0.1"))
}

// newInteropAt connects the two devices over the loopback address lo
// (127.0.0.1 or ::1).
func newInteropAt(t *testing.T, bm bindMaker, psk bool, tweak func(*Device), lo netip.Addr) *interopSetup {
	t.Helper()
	s := &interopSetup{ref: newRefPeer(t), ourTun: memtun.New("wl0", 1420), ourKey: mustKey(t)}
	s.ours = NewDevice(s.ourTun, bm.make(), Options{})
	t.Cleanup(s.ours.Close)
	if tweak != nil {
		tweak(s.ours)
	}
	if err := s.ours.Up(); err != nil {
		t.Fatal(err)
	}
	s.ourPort = uint16(s.ours.boundPort.Load())
	var k noise.PresharedKey
	if psk {
		var err error
		if k, err = noise.GeneratePresharedKey(); err != nil {
			t.Fatal(err)
		}
	}
	refEP := netip.AddrPortFrom(lo, s.ref.port)
	pk := k
	must(t, s.ours.Configure(&Config{PrivateKey: ptr(s.ourKey), Peers: []PeerConfig{{
		PublicKey: s.ref.key.PublicKey(), PresharedKey: &pk, Endpoint: &refEP,
		AllowedIPs: prefixes("10.0.0.2/32", "fd00::2/128"),
	}}}))
	ourPub := s.ourKey.PublicKey()
	cfg := fmt.Sprintf("public_key=%s\npreshared_key=%s\nendpoint=%s\nallowed_ip=10.0.0.1/32\nallowed_ip=fd00::1/128\n",
		hex.EncodeToString(ourPub[:]), hex.EncodeToString(k[:]), netip.AddrPortFrom(lo, s.ourPort))
	if err := s.ref.dev.IpcSet(cfg); err != nil {
		t.Fatal(err)
	}
	return s
}

// toRef sends a packet from our device to wireguard-go.
func (s *interopSetup) toRef(t *testing.T, src, dst netip.Addr, payload string) {
	t.Helper()
	pkt := ipPacket(src, dst, []byte(payload))
	must(t, s.ourTun.Inject(pkt))
	s.ref.expect(t, pkt)
}

// fromRef sends a packet from wireguard-go to our device.
func (s *interopSetup) fromRef(t *testing.T, src, dst netip.Addr, payload string) {
	t.Helper()
	pkt := ipPacket(src, dst, []byte(payload))
	select {
	case s.ref.tun.Outbound <- pkt:
	case <-time.After(5 * time.Second):
		t.Fatal("wireguard-go TUN did not take the packet")
	}
	(&pair{t: t}).expect(s.ourTun, pkt)
}

func TestInteropWireguardGo(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets")
	}
	for _, bm := range interopBinds() {
		for _, psk := range []bool{false, true} {
			for _, weInitiate := range []bool{true, false} {
				name := fmt.Sprintf("%s/psk=%v/we_initiate=%v", bm.name, psk, weInitiate)
				t.Run(name, func(t *testing.T) {
					s := newInterop(t, bm, psk, nil)
					if weInitiate {
						s.toRef(t, ipA4, ipB4, "ours first v4")
						s.fromRef(t, ipB4, ipA4, "reply v4")
					} else {
						s.fromRef(t, ipB4, ipA4, "theirs first v4")
						s.toRef(t, ipA4, ipB4, "reply v4")
					}
					s.toRef(t, ipA6, ipB6, "ours v6")
					s.fromRef(t, ipB6, ipA6, "theirs v6")
					kp := peerOf(s.ours, s.ref.key).keypairs.current.Load()
					if kp == nil || kp.isInitiator != weInitiate {
						t.Fatalf("our session: %+v, want initiator=%v", kp, weInitiate)
					}
				})
			}
		}
	}
}

func TestInteropOverIPv6(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets")
	}
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		c.Close()
	}
	for _, bm := range interopBinds() {
		t.Run(bm.name, func(t *testing.T) {
			s := newInteropAt(t, bm, true, nil, netip.MustParseAddr("::1"))
			s.toRef(t, ipA6, ipB6, "over v6")
			s.fromRef(t, ipB4, ipA4, "back over v6")
			ep, _ := peerOf(s.ours, s.ref.key).routes.Endpoint()
			if !ep.Dst.Addr().Is6() {
				t.Fatalf("endpoint %v is not IPv6", ep.Dst)
			}
		})
	}
}

func TestInteropRekeyMidTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets")
	}
	for _, bm := range interopBinds() {
		t.Run(bm.name, func(t *testing.T) {
			s := newInterop(t, bm, true, func(d *Device) {
				d.tm.rekeyAfterTime = 300 * time.Millisecond
				d.tm.rekeyTimeout = 200 * time.Millisecond
			})
			s.toRef(t, ipA4, ipB4, "start")
			p := peerOf(s.ours, s.ref.key)
			first := p.keypairs.current.Load()
			deadline := time.Now().Add(8 * time.Second)
			i := 0
			for p.keypairs.current.Load() == first {
				if time.Now().After(deadline) {
					t.Fatal("no rekey happened")
				}
				s.toRef(t, ipA4, ipB4, fmt.Sprintf("traffic %d", i))
				s.fromRef(t, ipB4, ipA4, fmt.Sprintf("back %d", i))
				i++
				time.Sleep(20 * time.Millisecond)
			}
			second := p.keypairs.current.Load()
			if !second.isInitiator || second.localIndex == first.localIndex {
				t.Fatalf("unexpected new session %+v", second)
			}
			for j := 0; j < 5; j++ {
				s.toRef(t, ipA6, ipB6, fmt.Sprintf("after rekey %d", j))
				s.fromRef(t, ipB6, ipA6, fmt.Sprintf("after rekey back %d", j))
			}
		})
	}
}

func TestInteropCookieUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets and waits one RekeyTimeout")
	}
	bm := interopBinds()[0]
	s := newInterop(t, bm, false, nil)
	s.ours.forceUnderLoad.Store(true)
	start := time.Now()
	// wireguard-go initiates; we answer with a cookie reply; its retry
	// (one RekeyTimeout later) carries mac2 and completes.
	pkt := ipPacket(ipB4, ipA4, []byte("through the cookie"))
	s.ref.tun.Outbound <- pkt
	(&pair{t: t}).expectWithin(s.ourTun, pkt, 12*time.Second)
	if s.ours.cookieRepliesSent.Load() == 0 {
		t.Fatal("no cookie reply was sent")
	}
	if time.Since(start) < RekeyTimeout-time.Second {
		t.Fatalf("handshake completed after %v: the first initiation should have been refused", time.Since(start))
	}
	s.toRef(t, ipA4, ipB4, "reply under load")
}

func TestInteropCookieFromReference(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets")
	}
	bm := interopBinds()[0]
	s := newInterop(t, bm, false, func(d *Device) {
		d.tm.rekeyTimeout = 250 * time.Millisecond // retry inside the reference's load window
	})
	// Fill wireguard-go's handshake queue with initiations that carry a
	// valid mac1 but no mac2, from another loopback address.
	flood := floodInitiations(t, s.ref.key.PublicKey(), 64)
	fc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	defer fc.Close()
	dst := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(s.ref.port)}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		// Bursts keep the reference under load (it stays so for a second
		// after its queue was last long) while leaving gaps in which our
		// retransmission can get into its queue.
		for {
			for i := 0; i < 600; i++ {
				fc.WriteToUDP(flood[i%len(flood)], dst)
			}
			select {
			case <-stop:
				return
			case <-time.After(400 * time.Millisecond):
			}
		}
	}()
	time.Sleep(100 * time.Millisecond)
	s.toRef(t, ipA4, ipB4, "through their cookie")
	if s.ours.cookieRepliesReceived.Load() == 0 {
		t.Fatal("the handshake completed without a cookie reply from the loaded reference")
	}
	s.fromRef(t, ipB4, ipA4, "reply")
}

func TestInteropRoamingBothWays(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets")
	}
	for _, bm := range interopBinds() {
		t.Run(bm.name, func(t *testing.T) {
			s := newInterop(t, bm, false, nil)
			s.toRef(t, ipA4, ipB4, "before")
			s.fromRef(t, ipB4, ipA4, "before back")
			// We move to another port: the reference follows our next
			// authenticated packet.
			newPort := uint16(0)
			for port := s.ourPort + 1; port != 0 && newPort == 0; port++ {
				if err := s.ours.Configure(&Config{ListenPort: &port}); err == nil {
					newPort = port
				}
			}
			s.toRef(t, ipA4, ipB4, "from our new port")
			s.fromRef(t, ipB4, ipA4, "to our new port")
			// The reference moves: we follow its next authenticated packet,
			// publishing one new route.
			p := peerOf(s.ours, s.ref.key)
			gen := p.routes.Borrow().Gen
			refNew := s.ref.port + 1
			for ; s.ref.dev.IpcSet(fmt.Sprintf("listen_port=%d\n", refNew)) != nil; refNew++ {
			}
			s.fromRef(t, ipB4, ipA4, "from their new port")
			ep, _ := p.routes.Endpoint()
			if ep.Dst.Port() != refNew {
				t.Fatalf("our endpoint for the reference is %v, want port %d", ep.Dst, refNew)
			}
			if g := p.routes.Borrow().Gen; g != gen+1 {
				t.Fatalf("route generation %d -> %d, want one publish", gen, g)
			}
			s.toRef(t, ipA4, ipB4, "to their new port")
		})
	}
}
