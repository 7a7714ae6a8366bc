package config

import (
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

func TestCRLVerifyFile(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.New(t, "CA")
	if err := os.WriteFile(filepath.Join(dir, "crl.pem"), ca.CurrentCRL(t, big.NewInt(7)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.pem"), []byte("-----BEGIN X509 CRL-----\nAAAA\n-----END X509 CRL-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	base := "client\nremote h\n<ca>\n" + pem + "</ca>\nauth-user-pass\n"
	c, err := Parse([]byte(base+"crl-verify crl.pem\n"), "x.ovpn", dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.CRLVerify != filepath.Join(dir, "crl.pem") {
		t.Fatalf("CRLVerify %q, want the path resolved against the configuration's directory", c.CRLVerify)
	}
	abs := filepath.Join(dir, "crl.pem")
	if c, err = Parse([]byte(base+"crl-verify "+abs+"\n"), "x.ovpn", "/nonexistent"); err != nil || c.CRLVerify != abs {
		t.Fatalf("absolute path: %q %v", c.CRLVerify, err)
	}
	for _, tc := range []struct{ line, want string }{
		{"crl-verify missing.pem", "x.ovpn:9: crl-verify: open " + filepath.Join(dir, "missing.pem")},
		{"crl-verify bad.pem", "x.ovpn:9: crl-verify: " + filepath.Join(dir, "bad.pem") + ": PEM block 1"},
		{"crl-verify " + dir + " dir", "x.ovpn:9: crl-verify: the directory form"},
		{"crl-verify", "x.ovpn:9: crl-verify: takes 1 to 2 arguments, got 0"},
	} {
		_, err := Parse([]byte(base+tc.line+"\n"), "x.ovpn", dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: want error containing %q, got %v", tc.line, tc.want, err)
		}
	}
}
