package server

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// fixture is a PKI with a server certificate and a static key.
type fixture struct {
	pki             *testpki.PKI
	srvCert, srvKey []byte
	static          *wrap.StaticKey
}

func newFixture(t testing.TB) *fixture {
	f := &fixture{pki: testpki.New(t, "Wirelane Test CA")}
	f.srvCert, f.srvKey = f.pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i*29 + 3)
	}
	f.static = &k
	return f
}

// serverConfig returns a loopback configuration on a free port.
func (f *fixture) serverConfig(proto Proto) *Config {
	return &Config{Listen: netip.MustParseAddrPort("127.0.0.1:0"), Proto: proto, Network: netip.MustParsePrefix("10.8.0.0/24"),
		Common: config.Common{CA: f.pki.CAPEM, Cert: f.srvCert, Key: f.srvKey, Ping: 10, PingRestart: 60, RemoteCertTLS: "client"},
		Push:   []string{"route 10.99.0.0 255.255.255.0"}}
}

func startServer(t testing.TB, cfg *Config, opts Options) *Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testlog.Logger(t)
	}
	s, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// clientConfig builds a Wirelane client configuration for s.
func (f *fixture) clientConfig(t testing.TB, s *Server, cn, extra string) *config.Config {
	t.Helper()
	cert, key := f.pki.Valid(t, cn, x509.ExtKeyUsageClientAuth)
	proto := "udp"
	if s.Config().Proto == TCP {
		proto = "tcp-client"
	}
	text := fmt.Sprintf("client\ndev tun\nremote %s %d %s\nnobind\nremote-cert-tls server\n<ca>\n%s</ca>\n<cert>\n%s</cert>\n<key>\n%s</key>\n%s",
		s.Addr().Addr(), s.Addr().Port(), proto, f.pki.CAPEM, cert, key, extra)
	c, err := config.Parse([]byte(text), cn+".ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dialClient(t testing.TB, cfg *config.Config, opts client.Options) *client.Session {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testlog.Logger(t)
	}
	if opts.HandshakeTimeout == 0 {
		opts.HandshakeTimeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, cfg, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoResponder answers ICMP echo requests the server hands to the host
// side, as the server's TUN device would, until the server closes.
func echoResponder(s *Server) {
	go func() {
		buf := make([]byte, 65535)
		for {
			n, err := s.ReadPacket(buf)
			if err != nil {
				return
			}
			p := buf[:n]
			if n < 28 || p[9] != 1 || p[20] != 8 {
				continue
			}
			src, dst, _ := ipv4Addrs(p)
			_ = s.WritePacket(testnet.ICMPEcho(0, dst, src, binary.BigEndian.Uint16(p[24:]), binary.BigEndian.Uint16(p[26:]), p[28:]))
		}
	}()
}

// ping sends an echo request from c to dst and waits for the reply.
// responder answers requests arriving at c (for client-to-client tests).
func ping(t testing.TB, c *client.Session, dst netip.Addr, seq uint16) {
	t.Helper()
	src := c.Pushed().Local.Addr()
	payload := []byte(fmt.Sprintf("wirelane server ping %d", seq))
	if err := c.WritePacket(testnet.ICMPEcho(8, src, dst, 0x55, seq, payload)); err != nil {
		t.Fatalf("WritePacket: %v", err)
	}
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := c.ReadPacket(buf)
			if err != nil {
				got <- err
				return
			}
			p := buf[:n]
			if n >= 28 && p[9] == 1 && p[20] == 0 && binary.BigEndian.Uint16(p[26:]) == seq && bytes.Equal(p[28:], payload) {
				if s, _, _ := ipv4Addrs(p); s != dst {
					got <- fmt.Errorf("reply from %s, want %s", s, dst)
					return
				}
				got <- nil
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("ping %s: %v", dst, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no echo reply from %s for seq %d", dst, seq)
	}
}

// answerPings makes c answer ICMP echo requests, as a host behind it
// would. It stops when the session ends.
func answerPings(c *client.Session) {
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := c.ReadPacket(buf)
			if err != nil {
				return
			}
			p := buf[:n]
			if n >= 28 && p[9] == 1 && p[20] == 8 {
				src, dst, _ := ipv4Addrs(p)
				_ = c.WritePacket(testnet.ICMPEcho(0, dst, src, binary.BigEndian.Uint16(p[24:]), binary.BigEndian.Uint16(p[26:]), p[28:]))
			}
		}
	}()
}

// peerCount is the number of client sessions the server holds, pushed or
// not.
func (s *Server) peerCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.byID)
}

func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
