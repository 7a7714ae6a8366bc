package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/control"
)

// tls-crypt-v2 keys made by openvpn --genkey, as files and inline; the
// wrong kind of key is named.
func TestTLSCryptV2Directive(t *testing.T) {
	dir := t.TempDir()
	cli, err := os.ReadFile("../wrap/testdata/v2client-user.key")
	if err != nil {
		t.Fatal(err)
	}
	srv, _ := os.ReadFile("../wrap/testdata/v2server.key")
	os.WriteFile(filepath.Join(dir, "client.key"), cli, 0o600)
	os.WriteFile(filepath.Join(dir, "server.key"), srv, 0o600)
	base := "client\nremote h\n<ca>\n" + pem + "</ca>\nauth-user-pass\n"
	for _, text := range []string{base + "tls-crypt-v2 client.key\n", base + "<tls-crypt-v2>\n" + string(cli) + "</tls-crypt-v2>\n"} {
		c, err := Parse([]byte(text), "x.ovpn", dir)
		if err != nil {
			t.Fatal(err)
		}
		if c.TLSCryptV2Client == nil || len(c.TLSCryptV2Client.WKc) == 0 {
			t.Fatalf("no client key: %+v", c.TLSCryptV2Client)
		}
	}
	c, _ := Parse([]byte(base+"tls-crypt-v2 client.key\n"), "x.ovpn", dir)
	if len(c.SecretFiles) != 1 || !strings.HasSuffix(c.SecretFiles[0], "client.key") {
		t.Errorf("secret files %v", c.SecretFiles)
	}
	for text, want := range map[string]string{
		base + "tls-crypt-v2 server.key\n":                                                   "x.ovpn:9: tls-crypt-v2: " + filepath.Join(dir, "server.key") + ": this is the server key",
		base + "tls-crypt-v2 client.key\n<tls-crypt>\n" + staticKeyText() + "</tls-crypt>\n": "tls-crypt-v2 cannot be combined",
	} {
		if _, err := Parse([]byte(text), "x.ovpn", dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

// peer-fingerprint replaces the CA; both forms add up; crl-verify needs a
// CA.
func TestPeerFingerprintDirective(t *testing.T) {
	fp1 := strings.Repeat("AB:", 31) + "CD"
	fp2 := strings.ToLower(strings.Repeat("01:", 31) + "02")
	text := "client\nremote h\nauth-user-pass\npeer-fingerprint " + fp1 + "\n<peer-fingerprint>\n" + fp2 + "\n; comment\n\n</peer-fingerprint>\n"
	c, err := Parse([]byte(text), "x.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.PeerFingerprints) != 2 || c.PeerFingerprints[0].String() != fp1 || c.PeerFingerprints[1].String() != strings.ToUpper(fp2) {
		t.Fatalf("fingerprints %v", c.PeerFingerprints)
	}
	if len(c.CA) != 0 {
		t.Fatal("CA set")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "crl.pem"), testpki.New(t, "CA").CurrentCRL(t), 0o600)
	_, err = Parse([]byte(text+"crl-verify crl.pem\n"), "x.ovpn", dir)
	if err == nil || !strings.Contains(err.Error(), "x.ovpn:10: crl-verify: crl-verify needs a CA") {
		t.Fatalf("crl-verify without a CA: %v", err)
	}
}

func FuzzParseFingerprintBlock(f *testing.F) {
	f.Add(strings.Repeat("AB:", 31) + "CD\n# x\n")
	f.Add("zz\n")
	f.Add(strings.Repeat("0:", 32))
	f.Fuzz(func(t *testing.T, body string) {
		fps, line, err := ParseFingerprintBlock(body)
		if err != nil {
			if line < 1 || line > strings.Count(body, "\n")+1 {
				t.Fatalf("error on line %d of a %d-line body", line, strings.Count(body, "\n")+1)
			}
			return
		}
		for _, fp := range fps {
			if back, err := control.ParseFingerprint(fp.String()); err != nil || back != fp {
				t.Fatalf("%s does not round-trip: %v", fp, err)
			}
		}
	})
}
