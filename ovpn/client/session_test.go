package client

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/data"
)

func testConfig(t *testing.T, extra string) *config.Config {
	p := testpki.New(t, "CA")
	cert, key := p.Valid(t, "client", x509.ExtKeyUsageClientAuth)
	text := fmt.Sprintf("client\nremote 127.0.0.1 9 udp\n<ca>\n%s</ca>\n<cert>\n%s</cert>\n<key>\n%s</key>\n%s", p.CAPEM, cert, key, extra)
	c, err := config.Parse([]byte(text), "t.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestPeerInfoAndOptions(t *testing.T) {
	s := &Session{cfg: testConfig(t, "data-ciphers CHACHA20-POLY1305:AES-256-GCM\n"), tr: &tcpTransport{}}
	pi := s.peerInfo()
	for _, want := range []string{"IV_PROTO=142\n", "IV_CIPHERS=CHACHA20-POLY1305:AES-256-GCM\n", "IV_NCP=2\n", "IV_VER=" + Version + "\n"} {
		if !strings.Contains(pi, want) {
			t.Errorf("peer-info lacks %q:\n%s", want, pi)
		}
	}
	s.opts.DisableEKM = true
	if !strings.Contains(s.peerInfo(), "IV_PROTO=134\n") {
		t.Errorf("DisableEKM still announces TLS_KEY_EXPORT: %s", s.peerInfo())
	}
	o := s.optionsString(data.AES128GCM)
	if !strings.HasPrefix(o, "V4,dev-type tun,") || !strings.Contains(o, "proto TCPv4_CLIENT") || !strings.Contains(o, "keysize 128") || !strings.HasSuffix(o, "tls-client") {
		t.Errorf("options string %q", o)
	}
}

// The compression lines of the peer-info, as OpenVPN 2.6.14 sends them:
// the stubs alone when only stubs are allowed (no compress line, comp-lzo
// no, allow-compression no) or the file has compress stub or stub-v2;
// the algorithms it decompresses otherwise (each row as OpenVPN 2.6.14's
// server logged a 2.6.14 client's peer-info with the same lines).
func TestPeerInfoCompression(t *testing.T) {
	stubs := []string{"IV_LZO_STUB=1\n", "IV_COMP_STUB=1\n", "IV_COMP_STUBv2=1\n"}
	algs := []string{"IV_LZ4=1\n", "IV_LZ4v2=1\n", "IV_LZO=1\n", "IV_COMP_STUB=1\n", "IV_COMP_STUBv2=1\n"}
	for lines, want := range map[string][]string{
		"": stubs, "comp-lzo no\n": stubs, "compress stub-v2\n": stubs, "compress stub-v2\nallow-compression asym\n": stubs,
		"allow-compression no\ncompress stub-v2\n": stubs,
		"compress lz4-v2\n":                        algs, "comp-lzo\n": algs, "allow-compression asym\n": algs, "comp-lzo no\nallow-compression asym\n": algs, "compat-mode 2.5.9\n": algs, "compat-mode 2.6.0\n": stubs, "compress lzo\nallow-compression yes\n": algs,
	} {
		pi := (&Session{cfg: testConfig(t, lines), tr: &tcpTransport{}}).peerInfo()
		for _, w := range want {
			if !strings.Contains(pi, w) {
				t.Errorf("%q: peer-info lacks %q:\n%s", lines, w, pi)
			}
		}
		if other := strings.Contains(pi, "IV_LZ4=1"); other != (len(want) == len(algs)) {
			t.Errorf("%q: announces algorithms %v:\n%s", lines, other, pi)
		}
		if other := strings.Contains(pi, "IV_LZO_STUB=1"); other != (len(want) == len(stubs)) {
			t.Errorf("%q: announces the LZO stub %v:\n%s", lines, other, pi)
		}
	}
}

func TestDialErrors(t *testing.T) {
	_, err := Dial(context.Background(), testConfig(t, "auth-user-pass\n"), Options{})
	if err == nil || !strings.Contains(err.Error(), "username") {
		t.Fatalf("auth-user-pass without credentials: %v", err)
	}
	// Nothing listens on UDP port 9 of loopback: the hard reset goes
	// unanswered and Dial gives up with a timeout that says so.
	start := time.Now()
	_, err = Dial(context.Background(), testConfig(t, ""), Options{HandshakeTimeout: 500 * time.Millisecond})
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "no reply from the server") {
		t.Fatalf("unreachable server: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	// A cancelled context stops the attempt at once.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Dial(ctx, testConfig(t, ""), Options{}); err == nil {
		t.Fatal("dialled with a cancelled context")
	}
}
