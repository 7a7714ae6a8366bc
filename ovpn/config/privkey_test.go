package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The fixtures in testdata were made with OpenSSL 3 (passphrase s3cret):
// client.key unencrypted, client-pkcs8-aes256.key (PBES2, PBKDF2
// HMAC-SHA256, AES-256-CBC), client-pkcs8-aes128-sha1.key (HMAC-SHA1,
// AES-128-CBC), client-legacy-aes128.key (Proc-Type 4,ENCRYPTED),
// client-3des.p12 and client-nopass.p12 (PBE-SHA1-3DES, with the CA),
// client-aes.p12 (OpenSSL 3's default: PBES2 with PBKDF2-HMAC-SHA256 and
// AES-256-CBC, MAC SHA-256).

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

// TestPKCS12 reads the legacy format (-legacy: 3DES) and OpenSSL 3's
// default (PBES2, PBKDF2-HMAC-SHA256, AES-256-CBC, MAC SHA-256), each with
// a passphrase and without one.
func TestPKCS12(t *testing.T) {
	ca, _ := os.ReadFile("testdata/ca.crt")
	for _, f := range []struct{ locked, open string }{{"client-3des.p12", "client-nopass.p12"}, {"client-aes.p12", "client-aes-nopass.p12"}} {
		// Passphrase from askpass; the CA comes from the file too.
		cfg, err := Parse([]byte(fixtureProfile("pkcs12 "+f.locked+"\naskpass pass.txt\n")), "x.ovpn", "testdata")
		if err != nil {
			t.Fatalf("%s: %v", f.locked, err)
		}
		usable(t, &cfg.Common)
		if strings.TrimSpace(string(cfg.CA)) != strings.TrimSpace(string(ca)) {
			t.Fatalf("%s: CA from the PKCS#12 file:\n%s", f.locked, cfg.CA)
		}
		// No passphrase: an empty one is tried at once.
		cfg, err = Parse([]byte(fixtureProfile("pkcs12 "+f.open+"\n")), "x.ovpn", "testdata")
		if err != nil {
			t.Fatalf("%s: %v", f.open, err)
		}
		usable(t, &cfg.Common)
		// Locked until the caller asks.
		cfg, err = Parse([]byte(fixtureProfile("pkcs12 "+f.locked+"\n")), "x.ovpn", "testdata")
		if err != nil || !cfg.KeyLocked() {
			t.Fatalf("locked %s: %v %v", f.locked, cfg, err)
		}
		if err := cfg.Unlock("nope"); !errors.Is(err, ErrPassphrase) {
			t.Fatalf("%s: wrong passphrase: %v", f.locked, err)
		}
		if err := cfg.Unlock("s3cret"); err != nil {
			t.Fatalf("%s: %v", f.locked, err)
		}
		usable(t, &cfg.Common)
	}
	// Inline, base64 as OpenVPN takes it.
	b, _ := os.ReadFile("testdata/client-nopass.p12")
	inline := "<pkcs12>\n" + wrap64(b) + "</pkcs12>\n"
	cfg, err := Parse([]byte(fixtureProfile(inline)), "x.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	usable(t, &cfg.Common)
}

// TestPKCS12FromOpenSSL reads PKCS#12 files the installed `openssl
// pkcs12 -export` writes at test time (the fixtures above are from one
// OpenSSL; this follows the one on the machine): its default (OpenSSL 3:
// PBES2 with PBKDF2-HMAC-SHA256 and AES-256-CBC, MAC SHA-256, checked
// with -info) and -legacy (RC2/3DES, MAC SHA-1), each with the askpass
// passphrase and with an empty one.
func TestPKCS12FromOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("needs openssl (apt-get install openssl)")
	}
	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "client.crt", "client.key", "pass.txt"} {
		b, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	openssl := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("openssl", args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("openssl %v: %v: %s", args, err, out)
		}
		return string(out)
	}
	export := []string{"pkcs12", "-export", "-in", "client.crt", "-inkey", "client.key", "-certfile", "ca.crt"}
	for _, v := range []struct {
		name  string
		extra []string
		info  string // in `openssl pkcs12 -info` of the file
	}{
		{"default", nil, "PBES2, PBKDF2, AES-256-CBC"},
		{"legacy", []string{"-legacy"}, "pbeWithSHA1And40BitRC2-CBC"},
	} {
		for _, pass := range []string{"file:pass.txt", "pass:"} {
			out := v.name + map[string]string{"file:pass.txt": "-pass.p12", "pass:": "-nopass.p12"}[pass]
			openssl(append(append(export, v.extra...), "-passout", pass, "-out", out)...)
			if pass != "pass:" {
				// -legacy for reading: OpenSSL 3 needs its legacy provider for RC2.
				if info := openssl("pkcs12", "-in", out, "-info", "-noout", "-passin", pass, "-legacy"); !strings.Contains(info, v.info) {
					t.Fatalf("%s: openssl pkcs12 -info does not say %q:\n%s", out, v.info, info)
				}
			}
			lines := "pkcs12 " + out + "\n"
			if pass != "pass:" {
				lines += "askpass pass.txt\n"
			}
			cfg, err := Parse([]byte(fixtureProfile(lines)), "x.ovpn", dir)
			if err != nil {
				t.Fatalf("%s: %v", out, err)
			}
			usable(t, &cfg.Common)
			if len(cfg.CA) == 0 {
				t.Fatalf("%s: no CA from the file", out)
			}
		}
	}
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

// Errors name the file and line: a wrong askpass passphrase, a
// truncated PKCS#12 (cut from OpenSSL 3's AES default), pkcs12 with cert/key,
// malformed inline data.
func TestPrivateKeyErrors(t *testing.T) {
	os.WriteFile(t.TempDir()+"/x", nil, 0o600)
	dir := t.TempDir()
	os.WriteFile(dir+"/wrong.txt", []byte("nope\n"), 0o600)
	for name, b := range map[string]string{} {
		os.WriteFile(dir+"/"+name, []byte(b), 0o600)
	}
	abs := func(f string) string { p, _ := os.Getwd(); return p + "/testdata/" + f }
	if b, err := os.ReadFile(abs("client-aes.p12")); err == nil {
		os.WriteFile(dir+"/truncated.p12", b[:len(b)/2], 0o600)
	}
	abs2 := abs
	abs = func(f string) string {
		if f == "truncated.p12" {
			return dir + "/" + f
		}
		return abs2(f)
	}
	for _, tc := range []struct{ lines, want string }{
		{"ca " + abs("ca.crt") + "\ncert " + abs("client.crt") + "\nkey " + abs("client-pkcs8-aes256.key") + "\naskpass wrong.txt\n", "x.ovpn:7: askpass: the private key (line 6): wrong passphrase"},
		{"pkcs12 " + abs("client-3des.p12") + "\naskpass wrong.txt\n", "x.ovpn:5: askpass: pkcs12: wrong passphrase"},
		{"pkcs12 " + abs("client-aes.p12") + "\naskpass wrong.txt\n", "x.ovpn:5: askpass: pkcs12: wrong passphrase"},
		{"pkcs12 " + abs("client.crt") + "\n", "x.ovpn:4: pkcs12: " + abs("client.crt") + ": not a PKCS#12 file"},
		{"pkcs12 " + abs("truncated.p12") + "\n", "x.ovpn:4: pkcs12: " + abs("truncated.p12") + ": not a PKCS#12 file"},
		{"<pkcs12>\naGVsbG8=\n</pkcs12>\n", "x.ovpn:4: <pkcs12>: not a PKCS#12 file"},
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
	for _, n := range []string{"client-3des.p12", "client-nopass.p12", "client-aes.p12", "client-aes-nopass.p12"} {
		b, _ := os.ReadFile("testdata/" + n)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &Common{pkcs12: b, keyLocked: true}
		_ = c.Unlock("")
	})
}

// A malformed inline (or file) credential is an error at the line of its
// block or directive (with the file's path for a directive), not a TLS
// failure later without a location (#18): content that is not PEM, a
// truncated or garbled block, a block of the wrong kind, a certificate
// and key that do not belong together, broken static keys and DH
// parameters.
func TestMalformedPEMNamesTheLine(t *testing.T) {
	broken := strings.Replace(pem, "MII", "M!I", 1)
	truncated := pem[:len(pem)/2] + "\n"
	otherKey := "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgwGL056U5c+WUCrK9GJB/wRJiBqJOBt8qmDupTRojar+hRANCAATGWQpmPH6zYUXezvBs1AXdGpEkYOIjJUQZuz9N7Blr0p8UYPGxE6I/Y3d2YGE6KWCE37rupJfZWz6JtbpSmE5G\n-----END PRIVATE KEY-----\n"
	h := "client\nremote h\n"
	withCA := h + "<ca>\n" + pem + "</ca>\n" // 7 lines
	for _, tc := range []struct{ text, want string }{
		{h + "<ca>\n" + broken + "</ca>\n", "x.ovpn:3: <ca>: malformed PEM"},
		{h + "<ca>\nhello\n</ca>\n", "x.ovpn:3: <ca>: not PEM: want a certificate"},
		{h + "<ca>hello</ca>\n", "x.ovpn:3: <ca>: an inline block's <ca> and </ca> go on lines of their own"},
		{h + "<ca>\n" + truncated + "</ca>\n", "x.ovpn:3: <ca>: malformed PEM"},
		{h + "<ca>\n" + pem + broken + "</ca>\n", "x.ovpn:3: <ca>: malformed PEM"},
		{h + "<ca>\n" + keyPEM + "</ca>\n", "x.ovpn:3: <ca>: no certificate (-----BEGIN CERTIFICATE-----) here; the PEM holds PRIVATE KEY"},
		{withCA + "<cert>\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n</cert>\n", "x.ovpn:8: <cert>: certificate 1: x509"},
		{withCA + "<cert>\n" + keyPEM + "</cert>\n", "x.ovpn:8: <cert>: no certificate (-----BEGIN CERTIFICATE-----) here; the PEM holds PRIVATE KEY"},
		{withCA + "<cert>\nhello\n</cert>\n", "x.ovpn:8: <cert>: not PEM"},
		{withCA + "<key>\n-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n</key>\n", "x.ovpn:8: <key>: private key"},
		{withCA + "<key>\n" + certPEM + "</key>\n", "x.ovpn:8: <key>: no private key (-----BEGIN PRIVATE KEY-----, or RSA/EC PRIVATE KEY) here; the PEM holds CERTIFICATE"},
		{withCA + "<key>\nx\n</key>\n", "x.ovpn:8: <key>: not PEM: want a private key"},
		{withCA + "<key>\n" + keyPEM + otherKey + "</key>\n", "x.ovpn:8: <key>: 2 private keys; want one"},
		{withCA + "<cert>\n" + certPEM + "</cert>\n<key>\n" + otherKey + "</key>\n", "x.ovpn:13: key: the certificate and key do not make a pair: private key does not match public key (cert on line 8)"},
		{withCA + "<tls-auth>\nhello\n</tls-auth>\n", "x.ovpn:8: <tls-auth>: static key: no"},
		{withCA + "<tls-crypt>\n-----BEGIN OpenVPN Static key V1-----\n0011\n-----END OpenVPN Static key V1-----\n</tls-crypt>\n", "x.ovpn:8: <tls-crypt>: static key: 2 bytes, want 256"},
		{withCA + "<tls-crypt-v2>\nhello\n</tls-crypt-v2>\n", "x.ovpn:8: <tls-crypt-v2>:"},
		{withCA + "<dh>\nhello\n</dh>\n", "x.ovpn:8: <dh>: not PEM: want Diffie-Hellman parameters"},
		{withCA + "<dh>\n" + pem + "</dh>\n", "x.ovpn:8: <dh>: want Diffie-Hellman parameters (-----BEGIN DH PARAMETERS-----), got CERTIFICATE"},
		{withCA + "<peer-fingerprint>\nhello\n</peer-fingerprint>\n", "x.ovpn:9: <peer-fingerprint>:"},
	} {
		_, err := Parse([]byte(tc.text+"auth-user-pass\n"), "x.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
	abs, _ := os.Getwd()
	dir := t.TempDir()
	for name, b := range map[string]string{"bad.crt": broken, "hello.crt": "hello\n", "key-as-cert.crt": keyPEM, "ta.key": "hello\n", "dh.pem": "hello\n",
		"other.key": otherKey, "empty.txt": ""} {
		os.WriteFile(dir+"/"+name, []byte(b), 0o600)
	}
	ca := "client\nremote h\nauth-user-pass\nca " + abs + "/testdata/ca.crt\n"
	for _, tc := range []struct{ text, want string }{
		{ca + "cert bad.crt\n", "x.ovpn:5: cert: " + dir + "/bad.crt: malformed PEM"},
		{"client\nremote h\nca hello.crt\n", "x.ovpn:3: ca: " + dir + "/hello.crt: not PEM: want a certificate"},
		{ca + "cert key-as-cert.crt\n", "x.ovpn:5: cert: " + dir + "/key-as-cert.crt: no certificate"},
		{ca + "tls-auth ta.key 1\n", "x.ovpn:5: tls-auth: " + dir + "/ta.key: static key: no"},
		{ca + "tls-crypt ta.key\n", "x.ovpn:5: tls-crypt: " + dir + "/ta.key: static key: no"},
		{ca + "tls-crypt-v2 ta.key\n", "x.ovpn:5: tls-crypt-v2: " + dir + "/ta.key:"},
		{ca + "dh dh.pem\n", "x.ovpn:5: dh: " + dir + "/dh.pem: not PEM"},
		{ca + "dh missing.pem\n", "x.ovpn:5: dh: open " + dir + "/missing.pem"},
		{ca + "auth-user-pass empty.txt\n", "x.ovpn:5: auth-user-pass: " + dir + "/empty.txt: want a username line"},
		{ca + "cert " + abs + "/testdata/client.crt\nkey other.key\n", "x.ovpn:6: key: the certificate and key do not make a pair"},
	} {
		_, err := Parse([]byte(tc.text), "x.ovpn", dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
	// What is right stays accepted: easy-rsa's text before the
	// certificate, a key file holding its certificate too, dh none.
	for _, text := range []string{
		withCA + "<cert>\nCertificate:\n    Data: ...\n" + certPEM + "</cert>\n<key>\n" + certPEM + keyPEM + "</key>\ndh none\nauth-user-pass\n",
	} {
		if _, err := Parse([]byte(text), "x.ovpn", ""); err != nil {
			t.Errorf("%q: %v", text, err)
		}
	}
}

// A PKCS#12 file whose iteration counts would keep the decoder busy (a
// damaged or hostile file) is refused before any key derivation.
func TestPKCS12IterationBound(t *testing.T) {
	b, err := os.ReadFile("testdata/client-aes.p12")
	if err != nil {
		t.Fatal(err)
	}
	var pfx pfxPDU
	if _, err := asn1.Unmarshal(b, &pfx); err != nil {
		t.Fatal(err)
	}
	if err := checkPKCS12(b); err != nil {
		t.Fatalf("the real file: %v", err)
	}
	pfx.MacData.Iterations = 1 << 30
	bad, err := asn1.Marshal(pfx)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkPKCS12(bad); err == nil || !strings.Contains(err.Error(), "MAC iteration count 1073741824 out of range") {
		t.Fatalf("huge MAC count: %v", err)
	}
	c := &Common{pkcs12: bad, keyLocked: true}
	if err := c.Unlock("s3cret"); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("Unlock: %v", err)
	}
}

// FuzzCheckPEM: the credential checks never panic, and what they accept
// the TLS set-up accepts (a ca makes a certificate pool, a cert and key
// that pass checkPEM and checkKeyPair make a TLS certificate).
func FuzzCheckPEM(f *testing.F) {
	f.Add([]byte(pem), []byte(certPEM), []byte(keyPEM))
	f.Add([]byte("hello\n"), []byte(keyPEM), []byte(certPEM))
	f.Add([]byte(pem[:50]), []byte("Certificate:\n"+certPEM), []byte(certPEM+keyPEM))
	f.Add([]byte("-----BEGIN DH PARAMETERS-----\nMAYCAQUCAQI=\n-----END DH PARAMETERS-----\n"), []byte{}, []byte{})
	f.Fuzz(func(t *testing.T, ca, cert, key []byte) {
		if checkPEM("ca", ca) == nil && !x509.NewCertPool().AppendCertsFromPEM(ca) {
			t.Fatalf("ca accepted, but no certificate for the pool: %q", ca)
		}
		_ = checkDH(ca)
		if checkPEM("cert", cert) == nil && checkPEM("key", key) == nil && !keyEncrypted(key) && checkKeyPair(cert, key) == nil {
			if _, err := tls.X509KeyPair(cert, key); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// extra-certs (a file or an inline block) is checked like a ca and
// completes the certificate's chain: the TLS certificate carries both.
func TestExtraCerts(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/chain.pem", []byte(pem), 0o600)
	os.WriteFile(dir+"/bad.pem", []byte(keyPEM), 0o600)
	base := "client\nremote h\n<ca>\n" + pem + "</ca>\n<cert>\n" + certPEM + "</cert>\n<key>\n" + keyPEM + "</key>\n" // 17 lines
	for _, text := range []string{base + "extra-certs chain.pem\n", base + "<extra-certs>\n" + pem + "</extra-certs>\n"} {
		c, err := Parse([]byte(text), "x.ovpn", dir)
		if err != nil {
			t.Fatal(err)
		}
		if string(c.ExtraCerts) != pem || string(c.CertChain()) != certPEM+pem || string(c.Cert) != certPEM {
			t.Fatalf("chain %q", c.CertChain())
		}
		tc, err := tls.X509KeyPair(c.CertChain(), c.Key)
		if err != nil || len(tc.Certificate) != 2 {
			t.Fatalf("TLS certificate: %v, %d in the chain", err, len(tc.Certificate))
		}
	}
	for text, want := range map[string]string{
		base + "extra-certs bad.pem\n":                                                      "x.ovpn:18: extra-certs: " + dir + "/bad.pem: no certificate",
		base + "<extra-certs>\nhello\n</extra-certs>\n":                                     "x.ovpn:18: <extra-certs>: not PEM",
		"client\nremote h\nauth-user-pass\n<ca>\n" + pem + "</ca>\nextra-certs chain.pem\n": "x.ovpn:9: extra-certs: extra-certs completes the chain of a certificate",
	} {
		if _, err := Parse([]byte(text), "x.ovpn", dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v, want %q", err, want)
		}
	}
}
