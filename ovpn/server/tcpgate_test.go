package server

import (
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// Connections that send nothing (or one byte) are capped per source and
// closed after the first-frame deadline; then a real client gets in.
func TestTCPSilentConnectionsAreCappedAndTimedOut(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(TCP), Options{})
	s.tcpGate.mu.Lock()
	s.tcpGate.wait = 500 * time.Millisecond
	s.tcpGate.mu.Unlock()
	echoResponder(s)
	var conns []net.Conn
	for i := 0; i < maxTCPUnprovenPerSource+4; i++ {
		c, err := net.Dial("tcp4", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{0}) // half a length prefix
		conns = append(conns, c)
	}
	eventually(t, 2*time.Second, "connections over the per-source cap refused", func() bool { return s.Stats().TCPRefused.Load() == 4 })
	if !s.tcpGate.admit(netip.MustParseAddr("127.0.0.2")) {
		t.Fatal("another source refused while one source is at its cap")
	}
	s.tcpGate.release(netip.MustParseAddr("127.0.0.2"))
	start := time.Now()
	for _, c := range conns[:maxTCPUnprovenPerSource] {
		c.SetReadDeadline(time.Now().Add(3 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatal("a silent connection got data")
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("silent connections held for %v", d)
	}
	s.tcpGate.mu.Lock()
	total := s.tcpGate.total
	s.tcpGate.mu.Unlock()
	if total != 0 {
		t.Fatalf("gate still counts %d connections", total)
	}
	c := dialClient(t, f.clientConfig(t, s, "real", ""), client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)
}

func TestTCPGateTotalCap(t *testing.T) {
	var g tcpGate
	for i := 0; i < maxTCPUnproven; i++ {
		if !g.admit(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})) {
			t.Fatalf("connection %d refused under the total cap", i)
		}
	}
	if g.admit(netip.MustParseAddr("192.0.2.1")) {
		t.Fatal("admitted over the total cap")
	}
	// One IPv6 host (a /64) counts as one source.
	var h tcpGate
	for i := 0; i < maxTCPUnprovenPerSource; i++ {
		h.admit(netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)}))
	}
	if h.admit(netip.MustParseAddr("2001:db8::ffff")) {
		t.Fatal("a /64 got more than its share")
	}
}

// TCP connections that sent their reset but no TLS count toward the same
// per-source budget as UDP sessions past the cookie.
func TestTCPUnprovenSessionsPerSourceCap(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(TCP), Options{})
	for i := 0; i < maxUnprovenPerSource+3; i++ {
		c, err := net.Dial("tcp4", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, _ := wire.AppendControl([]byte{0, 0}, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{4, byte(i)}})
		binary.BigEndian.PutUint16(b, uint16(len(b)-2))
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := s.peerCount(); n != maxUnprovenPerSource {
		t.Fatalf("%d TCP sessions without TLS from one address, want %d", n, maxUnprovenPerSource)
	}
}
