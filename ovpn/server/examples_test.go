package server

import (
	"crypto/x509"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// The tls-crypt-v2 and peer-fingerprint examples in docs/examples parse,
// with their files made up in a temporary directory.
func TestTLSCryptV2AndFingerprintExamplesParse(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	sk, _ := wrap.GenerateV2ServerKey()
	md, _ := wrap.UserMetadata(base64.StdEncoding.EncodeToString([]byte("alice")))
	ck, _ := sk.NewClientKey(md)
	cliCert, cliKey := f.pki.Valid(t, "alice", x509.ExtKeyUsageClientAuth)
	for name, b := range map[string][]byte{"ca.crt": f.pki.CAPEM, "server.crt": f.srvCert, "server.key": f.srvKey,
		"v2server.key": sk.Format(), "v2-allowed": []byte("YWxpY2U=\n"), "alice-v2.key": ck.Format(),
		"alice.crt": cliCert, "alice.key": cliKey} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("../../docs/examples", name))
		if err != nil {
			t.Fatal(err)
		}
		return []byte(strings.ReplaceAll(string(b), "/etc/wirelane/ovpn/", dir+"/"))
	}
	v2, err := ParseConfig(read("ovpn-tls-crypt-v2-server.conf"), "ovpn-tls-crypt-v2-server.conf", dir)
	if err != nil {
		t.Fatal(err)
	}
	if v2.TLSCryptV2Server == nil || v2.TLSCryptV2AllowFile == "" {
		t.Fatalf("tls-crypt-v2 server example: %+v", v2.Common)
	}
	fp, err := ParseConfig(read("ovpn-peer-fingerprint-server.conf"), "ovpn-peer-fingerprint-server.conf", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(fp.PeerFingerprints) != 2 || len(fp.CA) != 0 {
		t.Fatalf("peer-fingerprint server example: %d fingerprints", len(fp.PeerFingerprints))
	}
	c2, err := config.Parse(read("ovpn-tls-crypt-v2-client.ovpn"), "ovpn-tls-crypt-v2-client.ovpn", dir)
	if err != nil {
		t.Fatal(err)
	}
	if c2.TLSCryptV2Client == nil {
		t.Fatal("tls-crypt-v2 client example has no key")
	}
	cf, err := config.Parse(read("ovpn-peer-fingerprint-client.ovpn"), "ovpn-peer-fingerprint-client.ovpn", dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.PeerFingerprints) != 1 {
		t.Fatal("peer-fingerprint client example has no fingerprint")
	}
}
