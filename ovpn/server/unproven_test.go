package server

import (
	"errors"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// cookieSession completes the cookie exchange from from, as an attacker
// who receives at that address can, and stops before TLS.
func cookieSession(t *testing.T, s *Server, from netip.AddrPort, sid wire.SessionID) {
	t.Helper()
	reset, err := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: sid})
	if err != nil {
		t.Fatal(err)
	}
	s.udpPacket(from, reset, nil)
	ack, err := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.AckV1, Session: sid, NumAcks: 1,
		Remote: s.cookies.sessionID(from, sid, time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	s.udpPacket(from, ack, nil)
}

// One address with hundreds of ports gets a few sessions that have not
// completed their handshake, not max-clients of them: a real client
// still connects.
func TestUnprovenSessionsPerSourceCap(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.MaxClients = 2 * maxUnprovenPerSource
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	attacker := netip.MustParseAddr("192.0.2.7")
	for port := uint16(1000); port < 1300; port++ {
		cookieSession(t, s, netip.AddrPortFrom(attacker, port), wire.SessionID{1, byte(port >> 8), byte(port)})
	}
	if n := s.peerCount(); n != maxUnprovenPerSource {
		t.Fatalf("%d sessions from one address, want %d", n, maxUnprovenPerSource)
	}
	c := dialClient(t, f.clientConfig(t, s, "real", ""), client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)
}

// connect-freq N SEC: the N+1st session within SEC seconds is refused.
func TestConnectFreqEnforced(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.ConnectFreq, cfg.ConnectFreqSec = 2, 60
	s := startServer(t, cfg, Options{})
	for i := byte(1); i <= 3; i++ {
		cookieSession(t, s, netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 0, 2, i}), 1194), wire.SessionID{2, i})
	}
	if n := s.peerCount(); n != 2 {
		t.Fatalf("%d sessions with connect-freq 2 60, want 2", n)
	}
	var fr connectFreq
	t0 := time.Now()
	if !fr.allow(1, time.Second, t0) || fr.allow(1, time.Second, t0.Add(999*time.Millisecond)) || !fr.allow(1, time.Second, t0.Add(time.Second)) {
		t.Fatal("connect-freq 1 1: wrong window")
	}
}

func TestParseConnectFreq(t *testing.T) {
	const creds = testpki.FixtureInline
	for _, tc := range []struct {
		line string
		ok   bool
	}{{"connect-freq 10 60", true}, {"connect-freq 10", false}, {"connect-freq 0 60", false}, {"connect-freq x 60", false}} {
		c, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\n"+tc.line+"\n"+creds), "s.conf", "")
		if tc.ok != (err == nil) {
			t.Fatalf("%q: error %v", tc.line, err)
		}
		if tc.ok && (c.ConnectFreq != 10 || c.ConnectFreqSec != 60) {
			t.Fatalf("%q: %d %d", tc.line, c.ConnectFreq, c.ConnectFreqSec)
		}
		if !tc.ok && !strings.Contains(err.Error(), "s.conf:2") {
			t.Fatalf("%q: error %v without its line", tc.line, err)
		}
	}
}

// chroot is refused with its line, not ignored: the server would
// otherwise run outside it while the file says it does not. user and
// group are kept for the caller, which drops to them
// (internal/tunnel/ovpntunnel).
func TestPrivilegeDropDirectives(t *testing.T) {
	const creds = testpki.FixtureInline
	_, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\nchroot /var/empty\n"+creds), "s.conf", "")
	if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "s.conf:2") {
		t.Errorf("chroot: %v", err)
	}
	cfg, err := ParseConfig([]byte("server 10.8.0.0 255.255.255.0\nuser nobody\ngroup nogroup\n"+creds), "s.conf", "")
	if err != nil || cfg.User != "nobody" || cfg.UserLine != 2 || cfg.Group != "nogroup" || cfg.GroupLine != 3 || len(cfg.Warnings) != 0 {
		t.Fatalf("user and group: %+v, %v", cfg, err)
	}
}
