package server

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

func TestWirelaneClientUDP(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	echoResponder(s)
	c := dialClient(t, f.clientConfig(t, s, "client1", ""), client.Options{})
	p := c.Pushed()
	if p.Local != netip.MustParsePrefix("10.8.0.2/24") || p.Remote != netip.MustParseAddr("10.8.0.1") {
		t.Fatalf("pushed address %v gateway %v", p.Local, p.Remote)
	}
	if !p.TLSEKM || !p.CCExit || !p.HasPeerID || p.PeerID != 0 || p.Cipher != "AES-256-GCM" || p.Ping != 10 || p.PingRestart != 60 {
		t.Fatalf("pushed %+v", p)
	}
	if len(p.Routes) != 1 || p.Routes[0] != netip.MustParsePrefix("10.99.0.0/24") {
		t.Fatalf("pushed routes %v", p.Routes)
	}
	for i := uint16(1); i <= 3; i++ {
		ping(t, c, s.TunnelAddress().Addr(), i)
	}
	cl := s.Clients()
	if len(cl) != 1 || cl[0].CommonName != "client1" || cl[0].Address != p.Local.Addr() {
		t.Fatalf("clients %+v", cl)
	}
	c.Close()
	deadline := time.Now().Add(3 * time.Second)
	for len(s.Clients()) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("client still listed after its exit: %+v", s.Clients())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestStatelessResetKeepsNoState(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.HandWindow = 1
	s := startServer(t, cfg, Options{})
	conn, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(s.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(p wire.ControlPacket) {
		t.Helper()
		b, err := wire.AppendControl(nil, &p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	csid := wire.SessionID{1, 2, 3, 4, 5, 6, 7, 8}
	send(wire.ControlPacket{Op: wire.HardResetClientV2, Session: csid})
	conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 2048)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no reply to the reset: %v", err)
	}
	var reply wire.ControlPacket
	if err := wire.DecodeControl(buf[:n], &reply); err != nil {
		t.Fatal(err)
	}
	// No larger than the reset (14 bytes): the ack of the client's reset
	// waits until the client has proven its address.
	if reply.Op != wire.HardResetServerV2 || reply.ID != 0 || reply.NumAcks != 0 || n > 14 {
		t.Fatalf("reply of %d bytes %+v", n, reply)
	}
	if s.peerCount() != 0 {
		t.Fatal("the server created state for a bare reset")
	}
	// A CONTROL_V1 naming a wrong server session id, or acking nothing,
	// is dropped without state.
	bad := reply.Session
	bad[0] ^= 1
	p := wire.ControlPacket{Op: wire.ControlV1, Session: csid, NumAcks: 1, Remote: bad, ID: 1, Payload: []byte("hello")}
	send(p)
	send(wire.ControlPacket{Op: wire.ControlV1, Session: csid, ID: 1, Payload: []byte("hello")})
	time.Sleep(100 * time.Millisecond)
	if s.peerCount() != 0 || s.Stats().BadControl.Load() != 2 {
		t.Fatalf("peers %d, bad control packets %d", s.peerCount(), s.Stats().BadControl.Load())
	}
	// Acknowledging the reset to the right session id creates the client;
	// it goes away when no TLS handshake follows within hand-window.
	send(wire.ControlPacket{Op: wire.AckV1, Session: csid, NumAcks: 1, Remote: reply.Session})
	eventually(t, time.Second, "client created", func() bool { return s.peerCount() == 1 })
	// The client created acks the client's reset.
	n, err = conn.Read(buf)
	if err != nil {
		t.Fatalf("no ack of the client's reset: %v", err)
	}
	var ack wire.ControlPacket
	if err := wire.DecodeControl(buf[:n], &ack); err != nil || ack.NumAcks != 1 || ack.Acks[0] != 0 || ack.Remote != csid {
		t.Fatalf("after the cookie: %+v, %v", ack, err)
	}
	eventually(t, 4*time.Second, "silent client dropped after hand-window", func() bool { return s.peerCount() == 0 })
}

func TestWirelaneClientTCP(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(TCP), Options{})
	echoResponder(s)
	c := dialClient(t, f.clientConfig(t, s, "tcp1", ""), client.Options{})
	for i := uint16(1); i <= 3; i++ {
		ping(t, c, s.TunnelAddress().Addr(), i)
	}
	c.Close()
	eventually(t, 3*time.Second, "client gone after exit", func() bool { return s.peerCount() == 0 })
}

// tls-auth (SHA256, key direction 0/1), AES-128-GCM and the PRF key
// expansion (the client leaves TLS_KEY_EXPORT out).
func TestTLSAuthPRF(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.TLSAuth, cfg.KeyDirection, cfg.Auth = f.static, wrap.Direction0, "SHA256"
	cfg.DataCiphers = []data.Cipher{data.AES128GCM, data.AES256GCM}
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	c := dialClient(t, f.clientConfig(t, s, "prf", "auth SHA256\nkey-direction 1\n<tls-auth>\n"+string(f.static.Format())+"</tls-auth>\n"),
		client.Options{DisableEKM: true})
	if c.Cipher() != data.AES128GCM || c.Pushed().TLSEKM {
		t.Fatalf("cipher %v ekm %v", c.Cipher(), c.Pushed().TLSEKM)
	}
	ping(t, c, s.TunnelAddress().Addr(), 1)
	if cl := s.Clients(); len(cl) != 1 || cl[0].EKM {
		t.Fatalf("clients %+v", cl)
	}
	// A client with the wrong static key gets no answer at all.
	var wrong wrap.StaticKey
	bad := f.clientConfig(t, s, "prf2", "auth SHA256\nkey-direction 1\n<tls-auth>\n"+string(wrong.Format())+"</tls-auth>\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := client.Dial(ctx, bad, client.Options{HandshakeTimeout: 2 * time.Second}); err == nil {
		t.Fatal("connected with the wrong tls-auth key")
	}
}

func TestTLSCryptChaCha(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.TLSCrypt = f.static
	s := startServer(t, cfg, Options{})
	echoResponder(s)
	c := dialClient(t, f.clientConfig(t, s, "crypt", "data-ciphers CHACHA20-POLY1305\n<tls-crypt>\n"+string(f.static.Format())+"</tls-crypt>\n"), client.Options{})
	if c.Cipher() != data.ChaCha20Poly1305 {
		t.Fatalf("cipher %v", c.Cipher())
	}
	ping(t, c, s.TunnelAddress().Addr(), 1)
	ping(t, c, s.TunnelAddress().Addr(), 2)
}

func TestClientToClient(t *testing.T) {
	f := newFixture(t)
	for _, c2c := range []bool{true, false} {
		t.Run(fmt.Sprintf("client-to-client=%v", c2c), func(t *testing.T) {
			cfg := f.serverConfig(UDP)
			cfg.ClientToClient = c2c
			s := startServer(t, cfg, Options{})
			a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
			b := dialClient(t, f.clientConfig(t, s, "b", ""), client.Options{})
			if a.Pushed().PeerID == b.Pushed().PeerID || a.Pushed().Local == b.Pushed().Local {
				t.Fatalf("clients share peer-id or address: %+v %+v", a.Pushed(), b.Pushed())
			}
			bAddr := b.Pushed().Local.Addr()
			if c2c {
				answerPings(b)
				ping(t, a, bAddr, 1)
				ping(t, a, bAddr, 2)
				return
			}
			// Without client-to-client the packet goes to the host side,
			// whose routing decides.
			req := testnet.ICMPEcho(8, a.Pushed().Local.Addr(), bAddr, 9, 1, []byte("via host"))
			if err := a.WritePacket(req); err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2048)
			n, err := s.ReadPacket(buf)
			if err != nil || !bytes.Equal(buf[:n], req) {
				t.Fatalf("host side got %x, %v", buf[:n], err)
			}
		})
	}
}

func TestSpoofedSourceDropped(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	c := dialClient(t, f.clientConfig(t, s, "spoof", ""), client.Options{})
	if err := c.WritePacket(testnet.ICMPEcho(8, netip.MustParseAddr("10.8.0.77"), s.TunnelAddress().Addr(), 1, 1, nil)); err != nil {
		t.Fatal(err)
	}
	good := testnet.ICMPEcho(8, c.Pushed().Local.Addr(), s.TunnelAddress().Addr(), 1, 2, nil)
	if err := c.WritePacket(good); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2048)
	n, err := s.ReadPacket(buf)
	if err != nil || !bytes.Equal(buf[:n], good) {
		t.Fatalf("got %x %v, want the packet with the client's own source", buf[:n], err)
	}
	if s.Stats().Spoofed.Load() != 1 {
		t.Fatalf("spoofed count %d", s.Stats().Spoofed.Load())
	}
	if err := s.WritePacket(testnet.ICMPEcho(8, s.TunnelAddress().Addr(), netip.MustParseAddr("10.8.0.99"), 1, 1, nil)); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("write to an unassigned address: %v", err)
	}
}

// Keys change while traffic flows: the server renegotiates every second
// (reneg-sec 1) and the client starts one as well; keepalive pings (ping
// 1, ping-restart 3) keep both sides up while idle.
func TestRenegotiationAndKeepalive(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.RenegSec, cfg.Ping, cfg.PingRestart = 1, 1, 3
	s := startServer(t, cfg, Options{TransitionWindow: 2 * time.Second})
	echoResponder(s)
	c := dialClient(t, f.clientConfig(t, s, "reneg", "reneg-sec 0\n"), client.Options{})
	seen := map[uint8]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for seq := uint16(1); time.Now().Before(deadline) && len(seen) < 3; seq++ {
		ping(t, c, s.TunnelAddress().Addr(), seq)
		seen[c.KeyID()] = true
		time.Sleep(100 * time.Millisecond)
	}
	if len(seen) < 3 || !seen[0] {
		t.Fatalf("key ids used: %v (want 0 and two renegotiated ones)", seen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Renegotiate(ctx); err != nil {
		t.Fatalf("client-initiated renegotiation: %v", err)
	}
	ping(t, c, s.TunnelAddress().Addr(), 100)
	time.Sleep(4 * time.Second) // idle: only keepalive pings
	if c.Err() != nil || len(s.Clients()) != 1 {
		t.Fatalf("after idling: client %v, server lists %d", c.Err(), len(s.Clients()))
	}
	ping(t, c, s.TunnelAddress().Addr(), 101)
}

func TestDuplicateCommonNameReplaced(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	cfg := f.clientConfig(t, s, "same", "")
	a := dialClient(t, cfg, client.Options{})
	b := dialClient(t, cfg, client.Options{})
	eventually(t, 3*time.Second, "old session replaced", func() bool { return s.peerCount() == 1 })
	// The server marks the new session connected as it sends the push
	// reply, which the client may see first: wait for the listing too.
	eventually(t, 3*time.Second, "the new session listed", func() bool {
		cl := s.Clients()
		return len(cl) == 1 && cl[0].Address == b.Pushed().Local.Addr()
	})
	if cl := s.Clients(); len(cl) != 1 || cl[0].Address != b.Pushed().Local.Addr() {
		t.Fatalf("clients %+v", cl)
	}
	_ = a
}

func TestRejectedClients(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.DataCiphers = []data.Cipher{data.AES128GCM}
	s := startServer(t, cfg, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A certificate from another CA.
	other := testpki.New(t, "Other CA")
	cc := f.clientConfig(t, s, "stranger", "")
	cc.Cert, cc.Key = other.Valid(t, "stranger", x509.ExtKeyUsageClientAuth)
	if _, err := client.Dial(ctx, cc, client.Options{HandshakeTimeout: 3 * time.Second}); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
	// A server certificate used as a client one fails remote-cert-tls client.
	cc = f.clientConfig(t, s, "srv", "")
	cc.Cert, cc.Key = f.srvCert, f.srvKey
	if _, err := client.Dial(ctx, cc, client.Options{HandshakeTimeout: 3 * time.Second}); err == nil {
		t.Fatal("a certificate without clientAuth was accepted")
	}
	// No shared cipher: AUTH_FAILED.
	cc = f.clientConfig(t, s, "chacha", "data-ciphers CHACHA20-POLY1305\n")
	_, err := client.Dial(ctx, cc, client.Options{HandshakeTimeout: 5 * time.Second})
	if !errors.Is(err, client.ErrAuthFailed) {
		t.Fatalf("no shared cipher: %v, want AUTH_FAILED", err)
	}
	eventually(t, 3*time.Second, "rejected sessions forgotten", func() bool { return s.peerCount() == 0 })
}

func TestCloseTellsClientsToRestart(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	c := dialClient(t, f.clientConfig(t, s, "bye", ""), client.Options{})
	s.Close()
	select {
	case <-c.Done():
		if !errors.Is(c.Err(), client.ErrRestart) {
			t.Fatalf("client ended with %v, want a restart", c.Err())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("client not told about the shutdown")
	}
	if _, err := s.ReadPacket(make([]byte, 10)); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReadPacket after Close: %v", err)
	}
}

// natProxy relays UDP between one client and the server, and can move
// to a new source port mid-session, as a NAT box does when its mapping
// expires.
type natProxy struct {
	front  *net.UDPConn
	server *net.UDPAddr
	mu     sync.Mutex // guards back and client
	back   *net.UDPConn
	client *net.UDPAddr
}

func newNATProxy(t *testing.T, server netip.AddrPort) *natProxy {
	front, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	n := &natProxy{front: front, server: net.UDPAddrFromAddrPort(server)}
	n.rebind(t)
	t.Cleanup(func() { front.Close(); n.mu.Lock(); n.back.Close(); n.mu.Unlock() })
	go func() {
		buf := make([]byte, 65535)
		for {
			k, from, err := front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.client = from
			back := n.back
			n.mu.Unlock()
			back.WriteToUDP(buf[:k], n.server)
		}
	}()
	return n
}

// rebind switches to a new back socket (a new source port).
func (n *natProxy) rebind(t *testing.T) {
	back, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	n.mu.Lock()
	n.back = back
	n.mu.Unlock()
	go func() {
		buf := make([]byte, 65535)
		for {
			k, _, err := back.ReadFromUDP(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			c := n.client
			n.mu.Unlock()
			if c != nil {
				n.front.WriteToUDP(buf[:k], c)
			}
		}
	}()
}

func TestClientFloatsToNewAddress(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	echoResponder(s)
	nat := newNATProxy(t, s.Addr())
	cfg := f.clientConfig(t, s, "roamer", "")
	cfg.Remotes[0].Port = uint16(nat.front.LocalAddr().(*net.UDPAddr).Port)
	c := dialClient(t, cfg, client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)
	before := s.Clients()[0].Remote
	nat.mu.Lock()
	old := nat.back
	nat.mu.Unlock()
	nat.rebind(t)
	ping(t, c, s.TunnelAddress().Addr(), 2)
	old.Close()
	ping(t, c, s.TunnelAddress().Addr(), 3)
	if after := s.Clients()[0].Remote; after == before {
		t.Fatalf("server still sends to %v", before)
	}
}
