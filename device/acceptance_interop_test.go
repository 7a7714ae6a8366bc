package device

// Acceptance cases of live interoperability that the interop tests leave
// out: IPv6 outer addresses with either side initiating, with and without
// a preshared key; and a Get benchmark through the device itself.

import (
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
)

func TestAcceptanceInteropIPv6BothDirections(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets")
	}
	if c, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6loopback}); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		c.Close()
	}
	for _, bm := range interopBinds() {
		for _, psk := range []bool{false, true} {
			for _, weInitiate := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/psk=%v/we_initiate=%v", bm.name, psk, weInitiate), func(t *testing.T) {
					s := newInteropAt(t, bm, psk, nil, netip.IPv6Loopback())
					if weInitiate {
						s.toRef(t, ipA4, ipB4, "ours first")
						s.fromRef(t, ipB6, ipA6, "reply")
					} else {
						s.fromRef(t, ipB6, ipA6, "theirs first")
						s.toRef(t, ipA4, ipB4, "reply")
					}
					p := peerOf(s.ours, s.ref.key)
					kp := p.keypairs.current.Load()
					if kp == nil || kp.isInitiator != weInitiate {
						t.Fatalf("our session %+v, want initiator=%v", kp, weInitiate)
					}
					ep, _ := p.routes.Endpoint()
					if ep.Dst != netip.AddrPortFrom(netip.IPv6Loopback(), s.ref.port) {
						t.Fatalf("endpoint %v, want [::1]:%d", ep.Dst, s.ref.port)
					}
					// Counters are added once a batch is through, which may
					// be just after the other side has it.
					waitFor(t, "tx, rx and handshake counters", func() bool {
						return p.txBytes.Load() != 0 && p.rxBytes.Load() != 0 && p.lastHandshake.Load() != 0
					})
				})
			}
		}
	}
}

// TestAcceptanceInteropReferenceRekeysMidTraffic: the reference starts a new
// handshake in the middle of traffic (it forgets its session when our peer
// is removed and added again there); we answer as responder while our old
// session is still current, confirm the new one on its first packet, and
// traffic goes on both ways.
func TestAcceptanceInteropReferenceRekeysMidTraffic(t *testing.T) {
	if testing.Short() {
		t.Skip("interop uses real sockets")
	}
	for _, bm := range interopBinds() {
		t.Run(bm.name, func(t *testing.T) {
			s := newInterop(t, bm, true, nil)
			s.toRef(t, ipA4, ipB4, "start")
			s.fromRef(t, ipB4, ipA4, "start back")
			p := peerOf(s.ours, s.ref.key)
			first := p.keypairs.current.Load()
			if !first.isInitiator {
				t.Fatal("we should have initiated the first session")
			}
			for i := 0; i < 20; i++ {
				if i == 10 {
					ourPub := s.ourKey.PublicKey()
					get, err := s.ref.dev.IpcGet()
					must(t, err)
					var psk string
					for _, l := range strings.Split(get, "\n") {
						if v, ok := strings.CutPrefix(l, "preshared_key="); ok {
							psk = v
						}
					}
					cfg := fmt.Sprintf("public_key=%s\nremove=true\npublic_key=%s\npreshared_key=%s\nendpoint=127.0.0.1:%d\nallowed_ip=10.0.0.1/32\nallowed_ip=fd00::1/128\n",
						hex.EncodeToString(ourPub[:]), hex.EncodeToString(ourPub[:]), psk, s.ourPort)
					must(t, s.ref.dev.IpcSet(cfg))
				}
				s.fromRef(t, ipB4, ipA4, fmt.Sprintf("from the reference %d", i))
				s.toRef(t, ipA6, ipB6, fmt.Sprintf("to the reference %d", i))
			}
			cur := p.keypairs.current.Load()
			if cur == first || cur.isInitiator {
				t.Fatalf("after the reference's handshake our session is %p (first %p), initiator=%v; want a new responder session", cur, first, cur.isInitiator)
			}
		})
	}
}
