package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
)

// Revocation (crl-verify) in server mode: configuration parsing, then
// in-process Wirelane clients and real openvpn 2.6 clients against a
// server whose CRL file is replaced while it runs.

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // atomic, as an operator's tool would
		t.Fatal(err)
	}
}

func TestParseConfigCRLVerify(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.New(t, "CA")
	writeFile(t, filepath.Join(dir, "crl.pem"), ca.CurrentCRL(t, big.NewInt(3)))
	cert, key := ca.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	base := "server 10.8.0.0 255.255.255.0\n<ca>\n" + string(ca.CAPEM) + "</ca>\n<cert>\n" + string(cert) + "</cert>\n<key>\n" + string(key) + "</key>\n"
	c, err := ParseConfig([]byte(base+"crl-verify crl.pem\n"), "s.conf", dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.CRLVerify != filepath.Join(dir, "crl.pem") {
		t.Fatalf("CRLVerify %q", c.CRLVerify)
	}
	writeFile(t, filepath.Join(dir, "ca.pem"), ca.CAPEM)
	at := fmt.Sprintf("s.conf:%d: ", strings.Count(base, "\n")+1)
	for _, tc := range []struct {
		line, want  string
		unsupported bool
	}{
		{"crl-verify /etc/openvpn/crls dir", at + "crl-verify: the directory form (crl-verify DIR dir) is not supported", true},
		{"<crl-verify>\nx\n</crl-verify>", at + "<crl-verify>: inline CRLs are not supported", true},
		{"crl-verify nothere.pem", at + "crl-verify: open " + filepath.Join(dir, "nothere.pem"), false},
		{"crl-verify ca.pem", at + "crl-verify: " + filepath.Join(dir, "ca.pem") + ": no \"X509 CRL\" PEM block", false},
	} {
		_, err := ParseConfig([]byte(base+tc.line+"\n"), "s.conf", dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want error containing %q, got %v", tc.line, tc.want, err)
			continue
		}
		if errors.Is(err, ErrUnsupported) != tc.unsupported {
			t.Errorf("%q: errors.Is(ErrUnsupported) = %v", tc.line, !tc.unsupported)
		}
	}
}

// needCRLWiring fails when the server does not apply Config.CRLVerify to
// its TLS configuration (New passes it as control.TLSParams.CRLFile).
func needCRLWiring(t *testing.T, s *Server, revoked []byte) {
	t.Helper()
	cert := parseCertPEM(t, revoked)
	if err := s.live.Load().tls.VerifyConnection(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}); err == nil {
		t.Fatal("server.New does not pass Config.CRLVerify to control.TLSParams.CRLFile; revocation is not applied")
	}
}

func parseCertPEM(t *testing.T, p []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(p)
	if blk == nil {
		t.Fatal("no PEM certificate")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCRLWirelaneClients(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	crlPath := filepath.Join(dir, "crl.pem")
	lostCert, lostKey := f.pki.Valid(t, "lost-laptop", x509.ExtKeyUsageClientAuth)
	writeFile(t, crlPath, f.pki.CurrentCRL(t, testpki.Serial(t, lostCert)))
	cfg := f.serverConfig(UDP)
	cfg.CRLVerify = crlPath
	log, logs := testlog.New(t)
	s := startServer(t, cfg, Options{Logger: log})
	needCRLWiring(t, s, lostCert)
	go echoResponder(s)

	// The client checks the server against a CRL of its own (client mode).
	cliCRL := filepath.Join(dir, "client-crl.pem")
	writeFile(t, cliCRL, f.pki.CurrentCRL(t, big.NewInt(1000)))
	good := f.clientConfig(t, s, "desk", "")
	good.CRLVerify = cliCRL
	c := dialClient(t, good, client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lost := f.clientConfig(t, s, "lost-laptop", "")
	lost.Cert, lost.Key = lostCert, lostKey
	if _, err := client.Dial(ctx, lost, client.Options{HandshakeTimeout: 3 * time.Second}); err == nil {
		t.Fatal("a revoked client certificate was accepted")
	}
	eventually(t, 3*time.Second, "server logs the revocation", func() bool { return logs.Has("lost-laptop", "is revoked") })

	// Revoke the desk too, without restarting: its next session is refused.
	writeFile(t, crlPath, f.pki.CurrentCRL(t, testpki.Serial(t, lostCert), testpki.Serial(t, good.Cert)))
	if _, err := client.Dial(ctx, good, client.Options{HandshakeTimeout: 3 * time.Second}); err == nil {
		t.Fatal("a certificate revoked at runtime was accepted")
	}
	eventually(t, 3*time.Second, "server logs the runtime revocation", func() bool { return logs.Has("CN=desk", "is revoked") })
	// Client mode: the server's certificate revoked in the client's CRL.
	writeFile(t, cliCRL, f.pki.CurrentCRL(t, testpki.Serial(t, f.srvCert)))
	wary := f.clientConfig(t, s, "wary", "")
	wary.CRLVerify = cliCRL
	_, err := client.Dial(ctx, wary, client.Options{HandshakeTimeout: 3 * time.Second})
	if !errors.Is(err, control.ErrVerify) || !strings.Contains(err.Error(), "CN=server\" (serial") || !strings.Contains(err.Error(), "is revoked") {
		t.Fatalf("client with the server's certificate revoked: %v", err)
	}

	// A CRL that no longer verifies refuses everyone (fails closed).
	writeFile(t, crlPath, testpki.New(t, "Wirelane Test CA").CurrentCRL(t))
	fresh := f.clientConfig(t, s, "fresh", "")
	if _, err := client.Dial(ctx, fresh, client.Options{HandshakeTimeout: 3 * time.Second}); err == nil {
		t.Fatal("accepted with a CRL signed by another key")
	}
	eventually(t, 3*time.Second, "server logs the CRL signature failure", func() bool {
		return logs.Has("does not verify against that CA's certificate")
	})
}

// startOpenVPNWithCert starts an openvpn 2.6 client with the given
// certificate and returns without waiting for the tunnel.
func startOpenVPNWithCert(t *testing.T, dir string, ns *netns.NS, name string, cert, key []byte) *ovpnClient {
	t.Helper()
	c, _ := launchOpenVPNClient(t, dir, ns, name, cert, key, "udp", "127.0.0.1")
	return c
}

// TestE2ECRLOpenVPNClients runs the server from a configuration file with
// crl-verify in a namespace; Debian's openvpn 2.6 clients join over its
// loopback: a good one connects, a revoked one is refused, and a
// certificate revoked while the server runs is refused at its next
// connection.
func TestE2ECRLOpenVPNClients(t *testing.T) {
	needE2E(t)
	f := newFixture(t)
	dir := t.TempDir()
	lostCert, lostKey := f.pki.Valid(t, "lost-laptop", x509.ExtKeyUsageClientAuth)
	goodCert, goodKey := f.pki.Valid(t, "desk", x509.ExtKeyUsageClientAuth)
	for name, b := range map[string][]byte{"ca.crt": f.pki.CAPEM, "server.crt": f.srvCert, "server.key": f.srvKey,
		"crl.pem": f.pki.CurrentCRL(t, testpki.Serial(t, lostCert))} {
		writeFile(t, filepath.Join(dir, name), b)
	}
	conf := "mode server\ntls-server\nport 1194\nproto udp\nlocal 127.0.0.1\ndev tun\ntopology subnet\n" +
		"server 10.8.0.0 255.255.255.0\nca ca.crt\ncert server.crt\nkey server.key\nremote-cert-tls client\n" +
		"crl-verify crl.pem\nkeepalive 10 60\ndata-ciphers AES-256-GCM\n"
	writeFile(t, filepath.Join(dir, "server.conf"), []byte(conf))
	cfg, err := ParseConfigFile(filepath.Join(dir, "server.conf"))
	if err != nil {
		t.Fatal(err)
	}
	ns := netns.New(t, "ovcrl")
	log, logs := testlog.New(t)
	s := startServer(t, cfg, Options{Logger: log, WrapSocket: udpIn(ns)})
	needCRLWiring(t, s, lostCert)

	connected := func(c *ovpnClient) error {
		if strings.Contains(c.logText(), "Initialization Sequence Completed") {
			return nil
		}
		return fmt.Errorf("not yet")
	}
	desk := startOpenVPNWithCert(t, dir, ns, "desk", goodCert, goodKey)
	netns.Eventually(t, 20*time.Second, "openvpn desk connected", func() error { return connected(desk) })
	if _, ok := clientByName(s, "desk"); !ok {
		t.Fatalf("server lists %+v", s.Clients())
	}

	lost := startOpenVPNWithCert(t, dir, ns, "lost", lostCert, lostKey)
	netns.Eventually(t, 20*time.Second, "revoked client refused", func() error {
		if !logs.Has("lost-laptop", "is revoked") {
			return fmt.Errorf("no refusal in the server log")
		}
		return nil
	})
	if connected(lost) == nil {
		t.Fatal("the revoked openvpn client completed its connection")
	}
	if _, ok := clientByName(s, "lost-laptop"); ok {
		t.Fatal("the revoked client is listed")
	}

	// Revoke the desk while the server runs; its next connection fails.
	desk.cmd.Process.Signal(syscall.SIGTERM)
	eventually(t, 5*time.Second, "desk gone", func() bool { _, ok := clientByName(s, "desk"); return !ok })
	writeFile(t, filepath.Join(dir, "crl.pem"), f.pki.CurrentCRL(t, testpki.Serial(t, lostCert), testpki.Serial(t, goodCert)))
	again := startOpenVPNWithCert(t, dir, ns, "desk2", goodCert, goodKey)
	netns.Eventually(t, 20*time.Second, "revoked desk refused", func() error {
		if !logs.Has("CN=desk", "is revoked") {
			return fmt.Errorf("no refusal in the server log")
		}
		return nil
	})
	if connected(again) == nil {
		t.Fatal("the desk completed a connection after its revocation")
	}
}

// A client revoked while connected loses its session at the next
// renegotiation, instead of living on with its old keys.
func TestCRLRevocationEndsConnectedSession(t *testing.T) {
	f := newFixture(t)
	crlPath := filepath.Join(t.TempDir(), "crl.pem")
	writeFile(t, crlPath, f.pki.CurrentCRL(t, big.NewInt(1000)))
	cfg := f.serverConfig(UDP)
	cfg.CRLVerify = crlPath
	cfg.RenegSec = 2 // the server renegotiates every 2 s
	log, logs := testlog.New(t)
	s := startServer(t, cfg, Options{Logger: log})
	go echoResponder(s)

	desk := f.clientConfig(t, s, "desk", "")
	c := dialClient(t, desk, client.Options{})
	ping(t, c, s.TunnelAddress().Addr(), 1)
	eventually(t, 10*time.Second, "a renegotiation while the certificate is good", func() bool {
		return logs.Has("desk", "renegotiating")
	})
	if logs.Has("desk", "session ended") {
		t.Fatal("the session ended before the revocation")
	}

	writeFile(t, crlPath, f.pki.CurrentCRL(t, testpki.Serial(t, desk.Cert)))
	eventually(t, 15*time.Second, "the server ends the revoked client's session", func() bool {
		return logs.Has("desk", "session ended", "is revoked")
	})
	if n := len(s.Clients()); n != 0 {
		t.Errorf("%d clients still listed after the revocation", n)
	}
}
