package client

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// genkey runs `openvpn --genkey` in dir.
func genkey(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("openvpn", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("openvpn %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// tls-crypt-v2 against openvpn 2.6: keys from `openvpn --genkey`, the
// HMAC-cookie handshake (openvpn asks for the WKc again), pings, a server
// renegotiation and a client one; then a key Wirelane made from the same
// server key; then a key whose metadata the server's
// tls-crypt-v2-verify script refuses.
func TestE2ETLSCryptV2(t *testing.T) {
	e := newEnv(t)
	genkey(t, e.dir, "--genkey", "tls-crypt-v2-server", "v2server.key")
	genkey(t, e.dir, "--tls-crypt-v2", "v2server.key", "--genkey", "tls-crypt-v2-client", "v2client.key")
	// The verify script allows every key but the one with metadata "deny".
	script := filepath.Join(e.dir, "verify.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n[ \"$metadata_type\" = 0 ] && grep -q deny \"$metadata_file\" && exit 1\nexit 0\n"), 0o700)
	srv := e.startServer(t, false, "tls-crypt-v2 v2server.key force-cookie", "reneg-sec 3", "script-security 2", "tls-crypt-v2-verify "+script)
	text, err := os.ReadFile(filepath.Join(e.dir, "v2client.key"))
	if err != nil {
		t.Fatal(err)
	}
	s := dial(t, e.clientConfig(t, srv, "<tls-crypt-v2>\n"+string(text)+"</tls-crypt-v2>\n"), srv.options(t))
	ping(t, s, 1)
	if !srv.waitLog(t, "Control Channel: using tls-crypt-v2 key", time.Second) {
		t.Fatal("server log lacks tls-crypt-v2")
	}
	// openvpn renegotiates every 3 s (reneg-sec); then the client.
	deadline := time.Now().Add(8 * time.Second)
	for seq := uint16(2); s.KeyID() == 0 && time.Now().Before(deadline); seq++ {
		ping(t, s, seq)
		time.Sleep(200 * time.Millisecond)
	}
	if s.KeyID() == 0 {
		t.Fatal("no server renegotiation")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Renegotiate(ctx); err != nil {
		t.Fatalf("client renegotiation: %v", err)
	}
	ping(t, s, 100)
	s.Close()

	sk, err := wrap.ParseV2ServerKey(mustRead(t, filepath.Join(e.dir, "v2server.key")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user string
		ok   bool
	}{{"laptop-7", true}, {"deny", false}} {
		md, _ := wrap.UserMetadata(base64.StdEncoding.EncodeToString([]byte(tc.user)))
		ck, err := sk.NewClientKey(md)
		if err != nil {
			t.Fatal(err)
		}
		cfg := e.clientConfig(t, srv, "<tls-crypt-v2>\n"+string(ck.Format())+"</tls-crypt-v2>\n")
		if !tc.ok {
			opts := srv.options(t)
			opts.HandshakeTimeout = 3 * time.Second
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			c, err := Dial(ctx, cfg, opts)
			cancel()
			if err == nil {
				c.Close()
				t.Fatalf("key with metadata %q connected", tc.user)
			}
			if !strings.Contains(err.Error(), "may refuse this tls-crypt-v2 client key") {
				t.Errorf("refused key: %v", err)
			}
			if !srv.waitLog(t, "TLS CRYPT V2 VERIFY SCRIPT ERROR", time.Second) {
				t.Fatal("the server's verify script did not refuse the key")
			}
			continue
		}
		c := dial(t, cfg, srv.options(t))
		ping(t, c, 1)
		c.Close()
	}
}

// peer-fingerprint against openvpn 2.6: self-signed certificates, no CA
// on either side, the fingerprints as a single line (client) and an
// inline block (server).
func TestE2EPeerFingerprint(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	srvCert, srvKey, srvFP := testpki.SelfSigned(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey, cliFP := testpki.SelfSigned(t, "laptop", x509.ExtKeyUsageClientAuth)
	for name, b := range map[string][]byte{"server.crt": srvCert, "server.key": srvKey} {
		os.WriteFile(filepath.Join(dir, name), b, 0o600)
	}
	e := &testEnv{dir: dir}
	srv := e.startServerConf(t, false, "port 11940\nproto udp4\nlocal 127.0.0.1\ndev tun\ntopology subnet\nserver 10.199.0.0 255.255.255.0\n"+
		"cert server.crt\nkey server.key\ndh none\nkeepalive 10 60\nverb 4\nreneg-sec 3\n<peer-fingerprint>\n"+cliFP+"\n</peer-fingerprint>\n")
	text := "client\ndev tun\nremote 127.0.0.1 11940 udp\nnobind\nremote-cert-tls server\npeer-fingerprint " + srvFP +
		"\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n"
	cfg, err := config.Parse([]byte(text), "laptop.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	s := dial(t, cfg, srv.options(t))
	defer s.Close()
	deadline := time.Now().Add(8 * time.Second)
	for seq := uint16(1); s.KeyID() == 0 && time.Now().Before(deadline); seq++ {
		ping(t, s, seq)
		time.Sleep(200 * time.Millisecond)
	}
	if s.KeyID() == 0 {
		t.Fatal("no renegotiation")
	}
	ping(t, s, 99)
	// A server whose certificate is not the pinned one is refused.
	bad, err := config.Parse([]byte(strings.Replace(text, srvFP, cliFP, 1)), "laptop.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	opts := srv.options(t)
	opts.HandshakeTimeout = 3 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c, err := Dial(ctx, bad, opts); err == nil || !strings.Contains(err.Error(), "not in peer-fingerprint") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("server with another fingerprint: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tls-crypt-v2 over TCP: openvpn's server sets the session up from the
// first frame, without asking for the WKc again.
func TestE2ETLSCryptV2TCP(t *testing.T) {
	e := newEnv(t)
	genkey(t, e.dir, "--genkey", "tls-crypt-v2-server", "v2server.key")
	genkey(t, e.dir, "--tls-crypt-v2", "v2server.key", "--genkey", "tls-crypt-v2-client", "v2client.key")
	srv := e.startServer(t, true, "tls-crypt-v2 v2server.key")
	s := dial(t, e.clientConfig(t, srv, "tls-crypt-v2 v2client.key\n"), srv.options(t))
	defer s.Close()
	ping(t, s, 1)
	ping(t, s, 2)
}
