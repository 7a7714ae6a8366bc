package server

import (
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
