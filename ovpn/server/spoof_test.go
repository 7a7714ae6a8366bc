package server

import (
	"net"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// A hard reset with a new session id, forged from a connected client's
// address and port, is answered statelessly: the client's session
// survives, and so does a session that completes the forged exchange's
// cookie step but not its TLS handshake.
func TestSpoofedResetKeepsTheClientsSession(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.HandWindow = 1
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	c := dialClient(t, f.clientConfig(t, s, "victim", ""), client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)
	victim := s.Clients()[0].Remote
	forged := wire.SessionID{9, 9, 9, 9, 9, 9, 9, 9}
	reset, err := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: forged})
	if err != nil {
		t.Fatal(err)
	}
	s.udpPacket(victim, reset, nil)
	// An attacker who also sees the cookie (on the path) gets a pending
	// session, which the hand-window ends; the client's session stays.
	sid := s.cookies.sessionID(victim, forged, time.Now())
	ack, err := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.AckV1, Session: forged, NumAcks: 1, Remote: sid})
	if err != nil {
		t.Fatal(err)
	}
	s.udpPacket(victim, ack, nil)
	eventually(t, time.Second, "pending session created", func() bool { return s.peerCount() == 2 })
	ping(t, c, s.TunnelAddress().Addr(), 2)
	eventually(t, 4*time.Second, "pending session dropped after hand-window", func() bool { return s.peerCount() == 1 })
	if cl := s.Clients(); len(cl) != 1 || cl[0].Remote != victim || cl[0].CommonName != "victim" {
		t.Fatalf("clients after the forged reset: %+v", cl)
	}
	ping(t, c, s.TunnelAddress().Addr(), 3)
}

// Resets from one (possibly spoofed) source get a few stateless replies a
// second, not one each: the server is no reflector.
func TestStatelessRepliesPerSourceBudget(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const sent = 100
	for i := 0; i < sent; i++ {
		b, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{3, byte(i)}})
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	buf := make([]byte, 2048)
	for {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			break
		}
		got++
	}
	if got < replyBudgetPerSec || got > 2*replyBudgetPerSec || s.Stats().RepliesWithheld.Load() != uint64(sent-got) {
		t.Fatalf("%d replies to %d resets, %d withheld", got, sent, s.Stats().RepliesWithheld.Load())
	}
}

// A client that really restarts from the same address and port gets its
// new session: it waits beside the old one and replaces it once its TLS
// handshake completes.
func TestRestartFromTheSameAddressReplacesTheSession(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	echoResponder(s)
	nat := newNATProxy(t, s.Addr())
	port := uint16(nat.front.LocalAddr().(*net.UDPAddr).Port)
	cfgA := f.clientConfig(t, s, "before", "")
	cfgA.Remotes[0].Port = port
	a := dialClient(t, cfgA, client.Options{})
	ping(t, a, s.TunnelAddress().Addr(), 1)
	at := s.Clients()[0].Remote
	// The restarted client: a new session through the same NAT mapping.
	cfgB := f.clientConfig(t, s, "after", "")
	cfgB.Remotes[0].Port = port
	b := dialClient(t, cfgB, client.Options{})
	ping(t, b, s.TunnelAddress().Addr(), 2)
	eventually(t, 2*time.Second, "old session replaced", func() bool {
		cl := s.Clients()
		return s.peerCount() == 1 && len(cl) == 1 && cl[0].CommonName == "after" && cl[0].Remote == at
	})
	s.mu.RLock()
	pending := len(s.pending)
	s.mu.RUnlock()
	if pending != 0 {
		t.Fatalf("%d sessions still pending", pending)
	}
}
