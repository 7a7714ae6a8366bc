package server

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// failures returns the server's failed handshakes by reason, the zero
// ones left out.
func failures(s *Server) map[string]uint64 {
	out := map[string]uint64{}
	s.Stats().FailedHandshakes.Each(func(r string, n uint64) {
		if n > 0 {
			out[r] = n
		}
	})
	return out
}

// waitFailure waits until the server counted a failed handshake of
// reason and returns the counts.
func waitFailure(t *testing.T, s *Server, reason string) map[string]uint64 {
	t.Helper()
	eventually(t, 20*time.Second, reason+" counted", func() bool { return failures(s)[reason] > 0 })
	return failures(s)
}

// onlyReasons fails the test when a reason outside want was counted.
func onlyReasons(t *testing.T, got map[string]uint64, want ...string) {
	t.Helper()
	for r := range got {
		if !strings.Contains(" "+strings.Join(want, " ")+" ", " "+r+" ") {
			t.Errorf("reason %s counted (%d); the failures were only %v: %v", r, got[r], want, got)
		}
	}
}

// TestFailedHandshakesByReason: Wirelane clients that the server turns
// away for a certificate from another CA or without the client usage
// (verify), no shared data cipher (auth), a wrong tls-crypt key
// (tls_wrap) and max-clients (max_clients) are each counted under their
// reason, and a client that connects counts nothing.
func TestFailedHandshakesByReason(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.DataCiphers = []data.Cipher{data.AES128GCM}
	cfg.TLSCrypt = f.static
	cfg.MaxClients = 1
	s := startServer(t, cfg, Options{})
	crypt := "<tls-crypt>\n" + string(f.static.Format()) + "</tls-crypt>\n"
	dialFails := func(what string, cc func() error) {
		t.Helper()
		if err := cc(); err == nil {
			t.Fatalf("%s: connected", what)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n := 0
	dial := func(cfgText string, mod func(cc *config.Config)) func() error {
		return func() error {
			n++
			cc := f.clientConfig(t, s, fmt.Sprintf("c%d", n), cfgText)
			if mod != nil {
				mod(cc)
			}
			sess, err := client.Dial(ctx, cc, client.Options{HandshakeTimeout: 3 * time.Second})
			if err == nil {
				sess.Close()
			}
			return err
		}
	}

	// A client that connects, then leaves: nothing counted.
	good := dialClient(t, f.clientConfig(t, s, "good", crypt), client.Options{})
	if got := failures(s); len(got) != 0 {
		t.Fatalf("a connected client counted failures: %v", got)
	}
	// max-clients 1: a second client is refused while the first is on.
	dialFails("second client over max-clients", dial(crypt, nil))
	onlyReasons(t, waitFailure(t, s, "max_clients"), "max_clients")
	good.Close()
	eventually(t, 5*time.Second, "the first client gone", func() bool { return s.peerCount() == 0 })

	other := testpki.New(t, "Other CA")
	dialFails("certificate from another CA", dial(crypt, func(cc *config.Config) { cc.Cert, cc.Key = other.Valid(t, "stranger", x509.ExtKeyUsageClientAuth) }))
	onlyReasons(t, waitFailure(t, s, "verify"), "max_clients", "verify")
	before := failures(s)["verify"]
	dialFails("server certificate as a client's", dial(crypt, func(cc *config.Config) { cc.Cert, cc.Key = f.srvCert, f.srvKey }))
	eventually(t, 5*time.Second, "the second verify failure", func() bool { return failures(s)["verify"] > before })

	err := dial(crypt+"data-ciphers CHACHA20-POLY1305\n", nil)()
	if !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("no shared cipher: %v, want AUTH_FAILED", err)
	}
	onlyReasons(t, waitFailure(t, s, "auth"), "max_clients", "verify", "auth")

	var wrong wrap.StaticKey
	for i := range wrong {
		wrong[i] = byte(i*7 + 1)
	}
	dialFails("wrong tls-crypt key", dial("<tls-crypt>\n"+string(wrong.Format())+"</tls-crypt>\n", nil))
	got := waitFailure(t, s, "tls_wrap")
	onlyReasons(t, got, "max_clients", "verify", "auth", "tls_wrap")
	if s.Stats().FailedHandshakes.Total() != got["max_clients"]+got["verify"]+got["auth"]+got["tls_wrap"] {
		t.Errorf("Total %d does not sum %v", s.Stats().FailedHandshakes.Total(), got)
	}
	t.Logf("failed handshakes: %v", got)
	if got := HandshakeFailureReasons(); len(got) != int(numHandshakeFailures) || got[FailTLSWrap] != "tls_wrap" || FailOther.String() != "other" {
		t.Errorf("reasons %v", got)
	}
}

// TestE2EFailedHandshakesOpenVPN: real OpenVPN 2.6 clients, one with a
// certificate from another CA and one with a wrong tls-crypt key, are
// counted as verify and tls_wrap failures; a good one connects and adds
// nothing.
func TestE2EFailedHandshakesOpenVPN(t *testing.T) {
	f, dir := e2eFixture(t)
	var wrong wrap.StaticKey
	for i := range wrong {
		wrong[i] = byte(i*11 + 5)
	}
	for name, b := range map[string][]byte{"good.tc": f.static.Format(), "wrong.tc": wrong.Format()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ns := netns.New(t, "ovsvcf")
	netns.Run(t, ns, "ip", "link", "set", "lo", "up")
	cfg := f.serverConfig(UDP)
	cfg.Listen = netip.MustParseAddrPort("127.0.0.1:1194")
	cfg.TLSCrypt = f.static
	s := startServer(t, cfg, Options{WrapSocket: udpIn(ns)})

	other := testpki.New(t, "Other CA")
	strCert, strKey := other.Valid(t, "stranger", x509.ExtKeyUsageClientAuth)
	launchOpenVPNClient(t, dir, ns, "stranger", strCert, strKey, "udp", "127.0.0.1", "tls-crypt good.tc")
	onlyReasons(t, waitFailure(t, s, "verify"), "verify")

	cert, key := f.pki.Valid(t, "wrongkey", x509.ExtKeyUsageClientAuth)
	launchOpenVPNClient(t, dir, ns, "wrongkey", cert, key, "udp", "127.0.0.1", "tls-crypt wrong.tc")
	onlyReasons(t, waitFailure(t, s, "tls_wrap"), "verify", "tls_wrap")
	if _, ok := clientByName(s, "wrongkey"); ok {
		t.Fatal("the client with the wrong tls-crypt key is listed")
	}

	before := s.Stats().FailedHandshakes.Total()
	// The two refused clients keep retrying; a good client's connection
	// must not add a reason of its own.
	startOpenVPNClient(t, f, dir, ns, "desk", "127.0.0.1", "tls-crypt good.tc")
	if _, ok := clientByName(s, "desk"); !ok {
		t.Fatalf("server lists %+v", s.Clients())
	}
	onlyReasons(t, failures(s), "verify", "tls_wrap")
	t.Logf("failed handshakes: %v", failures(s))
	if s.Stats().FailedHandshakes.Total() < before {
		t.Fatal("the counters went down")
	}
}

// TestSocketSendErrorsCounted: a Wirelane client connected over a veth
// pair; once the server's namespace has no route to the client, the
// server's sends fail for real (ENETUNREACH) and Stats.SocketSendErrors
// counts them; once the client's has none to the server, the client's
// Session.SocketSendErrors does the same. Before that, nothing counted.
func TestSocketSendErrorsCounted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	f := newFixture(t)
	srvNS, cliNS := netns.New(t, "svcses"), netns.New(t, "svcsec")
	netns.Veth(t, srvNS, "s1", cliNS, "c1")
	netns.Run(t, srvNS, "ip", "addr", "add", "192.168.93.1/24", "dev", "s1")
	netns.Run(t, cliNS, "ip", "addr", "add", "192.168.93.2/24", "dev", "c1")
	cfg := f.serverConfig(UDP)
	cfg.Listen = netip.MustParseAddrPort("192.168.93.1:1194")
	s := startServer(t, cfg, Options{WrapSocket: udpIn(srvNS)})
	echoResponder(s)
	c := dialClient(t, f.clientConfig(t, s, "sendfail", ""), client.Options{WrapSocket: udpIn(cliNS)})
	ping(t, c, s.TunnelAddress().Addr(), 1)
	if n, m := s.Stats().SocketSendErrors.Load(), c.SocketSendErrors(); n != 0 || m != 0 {
		t.Fatalf("send errors while all works: server %d, client %d", n, m)
	}
	toClient := testnet.ICMPEcho(8, s.TunnelAddress().Addr(), c.Pushed().Local.Addr(), 7, 1, []byte("lost"))
	netns.Run(t, srvNS, "ip", "route", "del", "192.168.93.0/24", "dev", "s1")
	if err := s.WritePackets([][]byte{toClient}); err == nil {
		t.Fatal("the server sent without a route to the client")
	}
	if n := s.Stats().SocketSendErrors.Load(); n < 1 {
		t.Fatalf("server send errors %d after a failed send", n)
	}
	toServer := testnet.ICMPEcho(8, c.Pushed().Local.Addr(), s.TunnelAddress().Addr(), 7, 2, []byte("lost"))
	netns.Run(t, cliNS, "ip", "route", "del", "192.168.93.0/24", "dev", "c1")
	if err := c.WritePackets([][]byte{toServer}); err == nil {
		t.Fatal("the client sent without a route to the server")
	}
	if m := c.SocketSendErrors(); m < 1 {
		t.Fatalf("client send errors %d after a failed send", m)
	}
}

// TestFailedHandshakesKeyRefusedAndRateLimit: a tls-crypt-v2 key the
// metadata allow-list refuses counts key_refused, a key of another server
// key tls_wrap; a second client within connect-freq counts rate_limit.
func TestFailedHandshakesKeyRefusedAndRateLimit(t *testing.T) {
	f := newFixture(t)
	sk, _ := wrap.GenerateV2ServerKey()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "allowed"), []byte(base64.StdEncoding.EncodeToString([]byte("alice"))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "server.key"), sk.Format(), 0o600); err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("server 10.8.0.0 255.255.255.0\nlocal 127.0.0.1\nport 0\ntls-crypt-v2 server.key\ntls-crypt-v2-metadata-allow allowed\n"+
		"<ca>\n%s</ca>\n<cert>\n%s</cert>\n<key>\n%s</key>\n", f.pki.CAPEM, f.srvCert, f.srvKey)
	cfg, err := ParseConfig([]byte(text), "server.conf", dir)
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg, Options{})
	refused := func(cn string, ck *wrap.V2ClientKey) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, f.clientConfig(t, s, cn, v2Inline(ck)), client.Options{HandshakeTimeout: time.Second})
		if err == nil {
			c.Close()
			t.Fatalf("%s: connected", cn)
		}
	}
	dialClient(t, f.clientConfig(t, s, "alice", v2Inline(v2ClientKey(t, sk, "alice"))), client.Options{})
	refused("bob", v2ClientKey(t, sk, "bob"))
	onlyReasons(t, waitFailure(t, s, "key_refused"), "key_refused")
	other, _ := wrap.GenerateV2ServerKey()
	refused("mallory", v2ClientKey(t, other, "alice"))
	onlyReasons(t, waitFailure(t, s, "tls_wrap"), "key_refused", "tls_wrap")

	cfg2 := f.serverConfig(UDP)
	cfg2.ConnectFreq, cfg2.ConnectFreqSec = 1, 60
	s2 := startServer(t, cfg2, Options{})
	dialClient(t, f.clientConfig(t, s2, "first", ""), client.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if c, err := client.Dial(ctx, f.clientConfig(t, s2, "second", ""), client.Options{HandshakeTimeout: 2 * time.Second}); err == nil {
		c.Close()
		t.Fatal("a second session within connect-freq 1 60 connected")
	}
	onlyReasons(t, waitFailure(t, s2, "rate_limit"), "rate_limit")
}

// TestFailedHandshakesTimeoutAndTLS: a client that proves its address
// and then sends nothing counts timeout once hand-window has passed; a
// client that refuses the server's certificate (it trusts another CA)
// aborts TLS and counts tls.
func TestFailedHandshakesTimeoutAndTLS(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.HandWindow = 1
	s := startServer(t, cfg, Options{})
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	send := func(p wire.ControlPacket) {
		t.Helper()
		b, err := wire.AppendControl(nil, &p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	csid := wire.SessionID{8, 7, 6, 5, 4, 3, 2, 1}
	send(wire.ControlPacket{Op: wire.HardResetClientV2, Session: csid})
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no reply to the reset: %v", err)
	}
	var reply wire.ControlPacket
	if err := wire.DecodeControl(buf[:n], &reply); err != nil {
		t.Fatal(err)
	}
	send(wire.ControlPacket{Op: wire.AckV1, Session: csid, NumAcks: 1, Remote: reply.Session})
	eventually(t, time.Second, "client created", func() bool { return s.peerCount() == 1 })
	eventually(t, 5*time.Second, "silent client dropped after hand-window", func() bool { return s.peerCount() == 0 })
	if got := waitFailure(t, s, "timeout"); got["timeout"] != 1 {
		t.Errorf("failures %v, want timeout 1", got)
	} else {
		onlyReasons(t, got, "timeout")
	}

	cfg2 := f.serverConfig(UDP)
	s2 := startServer(t, cfg2, Options{})
	cc := f.clientConfig(t, s2, "suspicious", "")
	cc.CA = testpki.New(t, "Another CA").CAPEM
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if sess, err := client.Dial(ctx, cc, client.Options{HandshakeTimeout: 3 * time.Second}); err == nil {
		sess.Close()
		t.Fatal("a client trusting another CA connected")
	}
	onlyReasons(t, waitFailure(t, s2, "tls"), "tls")
}

// TestTCPRefusedCountsRateLimit: TCP connections over the per-source cap
// of connections without a first frame are refused at accept, each
// counted as a rate_limit failure.
func TestTCPRefusedCountsRateLimit(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(TCP), Options{})
	for i := 0; i < maxTCPUnprovenPerSource+3; i++ {
		c, err := net.Dial("tcp4", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	eventually(t, 2*time.Second, "connections over the per-source cap refused", func() bool { return s.Stats().TCPRefused.Load() == 3 })
	if got := failures(s); got["rate_limit"] != 3 {
		t.Errorf("failures %v, want rate_limit 3 (the refused connections)", got)
	} else {
		onlyReasons(t, got, "rate_limit")
	}
}
