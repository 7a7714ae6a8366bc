package server

import (
	"context"
	"crypto/sha1"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// v2Fixture is a server key and client keys with user metadata.
func v2ClientKey(t testing.TB, sk *wrap.V2ServerKey, user string) *wrap.V2ClientKey {
	t.Helper()
	md, err := wrap.UserMetadata(base64.StdEncoding.EncodeToString([]byte(user)))
	if err != nil {
		t.Fatal(err)
	}
	ck, err := sk.NewClientKey(md)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

func v2Inline(ck *wrap.V2ClientKey) string {
	return "<tls-crypt-v2>\n" + string(ck.Format()) + "</tls-crypt-v2>\n"
}

// A Wirelane client with its tls-crypt-v2 key joins over UDP (the
// stateless cookie exchange with the WKc sent twice) and TCP, pings and
// renegotiates under its own key.
func TestTLSCryptV2Sessions(t *testing.T) {
	for _, proto := range []Proto{UDP, TCP} {
		t.Run(string(proto), func(t *testing.T) {
			f := newFixture(t)
			sk, _ := wrap.GenerateV2ServerKey()
			cfg := f.serverConfig(proto)
			cfg.TLSCryptV2Server = sk
			s := startServer(t, cfg, Options{})
			echoResponder(s)
			c := dialClient(t, f.clientConfig(t, s, "v2client", v2Inline(v2ClientKey(t, sk, "v2client"))), client.Options{})
			ping(t, c, s.TunnelAddress().Addr(), 1)
			if cl := s.Clients(); len(cl) != 1 || cl[0].KeyMetadata != "user "+base64.StdEncoding.EncodeToString([]byte("v2client")) {
				t.Fatalf("clients %+v", cl)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := c.Renegotiate(ctx); err != nil {
				t.Fatalf("renegotiate: %v", err)
			}
			ping(t, c, s.TunnelAddress().Addr(), 2)
			if c.KeyID() != 1 {
				t.Fatalf("key id %d after renegotiation", c.KeyID())
			}
			if n := s.Stats().BadControl.Load(); n != 0 && proto == TCP {
				t.Errorf("%d bad control packets", n)
			}
		})
	}
}

// tls-crypt-v2-metadata-allow and tls-crypt-v2-max-age refuse keys before
// TLS; a key from another server key is dropped; the allow file is read
// again when it changes.
func TestTLSCryptV2MetadataPolicy(t *testing.T) {
	f := newFixture(t)
	sk, _ := wrap.GenerateV2ServerKey()
	dir := t.TempDir()
	allow := filepath.Join(dir, "allowed")
	write := func(lines ...string) {
		t.Helper()
		// Another size each time: the change shows even within the
		// file system's time granularity.
		if err := os.WriteFile(allow, []byte("# allowed client keys\n"+strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	write(b64("alice") + " # Alice's laptop")
	text := fmt.Sprintf("server 10.8.0.0 255.255.255.0\nlocal 127.0.0.1\nport 0\ntls-crypt-v2 server.key\ntls-crypt-v2-metadata-allow allowed\ntls-crypt-v2-max-age 30\n"+
		"<ca>\n%s</ca>\n<cert>\n%s</cert>\n<key>\n%s</key>\n", f.pki.CAPEM, f.srvCert, f.srvKey)
	if err := os.WriteFile(filepath.Join(dir, "server.key"), sk.Format(), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig([]byte(text), "server.conf", dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TLSCryptV2MaxAge = 0 // user metadata has no timestamp; max-age is checked below
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	refused := func(cn string, ck *wrap.V2ClientKey) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		c, err := client.Dial(ctx, f.clientConfig(t, s, cn, v2Inline(ck)), client.Options{Logger: testlog.Logger(t), HandshakeTimeout: time.Second})
		if err == nil {
			c.Close()
			t.Fatalf("%s: connected", cn)
		}
	}
	alice := dialClient(t, f.clientConfig(t, s, "alice", v2Inline(v2ClientKey(t, sk, "alice"))), client.Options{})
	ping(t, alice, s.TunnelAddress().Addr(), 1)
	bob := v2ClientKey(t, sk, "bob")
	refused("bob", bob)
	if s.Stats().KeyRefused.Load() == 0 {
		t.Fatal("bob's key not counted as refused")
	}
	other, _ := wrap.GenerateV2ServerKey()
	before := s.Stats().KeyRefused.Load()
	refused("mallory", v2ClientKey(t, other, "alice"))
	if s.Stats().KeyRefused.Load() != before {
		t.Fatal("a key of another server key reached the metadata check")
	}
	write(b64("alice"), b64("bob"))
	time.Sleep(1100 * time.Millisecond) // the file is looked at once a second
	c := dialClient(t, f.clientConfig(t, s, "bob", v2Inline(bob)), client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 2)

	// max-age: a timestamped key from 40 days ago is refused, a fresh
	// one and a 20-day-old one are not; user metadata has no time.
	now := time.Now()
	l := *s.live.Load()
	l.cfg.TLSCryptV2MaxAge = 30
	s.live.Store(&l)
	s.v2allow = nil
	for _, tc := range []struct {
		md []byte
		ok bool
	}{{wrap.TimestampMetadata(now), true}, {wrap.TimestampMetadata(now.Add(-20 * 24 * time.Hour)), true},
		{wrap.TimestampMetadata(now.Add(-40 * 24 * time.Hour)), false}, {[]byte{wrap.MetadataUser, 'x'}, false}} {
		if err := s.v2Allowed(tc.md, now); (err == nil) != tc.ok {
			t.Errorf("max-age 30, metadata %s: %v", wrap.DescribeMetadata(tc.md), err)
		}
	}
}

// A flood of HARD_RESET_CLIENT_V3 packets from spoofed sources, each
// with a valid client key (the worst case: a leaked key), leaves no
// session and no memory behind: every one is answered statelessly and
// forgotten. A real client connects during the flood.
func TestTLSCryptV2SpoofedFloodKeepsNoState(t *testing.T) {
	f := newFixture(t)
	sk, _ := wrap.GenerateV2ServerKey()
	cfg := f.serverConfig(UDP)
	cfg.TLSCryptV2Server = sk
	s := startServer(t, cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	echoResponder(s)
	leaked := v2ClientKey(t, sk, "leaked")
	resetFor := func(i int) []byte {
		w, err := wrap.NewV2Client(leaked)
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{7, byte(i >> 16), byte(i >> 8), byte(i)}})
		b, err := w.Wrap(nil, plain)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	const n = 10000 // a round; 19 s under the race detector at 20000
	pkts := make([][]byte, 256)
	for i := range pkts {
		pkts[i] = resetFor(i)
	}
	// Sources 198.18.x.y; each round uses other ports, so state kept per
	// source address and port would grow round after round.
	flood := func(round int) {
		for i := 0; i < n; i++ {
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), uint16(1024+round*n+i))
			s.udpPacket(src, pkts[i%len(pkts)], nil)
		}
	}
	c := dialClient(t, f.clientConfig(t, s, "real", v2Inline(v2ClientKey(t, sk, "real"))), client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)
	flood(0) // warms the pools and sizes the reply budget's map
	// A second real client connects while spoofed resets arrive.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); flood(1) }()
	c2 := dialClient(t, f.clientConfig(t, s, "real2", v2Inline(v2ClientKey(t, sk, "real2"))), client.Options{})
	ping(t, c2, s.TunnelAddress().Addr(), 1)
	wg.Wait()
	// Then the memory over two more rounds, the clients up.
	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	flood(2)
	ping(t, c, s.TunnelAddress().Addr(), 2)
	flood(3)
	runtime.GC()
	runtime.ReadMemStats(&m1)
	s.mu.RLock()
	peers, pending, unproven := len(s.byID), len(s.pending), len(s.unproven)
	s.mu.RUnlock()
	if peers != 2 || pending != 0 || unproven != 0 {
		t.Fatalf("after %d spoofed resets: %d sessions, %d pending, %d unproven sources (want only the two real clients)", 4*n, peers, pending, unproven)
	}
	s.graveMu.Lock()
	graves := len(s.graves)
	s.graveMu.Unlock()
	if graves != 0 {
		t.Fatalf("%d graves", graves)
	}
	if s.Stats().BadControl.Load() != 0 {
		t.Fatalf("%d spoofed resets not answered as valid", s.Stats().BadControl.Load())
	}
	// 20000 resets kept at 50 bytes each would be 1 MB; a session is
	// kilobytes.
	grow := int64(m1.HeapAlloc) - int64(m0.HeapAlloc)
	t.Logf("heap %d -> %d bytes (%+d) over %d spoofed resets; %d replies withheld (budget)", m0.HeapAlloc, m1.HeapAlloc, grow, 2*n, s.Stats().RepliesWithheld.Load())
	if grow > 1<<20 {
		t.Fatalf("heap grew by %d bytes over %d spoofed resets", grow, 2*n)
	}
	ping(t, c, s.TunnelAddress().Addr(), 2)
}

// A server refuses a reset without early negotiation (an OpenVPN 2.5
// client) rather than keep state for it.
func TestTLSCryptV2ResetWithoutCookieSupportDropped(t *testing.T) {
	f := newFixture(t)
	sk, _ := wrap.GenerateV2ServerKey()
	cfg := f.serverConfig(UDP)
	cfg.TLSCryptV2Server = sk
	s := startServer(t, cfg, Options{})
	ck := v2ClientKey(t, sk, "old")
	tc, _ := wrap.NewTLSCrypt(&ck.Key, false) // ids from 1: no EARLY_NEG_START
	plain, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{5}})
	plain[0] = wire.HeaderByte(wire.HardResetClientV3, 0)
	b, _ := tc.Wrap(nil, plain)
	b = append(b, ck.WKc...)
	s.udpPacket(netip.MustParseAddrPort("127.0.0.1:9"), b, nil)
	if s.Stats().NoCookie.Load() != 1 || s.peerCount() != 0 {
		t.Fatalf("no-cookie resets %d, sessions %d", s.Stats().NoCookie.Load(), s.peerCount())
	}
}

// peer-fingerprint: self-signed certificates on both sides, no CA, over
// UDP; a client whose certificate is not listed is refused.
func TestPeerFingerprintSelfSigned(t *testing.T) {
	srvCert, srvKey, srvFP := testpki.SelfSigned(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey, cliFP := testpki.SelfSigned(t, "laptop", x509.ExtKeyUsageClientAuth)
	otherCert, otherKey, _ := testpki.SelfSigned(t, "stranger", x509.ExtKeyUsageClientAuth)
	text := fmt.Sprintf("server 10.8.0.0 255.255.255.0\nlocal 127.0.0.1\nport 0\nremote-cert-tls client\n"+
		"<peer-fingerprint>\n# the laptop\n%s\n</peer-fingerprint>\n<cert>\n%s</cert>\n<key>\n%s</key>\n", cliFP, srvCert, srvKey)
	cfg, err := ParseConfig([]byte(text), "server.conf", "")
	if err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	clientFile := func(cert, key []byte) *config.Config {
		c, err := config.Parse([]byte(fmt.Sprintf("client\ndev tun\nremote %s %d udp\nnobind\nremote-cert-tls server\npeer-fingerprint %s\n<cert>\n%s</cert>\n<key>\n%s</key>\n",
			s.Addr().Addr(), s.Addr().Port(), strings.ToLower(srvFP), cert, key)), "laptop.ovpn", "")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := dialClient(t, clientFile(cliCert, cliKey), client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)
	if cl := s.Clients(); len(cl) != 1 || cl[0].CommonName != "laptop" {
		t.Fatalf("clients %+v", cl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	if c2, err := client.Dial(ctx, clientFile(otherCert, otherKey), client.Options{Logger: testlog.Logger(t), HandshakeTimeout: 3 * time.Second}); err == nil {
		c2.Close()
		t.Fatal("a client with an unlisted certificate connected")
	}
}

// Arbitrary datagrams to a tls-crypt-v2 server, seeded with a valid reset
// and a valid CONTROL_WKC_V1 of a known client key, never create a client
// without the cookie and never panic.
func FuzzServerPacketV2(f *testing.F) {
	fx := newFixture(f)
	sk, _ := wrap.GenerateV2ServerKey()
	cfg := fx.serverConfig(UDP)
	cfg.TLSCryptV2Server = sk
	s, err := New(cfg, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	ck := v2ClientKey(f, sk, "fuzz")
	w, _ := wrap.NewV2Client(ck)
	reset, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{1}})
	r, _ := w.Wrap(nil, reset)
	f.Add(r)
	// The server's reply turns on the WKc resend; message 1 is then a
	// CONTROL_WKC_V1 (with a cookie the fuzzer cannot know).
	srvW, _ := wrap.NewV2Session(&ck.Key, nil)
	reply, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetServerV2, Session: wire.SessionID{9}, Payload: wrap.EarlyNegReply()})
	rw, _ := srvW.Wrap(nil, reply)
	w.Unwrap(nil, rw)
	msg, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.ControlV1, Session: wire.SessionID{1}, NumAcks: 1, Remote: wire.SessionID{9}, ID: 1})
	m, _ := w.Wrap(nil, msg)
	f.Add(m)
	f.Add(ck.WKc)
	from := netip.MustParseAddrPort("127.0.0.1:9")
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if len(pkt) == 0 || len(pkt) > 65535 {
			return
		}
		s.udpPacket(from, pkt, nil)
		if n := s.peerCount(); n != 0 {
			t.Fatalf("a datagram from an unknown address created %d client(s)", n)
		}
	})
}

// A CONTROL_WKC_V1 replayed from the client's address creates no second
// session: the session it started rejects it as a replay.
func TestTLSCryptV2ReplayedWKcCreatesNoSession(t *testing.T) {
	f := newFixture(t)
	sk, _ := wrap.GenerateV2ServerKey()
	cfg := f.serverConfig(UDP)
	cfg.TLSCryptV2Server = sk
	s := startServer(t, cfg, Options{})
	ck := v2ClientKey(t, sk, "replayed")
	w, _ := wrap.NewV2Client(ck)
	from := netip.MustParseAddrPort("127.0.0.1:9")
	sid := wire.SessionID{4, 4}
	reset, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: sid})
	r, _ := w.Wrap(nil, reset)
	s.udpPacket(from, r, nil)
	// What the server's reply says, without a socket to read it from.
	cookie := s.cookies.sessionID(from, sid, time.Now())
	srvW, _ := wrap.NewV2Session(&ck.Key, nil)
	reply, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetServerV2, Session: cookie, Payload: wrap.EarlyNegReply()})
	rw, _ := srvW.Wrap(nil, reply)
	if _, err := w.Unwrap(nil, rw); err != nil || !w.ResendWKc() {
		t.Fatalf("reply: %v", err)
	}
	msg, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.ControlV1, Session: sid, NumAcks: 1, Remote: cookie, ID: 1})
	m, _ := w.Wrap(nil, msg)
	if op, _ := wire.Header(m[0]); op != wire.ControlWKCV1 {
		t.Fatalf("message 1 is %v", op)
	}
	s.udpPacket(from, m, nil)
	if n := s.peerCount(); n != 1 {
		t.Fatalf("%d sessions after the CONTROL_WKC_V1", n)
	}
	for i := 0; i < 3; i++ {
		s.udpPacket(from, m, nil)
	}
	if n := s.peerCount(); n != 1 {
		t.Fatalf("%d sessions after replaying the CONTROL_WKC_V1", n)
	}
}

// A reset sent twice (OpenVPN 2.6 clients do at start) gets two replies
// the client accepts: their packet ids differ. The same for tls-crypt-v2,
// tls-crypt and tls-auth.
func TestDuplicateResetRepliesAreNoReplays(t *testing.T) {
	f := newFixture(t)
	sk, _ := wrap.GenerateV2ServerKey()
	ck := v2ClientKey(t, sk, "twice")
	for _, tc := range []struct {
		name   string
		set    func(*Config)
		client func() wrap.Wrapper
	}{
		{"tls-crypt-v2", func(c *Config) { c.TLSCryptV2Server = sk }, func() wrap.Wrapper { w, _ := wrap.NewV2Client(ck); return w }},
		{"tls-crypt", func(c *Config) { c.TLSCrypt = f.static }, func() wrap.Wrapper { w, _ := wrap.NewTLSCrypt(f.static, false); return w }},
		{"tls-auth", func(c *Config) { c.TLSAuth, c.KeyDirection = f.static, wrap.Direction0 }, func() wrap.Wrapper {
			return wrap.NewTLSAuth(f.static, wrap.Direction1, sha1.New)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := f.serverConfig(UDP)
			tc.set(cfg)
			s := startServer(t, cfg, Options{})
			w := tc.client()
			conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(s.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			reset, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{8}})
			for i := 0; i < 2; i++ {
				r, _ := w.Wrap(nil, reset)
				if _, err := conn.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			conn.SetReadDeadline(time.Now().Add(3 * time.Second))
			buf := make([]byte, 2048)
			for i := 0; i < 2; i++ {
				n, err := conn.Read(buf)
				if err != nil {
					t.Fatalf("reply %d: %v", i+1, err)
				}
				if _, err := w.Unwrap(nil, buf[:n]); err != nil {
					t.Fatalf("reply %d: %v", i+1, err)
				}
			}
		})
	}
}

// Reloading: another tls-crypt-v2 server key needs a restart, a new
// max-age does not; a peer-fingerprint list without a connected client's
// certificate refuses that client.
func TestReloadTLSCryptV2AndFingerprints(t *testing.T) {
	f := newFixture(t)
	sk, _ := wrap.GenerateV2ServerKey()
	cfg := f.serverConfig(UDP)
	cfg.TLSCryptV2Server = sk
	cliCert, cliKey, cliFP := testpki.SelfSigned(t, "pinned", x509.ExtKeyUsageClientAuth)
	fp, _ := control.ParseFingerprint(cliFP)
	cfg.CA = nil
	cfg.PeerFingerprints = []control.Fingerprint{fp}
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	text := fmt.Sprintf("client\ndev tun\nremote %s %d udp\nnobind\n<ca>\n%s</ca>\n<cert>\n%s</cert>\n<key>\n%s</key>\n%s",
		s.Addr().Addr(), s.Addr().Port(), f.pki.CAPEM, cliCert, cliKey, v2Inline(v2ClientKey(t, sk, "pinned")))
	ccfg, err := config.Parse([]byte(text), "pinned.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	c := dialClient(t, ccfg, client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)

	other, _ := wrap.GenerateV2ServerKey()
	next := *cfg
	next.TLSCryptV2Server = other
	if _, err := s.PlanReload(&next); !errors.Is(err, ErrNeedsRestart) || !strings.Contains(err.Error(), "tls-crypt-v2") {
		t.Fatalf("another server key: %v", err)
	}
	next = *cfg
	next.TLSCryptV2MaxAge = 10
	if p, err := s.PlanReload(&next); err != nil || len(p.Refused) != 0 {
		t.Fatalf("max-age: %v %+v", err, p)
	}
	_, _, otherFP := testpki.SelfSigned(t, "someone", x509.ExtKeyUsageClientAuth)
	ofp, _ := control.ParseFingerprint(otherFP)
	next = *cfg
	next.PeerFingerprints = []control.Fingerprint{ofp}
	p, err := s.PlanReload(&next)
	if err != nil || len(p.Refused) != 1 || !strings.Contains(p.Refused[0].Reason, "not in peer-fingerprint") {
		t.Fatalf("fingerprints: %v %+v", err, p)
	}
}
