package config

import (
	"crypto/tls"
	"errors"
	"os"
	"strings"
	"testing"
)

// The fixtures in testdata were made with OpenSSL 3 (passphrase s3cret):
// client.key unencrypted, client-pkcs8-aes256.key (PBES2, PBKDF2
// HMAC-SHA256, AES-256-CBC), client-pkcs8-aes128-sha1.key (HMAC-SHA1,
// AES-128-CBC), client-legacy-aes128.key (Proc-Type 4,ENCRYPTED),
// client-3des.p12 and client-nopass.p12 (PBE-SHA1-3DES, with the CA),
// client-aes.p12 (OpenSSL 3's default PBES2/AES, not readable).

func fixtureProfile(lines string) string {
	return "client\nremote h\nremote-cert-tls server\n" + lines
}

// usable checks that the unlocked key and certificate make a TLS
// certificate, as Dial and the server need.
func usable(t *testing.T, c *Common) {
	t.Helper()
	if c.KeyLocked() {
		t.Fatal("key still locked")
	}
	if _, err := tls.X509KeyPair(c.Cert, c.Key); err != nil {
		t.Fatalf("certificate and key: %v", err)
	}
}

func TestEncryptedKeysWithAskpassFile(t *testing.T) {
	for _, key := range []string{"client-pkcs8-aes256.key", "client-pkcs8-aes128-sha1.key", "client-legacy-aes128.key"} {
		cfg, err := Parse([]byte(fixtureProfile("ca ca.crt\ncert client.crt\nkey "+key+"\naskpass pass.txt\n")), "x.ovpn", "testdata")
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		usable(t, &cfg.Common)
	}
}

// Without askpass the key stays locked until Unlock; a wrong passphrase
// says so and leaves it locked.
func TestEncryptedKeyUnlockedByTheCaller(t *testing.T) {
	for _, key := range []string{"client-pkcs8-aes256.key", "client-legacy-aes128.key"} {
		cfg, err := Parse([]byte(fixtureProfile("ca ca.crt\ncert client.crt\nkey "+key+"\naskpass\n")), "x.ovpn", "testdata")
		if err != nil {
			t.Fatal(err)
		}
		if !cfg.KeyLocked() {
			t.Fatalf("%s: not locked", key)
		}
		if err := cfg.Unlock("wrong"); !errors.Is(err, ErrPassphrase) || !cfg.KeyLocked() {
			t.Fatalf("%s: wrong passphrase: %v", key, err)
		}
		if err := cfg.Unlock("s3cret"); err != nil {
			t.Fatal(err)
		}
		usable(t, &cfg.Common)
	}
}

func TestPKCS12(t *testing.T) {
	// Passphrase from askpass; the CA comes from the file too.
	cfg, err := Parse([]byte(fixtureProfile("pkcs12 client-3des.p12\naskpass pass.txt\n")), "x.ovpn", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	usable(t, &cfg.Common)
	ca, _ := os.ReadFile("testdata/ca.crt")
	if strings.TrimSpace(string(cfg.CA)) != strings.TrimSpace(string(ca)) {
		t.Fatalf("CA from the PKCS#12 file:\n%s", cfg.CA)
	}
	// No passphrase: an empty one is tried at once.
	cfg, err = Parse([]byte(fixtureProfile("pkcs12 client-nopass.p12\n")), "x.ovpn", "testdata")
	if err != nil {
		t.Fatal(err)
	}
	usable(t, &cfg.Common)
	// Locked until the caller asks.
	cfg, err = Parse([]byte(fixtureProfile("pkcs12 client-3des.p12\n")), "x.ovpn", "testdata")
	if err != nil || !cfg.KeyLocked() {
		t.Fatalf("locked p12: %v %v", cfg, err)
	}
	if err := cfg.Unlock("nope"); !errors.Is(err, ErrPassphrase) {
		t.Fatalf("wrong passphrase: %v", err)
	}
	if err := cfg.Unlock("s3cret"); err != nil {
		t.Fatal(err)
	}
	usable(t, &cfg.Common)
	// Inline, base64 as OpenVPN takes it.
	b, _ := os.ReadFile("testdata/client-nopass.p12")
	inline := "<pkcs12>\n" + wrap64(b) + "</pkcs12>\n"
	cfg, err = Parse([]byte(fixtureProfile(inline)), "x.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	usable(t, &cfg.Common)
}

func wrap64(b []byte) string {
	s := encodeBase64(b)
	var out strings.Builder
	for len(s) > 64 {
		out.WriteString(s[:64] + "\n")
		s = s[64:]
	}
	return out.String() + s + "\n"
}

// Errors name the file and line: a wrong askpass passphrase, an
// unreadable PKCS#12 (OpenSSL 3's AES default), pkcs12 with cert/key,
// malformed inline data.
func TestPrivateKeyErrors(t *testing.T) {
	os.WriteFile(t.TempDir()+"/x", nil, 0o600)
	dir := t.TempDir()
	os.WriteFile(dir+"/wrong.txt", []byte("nope\n"), 0o600)
	for name, b := range map[string]string{} {
		os.WriteFile(dir+"/"+name, []byte(b), 0o600)
	}
	abs := func(f string) string { p, _ := os.Getwd(); return p + "/testdata/" + f }
	for _, tc := range []struct{ lines, want string }{
		{"ca " + abs("ca.crt") + "\ncert " + abs("client.crt") + "\nkey " + abs("client-pkcs8-aes256.key") + "\naskpass wrong.txt\n", "x.ovpn:7: askpass: the private key (line 6): wrong passphrase"},
		{"pkcs12 " + abs("client-3des.p12") + "\naskpass wrong.txt\n", "x.ovpn:5: askpass: pkcs12: wrong passphrase"},
		{"pkcs12 " + abs("client-aes.p12") + "\naskpass " + abs("pass.txt") + "\n", "x.ovpn:4: pkcs12: pkcs12:"},
		{"pkcs12 " + abs("client-nopass.p12") + "\ncert " + abs("client.crt") + "\n", "x.ovpn:4: pkcs12: pkcs12 replaces cert and key"},
		{"<pkcs12>\n!!!\n</pkcs12>\n", "x.ovpn:4: <pkcs12>: not base64"},
		{"askpass missing.txt\n", "x.ovpn:4: askpass: open"},
	} {
		_, err := Parse([]byte(fixtureProfile(tc.lines)), "x.ovpn", dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.lines, err, tc.want)
		}
	}
}

// FuzzDecryptPKCS8 and FuzzPKCS12: the new parsers never panic on
// arbitrary input.
func FuzzDecryptPKCS8(f *testing.F) {
	for _, n := range []string{"client-pkcs8-aes256.key", "client-pkcs8-aes128-sha1.key"} {
		b, _ := os.ReadFile("testdata/" + n)
		if blk, _ := pemDecode(b); blk != nil {
			f.Add(blk)
		}
	}
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, der []byte) {
		_, _ = decryptPKCS8(der, "s3cret")
	})
}

func FuzzPKCS12(f *testing.F) {
	for _, n := range []string{"client-3des.p12", "client-nopass.p12", "client-aes.p12"} {
		b, _ := os.ReadFile("testdata/" + n)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &Common{pkcs12: b, keyLocked: true}
		_ = c.Unlock("")
	})
}

// A malformed inline (or file) certificate or key is an error at the
// line of its block or directive, not a TLS failure later.
func TestMalformedPEMNamesTheLine(t *testing.T) {
	broken := strings.Replace(pem, "MII", "M!I", 1)
	for _, tc := range []struct{ text, want string }{
		{"client\nremote h\n<ca>\n" + broken + "</ca>\n", "x.ovpn:3: <ca>: malformed PEM"},
		{"client\nremote h\n<ca>\n" + pem + "</ca>\n<cert>\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n</cert>\n", "x.ovpn:8: <cert>: certificate 1: x509"},
		{"client\nremote h\n<ca>\n" + pem + "</ca>\n<key>\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n</key>\n", "x.ovpn:8: <key>: private key"},
		{"client\nremote h\n<ca>\n-----BEGIN CERTIFICATE-----\n" + "QUFB\n" + "</ca>\n", "x.ovpn:3: <ca>: malformed PEM"},
	} {
		_, err := Parse([]byte(tc.text), "x.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
	abs, _ := os.Getwd()
	os.WriteFile(t.TempDir()+"/x", nil, 0o600)
	dir := t.TempDir()
	os.WriteFile(dir+"/bad.crt", []byte(broken), 0o600)
	if _, err := Parse([]byte("client\nremote h\nca "+abs+"/testdata/ca.crt\ncert bad.crt\n"), "x.ovpn", dir); err == nil || !strings.Contains(err.Error(), "x.ovpn:4: cert: malformed PEM") {
		t.Errorf("file: %v", err)
	}
}
