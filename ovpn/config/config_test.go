package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

func staticKeyText() string {
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i)
	}
	return string(k.Format())
}

// pem is a real certificate (testdata/ca.crt, its base64 on one line so
// that it stays three lines long): the parser checks the certificates it
// reads.
const pem = "-----BEGIN CERTIFICATE-----\nMIIBnjCCAUOgAwIBAgIUL/02EWGaamHnQEOJMirmfGNIvfwwCgYIKoZIzj0EAwIwIzEhMB8GA1UEAwwYV2lyZWxhbmUgVGVzdCBGaXh0dXJlIENBMCAXDTI2MTIwMTIzMDczOVoYDzIxMjYxMTA3MjMwNzM5WjAjMSEwHwYDVQQDDBhXaXJlbGFuZSBUZXN0IEZpeHR1cmUgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATlc2SBPOZT636xk/l9p85wsnBi3JgU98bViXH2VPjYv8eU/Prk1c036TfoB0ymypv+Vi4ZVp/D8TmHLb6tXrfdo1MwUTAdBgNVHQ4EFgQUt/UvjEr+n68sEzRCJOOZBafsXNUwHwYDVR0jBBgwFoAUt/UvjEr+n68sEzRCJOOZBafsXNUwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEA3Uk9SGfbx3WOK5paONKR/6J6wCOEMQhra5DTdfRrIxgCIQC7X8eGwuqt2PZ0gDNjThF1Moub28uqVScgJzLp7PE7kQ==\n-----END CERTIFICATE-----\n"

func TestParseProviderStyleConfig(t *testing.T) {
	text := `# a typical provider profile
client
dev tun
proto udp
remote vpn1.example.com 1194
remote vpn2.example.com 443 tcp-client
remote 192.0.2.1
resolv-retry infinite
nobind
persist-key
cipher AES-256-CBC
data-ciphers AES-256-GCM:CHACHA20-POLY1305:?AES-999-GCM
auth SHA256
remote-cert-tls server
verify-x509-name "CN=server one" subject
key-direction 1
reneg-sec 0
keepalive 10 60
auth-user-pass
verb 3
<ca>
` + pem + `</ca>
<tls-auth>
` + staticKeyText() + `</tls-auth>
`
	c, err := Parse([]byte(text), "p.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Remotes) != 3 || c.Remotes[0].Port != 1194 || c.Remotes[0].Proto != UDP ||
		c.Remotes[1].Port != 443 || c.Remotes[1].Proto != TCP || c.Remotes[2].Port != 1194 {
		t.Fatalf("remotes %+v", c.Remotes)
	}
	if c.Remotes[1].Address() != "vpn2.example.com:443" {
		t.Fatal(c.Remotes[1].Address())
	}
	if len(c.DataCiphers) != 2 || c.DataCiphers[0] != data.AES256GCM || c.DataCiphers[1] != data.ChaCha20Poly1305 {
		t.Fatalf("ciphers %v", c.DataCiphers)
	}
	if c.TLSAuth == nil || c.TLSAuth[5] != 5 || c.KeyDirection != wrap.Direction1 || c.Auth != "SHA256" {
		t.Fatal("tls-auth not parsed")
	}
	if c.RemoteCertTLS != "server" || c.VerifyX509 != "CN=server one" || c.VerifyX509Typ != "subject" {
		t.Fatalf("verify: %q %q %q", c.RemoteCertTLS, c.VerifyX509, c.VerifyX509Typ)
	}
	if c.RenegSec != 0 || c.Ping != 10 || c.PingRestart != 60 || !c.AuthUserPass || !c.Nobind || string(c.CA) != pem {
		t.Fatalf("%+v", c)
	}
	var names []string
	for _, w := range c.Warnings {
		names = append(names, w.Directive)
	}
	got := strings.Join(names, ",")
	for _, want := range []string{"persist-key", "cipher", "verb"} {
		if !strings.Contains(got, want) {
			t.Errorf("no warning for %s (warnings: %s)", want, got)
		}
	}
	if c.Warnings[0].Line != 10 {
		t.Errorf("persist-key warning on line %d, want 10", c.Warnings[0].Line)
	}
	if c.ResolvRetry != -1 || c.ConnectRetry != 1 || c.ConnectRetryMaxWait != 300 || c.ServerPollTimeout != 120 || c.HandWindow != 60 {
		t.Errorf("retry defaults %d %d %d %d %d", c.ResolvRetry, c.ConnectRetry, c.ConnectRetryMaxWait, c.ServerPollTimeout, c.HandWindow)
	}
}

func TestRetryDirectives(t *testing.T) {
	base := "client\nremote 192.0.2.1\nauth-user-pass\n<ca>\n" + pem + "</ca>\n"
	c, err := Parse([]byte(base+"resolv-retry 5\nconnect-retry 2 30\nconnect-retry-max 3\nserver-poll-timeout 4\nhand-window 20\nstatic-challenge \"Enter OTP\" 1\n"), "r.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	if c.ResolvRetry != 5 || c.ConnectRetry != 2 || c.ConnectRetryMaxWait != 30 || c.ConnectRetryMax != 3 || c.ServerPollTimeout != 4 ||
		c.HandWindow != 20 || c.StaticChallenge != "Enter OTP" || !c.StaticChallengeEcho {
		t.Fatalf("%+v", c)
	}
	if c, err = Parse([]byte(base+"connect-timeout 7\nresolv-retry 0\n"), "r.ovpn", ""); err != nil || c.ServerPollTimeout != 7 || c.ResolvRetry != 0 {
		t.Fatalf("connect-timeout: %v %+v", err, c)
	}
	for _, bad := range []string{"resolv-retry forever\n", "static-challenge \"x\" 2\n", "connect-retry-max\n"} {
		_, err := Parse([]byte(base+bad), "r.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), "r.ovpn:") {
			t.Errorf("%q: error %v, want one with its location", bad, err)
		}
	}
}

func TestFilesRelativeToConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ca.crt"), []byte(pem), 0o600)
	os.WriteFile(filepath.Join(dir, "ta.key"), []byte(staticKeyText()), 0o600)
	os.WriteFile(filepath.Join(dir, "up.txt"), []byte("alice\nsecret\n"), 0o600)
	path := filepath.Join(dir, "c.conf")
	os.WriteFile(path, []byte("client\nremote 127.0.0.1 1194 udp\nca ca.crt\ntls-crypt ta.key\nauth-user-pass up.txt\n"), 0o600)
	c, err := ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.CA) != pem || c.TLSCrypt == nil || c.Username != "alice" || c.Password != "secret" {
		t.Fatalf("%+v", c)
	}
}

func TestErrorsNameDirectiveAndLine(t *testing.T) {
	base := "client\nremote h\n<ca>\n" + pem + "</ca>\nauth-user-pass\n"
	for _, c := range []struct {
		text, want  string
		unsupported bool
	}{
		{base + "<tls-crypt-v2>\nnot a key\n</tls-crypt-v2>\n", "x.ovpn:9: <tls-crypt-v2>: OpenVPN tls-crypt-v2 client key: no", false},
		{base + "tls-crypt-v2 k force-cookie\n", "x.ovpn:9: tls-crypt-v2: \"force-cookie\" is a server flag", false},
		{base + "peer-fingerprint AB:CD\n", "x.ovpn:9: peer-fingerprint: fingerprint \"AB:CD\": want 32 hex bytes", false},
		{base + "<peer-fingerprint>\n\n# c\nzz\n</peer-fingerprint>\n", "x.ovpn:12: <peer-fingerprint>: fingerprint \"zz\"", false},
		{base + "<peer-fingerprint>\n</peer-fingerprint>\n", "x.ovpn:9: <peer-fingerprint>: empty block", false},
		{base + "compress lz5\n", "x.ovpn:9: compress: unknown algorithm \"lz5\"", false},
		{base + "compress migrate\n", "x.ovpn:9: compress: compress migrate", true},
		{base + "comp-lzo maybe\n", "x.ovpn:9: comp-lzo: want yes, no or adaptive", false},
		{base + "allow-compression sometimes\n", "x.ovpn:9: allow-compression: want no, asym or yes", false},
		{base + "crl-verify /etc/openvpn/crls dir\n", "x.ovpn:9: crl-verify: the directory form (crl-verify DIR dir) is not supported", true},
		{base + "<crl-verify>\nx\n</crl-verify>\n", "x.ovpn:9: <crl-verify>: inline CRLs are not supported", true},
		{base + "crl-verify [inline]\n", "x.ovpn:9: crl-verify: inline CRLs", true},
		{base + "crl-verify crl.pem bogus\n", "x.ovpn:9: crl-verify: unknown flag \"bogus\"", false},
		{base + "crl-verify crl.pem\n", "x.ovpn:9: crl-verify: file references are not allowed", false},
		{base + "proto sctp\n", "x.ovpn:9: proto: unknown protocol", false},
		{base + "remote h 99999\n", "x.ovpn:9: remote: bad number", false},
		{base + "dev tap0\n", "x.ovpn:9: dev: only tun", false},
		{base + "<tls-auth>\nnot a key\n</tls-auth>\n", "x.ovpn:9: <tls-auth>", false},
		{base + "<cert>\nx\n", "x.ovpn:9: <cert>: inline block not closed", false},
		{base + "data-ciphers BF-CBC\n", "data-ciphers: data: unsupported cipher", false},
		{base + "key-direction 2\n", "x.ovpn:9: key-direction", false},
		{base + "keepalive 10 15\n", "x.ovpn:9: keepalive: the restart timeout (15) must be at least twice", false},
		{base + "ping 10 20\n", "x.ovpn:9: ping: takes 1 argument(s), got 2", false},
		{base + "block-ipv6 yes\n", "x.ovpn:9: block-ipv6: takes 0 argument(s), got 1", false},
		{base + "dhcp-option DNS nonsense\n", "x.ovpn:9: dhcp-option: DNS \"nonsense\": not a valid address", false},
		{base + "dhcp-option DOMAIN\n", "x.ovpn:9: dhcp-option: DOMAIN needs a value", false},
		{base + "verify-x509-name x bogus\n", "x.ovpn:9: verify-x509-name", false},
		{base + "remote \"unterminated\n", "x.ovpn:9: unterminated quote", false},
		{"remote h\n<ca>\n" + pem + "</ca>\n", "not a client configuration", false},
		{"client\n<ca>\n" + pem + "</ca>\n", "no remote", false},
		{"client\nremote h\nauth-user-pass\n", "no CA", false},
	} {
		_, err := Parse([]byte(c.text), "x.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("want error containing %q, got %v", c.want, err)
			continue
		}
		if errors.Is(err, ErrUnsupported) != c.unsupported {
			t.Errorf("%q: errors.Is(ErrUnsupported) = %v", c.want, !c.unsupported)
		}
	}
	if _, err := Parse([]byte(base+"ca ca.crt\n"), "x.ovpn", ""); err == nil {
		t.Error("file reference accepted without a directory")
	}
	c, err := Parse([]byte(base+"dhcp-option DNS 10.8.0.1\ndhcp-option DOMAIN corp.example\ndhcp-option NTP 10.8.0.1\n"), "x.ovpn", "")
	if err != nil {
		t.Fatalf("dhcp-option: %v", err)
	}
	if want := []string{"dhcp-option DNS 10.8.0.1", "dhcp-option DOMAIN corp.example"}; !slices.Equal(c.DHCPOptions, want) {
		t.Errorf("DHCPOptions %q, want %q", c.DHCPOptions, want)
	}
	if len(c.Warnings) != 1 || c.Warnings[0].Line != 11 || !strings.Contains(c.Warnings[0].Message, "NTP") {
		t.Errorf("warnings %v, want one for the NTP line", c.Warnings)
	}
	c, err = Parse([]byte(base+"block-ipv6\n"), "x.ovpn", "")
	if err != nil {
		t.Fatalf("block-ipv6: %v", err)
	}
	if !c.BlockIPv6 || len(c.Warnings) != 0 {
		t.Errorf("block-ipv6: BlockIPv6 %v, warnings %v", c.BlockIPv6, c.Warnings)
	}
}

func TestServerDirectivesInAClientFileAreErrors(t *testing.T) {
	base := "client\nremote h\n<ca>\n" + pem + "</ca>\nauth-user-pass\n" // 8 lines
	for _, line := range []string{
		"server 10.8.0.0 255.255.255.0", "server-ipv6 fd42::/64", "mode server", "tls-server",
		`push "route 10.1.0.0 255.255.0.0"`, "client-to-client", "duplicate-cn", "max-clients 5",
		"ifconfig-pool-persist ipp.txt", "client-config-dir ccd", "--push x",
	} {
		name := strings.Fields(strings.TrimPrefix(line, "--"))[0]
		_, err := Parse([]byte(base+"verb 3\n"+line+"\nnobind\n"), "c.ovpn", "")
		var ce *Error
		if !errors.As(err, &ce) || !errors.Is(err, ErrWrongRole) {
			t.Errorf("%s: got %v, want a wrong-side *Error", line, err)
			continue
		}
		want := "c.ovpn:10: " + name + ": a server directive in a client configuration"
		if ce.Line != 10 || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %q, want %q", line, err, want)
		}
	}
}

func TestSharedDirectivesFillCommon(t *testing.T) {
	text := "client\nremote h\n<ca>\n" + pem + "</ca>\n<cert>\n" + certPEM + "</cert>\n<key>\n" + keyPEM + "</key>\n" +
		"<tls-crypt>\n" + staticKeyText() + "</tls-crypt>\ntls-version-min 1.3\ndata-ciphers CHACHA20-POLY1305\nauth SHA512\n"
	c, err := Parse([]byte(text), "c.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	cm := c.Common
	if string(cm.CA) != pem || string(cm.Cert) != certPEM || string(cm.Key) != keyPEM || cm.TLSCrypt == nil || cm.TLSCrypt[7] != 7 ||
		cm.TLSVersionMin != "1.3" || cm.Auth != "SHA512" || cm.KeyDirection != wrap.Bidirectional ||
		!slices.Equal(cm.DataCiphers, []data.Cipher{data.ChaCha20Poly1305}) || cm.RenegSec != 3600 {
		t.Fatalf("common part: %+v", cm)
	}
}

func TestTokenize(t *testing.T) {
	got, err := tokenize(`verify-x509-name "CN=a \"b\"" 'name' # comment`)
	if err != nil || len(got) != 3 || got[1] != `CN=a "b"` || got[2] != "name" {
		t.Fatalf("%q %v", got, err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("client\nremote h 1194 udp\n<ca>\n" + pem + "</ca>\nauth-user-pass\n"))
	f.Add([]byte("client\n<tls-crypt>\n" + staticKeyText() + "</tls-crypt>\nkeepalive 1 2\n"))
	f.Add([]byte("remote 'a b' \"c\nproto tcp6\n"))
	f.Add([]byte("client\nremote h\nresolv-retry infinite\nconnect-retry 2 9\nconnect-retry-max 3\nserver-poll-timeout 4\nhand-window 5\nstatic-challenge \"OTP\" 1\n"))
	f.Add([]byte("client\nremote h\ncrl-verify crl.pem\ncrl-verify /x dir\n<crl-verify>\n</crl-verify>\n"))
	f.Add([]byte("client\n<connection>\nremote a 1 tcp\nproto udp\nserver-poll-timeout 3\n</connection>\ncompress lz4-v2\nallow-compression asym\n"))
	f.Add([]byte("client\nremote h\n<pkcs12>\nMIIB\n</pkcs12>\naskpass\ndns server 0 address 10.8.0.1\ndata-ciphers-fallback AES-256-CBC\n"))
	f.Add([]byte("client\nremote h\n<ca>\nx\n</ca>\nauth-user-pass\npush \"route 10.0.0.0\"\nserver 10.8.0.0 255.255.255.0\n"))
	// Credentials, real and broken (#18: checked at load time).
	f.Add([]byte("client\nremote h\n<ca>\n" + pem + "</ca>\n<cert>\n" + certPEM + "</cert>\n<key>\n" + keyPEM + "</key>\n<dh>\n-----BEGIN DH PARAMETERS-----\nMAYCAQUCAQI=\n-----END DH PARAMETERS-----\n</dh>\n"))
	f.Add([]byte("client\nremote h\n<ca>\nhello\n</ca>\n<cert>\n" + keyPEM + "</cert>\n<key>\n" + certPEM + "</key>\n"))
	f.Add([]byte("client\nremote h\nauth-user-pass\n<ca>\n" + pem[:60] + "\n</ca>\n<tls-auth>\n-----BEGIN OpenVPN Static key V1-----\n00\n</tls-auth>\n"))
	f.Add([]byte("client\nremote h\n<ca>\n" + pem + "</ca>\n<cert>\n" + certPEM + "</cert>\n<key>\n" + keyPEM + "</key>\n<extra-certs>\n" + pem + "</extra-certs>\n"))
	if b, err := os.ReadFile("testdata/client-aes-nopass.p12"); err == nil {
		f.Add([]byte("client\nremote h\n<pkcs12>\n" + wrap64(b) + "</pkcs12>\n"))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Parse(b, "f", "")
		if err == nil && (len(c.Remotes) == 0 || len(c.CA) == 0 && len(c.PeerFingerprints) == 0 && !c.KeyLocked()) {
			t.Fatal("accepted a config without remote or CA")
		}
		var ce *Error
		if err != nil && !errors.As(err, &ce) {
			t.Fatalf("error %v has no location", err)
		}
		// What the parser accepts, the TLS set-up accepts: no credential
		// error is left for later, without a location.
		if err == nil && !c.KeyLocked() {
			if _, err := control.TLSConfig(control.TLSParams{CA: c.CA, Cert: c.CertChain(), Key: c.Key, PeerFingerprints: c.PeerFingerprints}); err != nil {
				t.Fatalf("accepted by the parser, refused by TLS: %v", err)
			}
		}
	})
}

// TestChecksAfterTheLastLineNameTheirLine checks the errors and warnings
// of Finish, which runs after the walk: each names the line of the
// directive it is about, and one about a missing directive names the
// file alone (there is no line to name, never "line 0").
func TestChecksAfterTheLastLineNameTheirLine(t *testing.T) {
	base := "client\nremote h\n<ca>\n" + pem + "</ca>\nauth-user-pass\n" // 8 lines
	for _, c := range []struct{ name, text, want string }{
		{"data-ciphers", base + "verb 3\ndata-ciphers BF-CBC\n", "x.ovpn:10: data-ciphers: data: unsupported cipher \"BF-CBC\" (supported: AES-256-GCM, AES-128-GCM, CHACHA20-POLY1305; AES-256-CBC, AES-128-CBC for old servers)"},
		{"ncp-ciphers", base + "ncp-ciphers BF-CBC\n", "x.ovpn:9: data-ciphers: data: unsupported cipher \"BF-CBC\" (supported: AES-256-GCM, AES-128-GCM, CHACHA20-POLY1305; AES-256-CBC, AES-128-CBC for old servers)"},
		{"cert without key", base + "<cert>\n" + certPEM + "</cert>\n", "x.ovpn:9: cert: cert and key must be given together"},
		{"key without cert", base + "verb 3\n<key>\n" + keyPEM + "</key>\n", "x.ovpn: cert: cert and key must be given together"},
		{"no CA", "client\nremote h\nauth-user-pass\n", "x.ovpn: ca: no CA certificate given; the server cannot be verified (give ca, or peer-fingerprint for a self-signed certificate)"},
		{"no remote", "client\n<ca>\n" + pem + "</ca>\n", "x.ovpn: remote: no remote given"},
		{"not a client", "remote h\n<ca>\n" + pem + "</ca>\n", "x.ovpn: not a client configuration (add `client`); server mode is not supported"},
		{"both wraps", base + "<tls-auth>\n" + staticKeyText() + "</tls-auth>\n<tls-crypt>\n" + staticKeyText() + "</tls-crypt>\n",
			"x.ovpn:" + strconv.Itoa(9+strings.Count(staticKeyText(), "\n")+2) + ": tls-crypt: tls-auth and tls-crypt are mutually exclusive"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.text), "x.ovpn", "")
			var ce *Error
			if !errors.As(err, &ce) || err.Error() != c.want {
				t.Errorf("error\n got: %v\nwant: %s", err, c.want)
			}
		})
	}
	// The provider profile's non-AEAD cipher is on line 13.
	text := "client\ndev tun\nproto udp\nremote vpn.example.com 1194\nresolv-retry infinite\nnobind\npersist-key\npersist-tun\n" +
		"auth-user-pass\nremote-cert-tls server\nauth SHA256\nverb 3\ncipher AES-256-CBC\n<ca>\n" + pem + "</ca>\n"
	cfg, err := Parse([]byte(text), "p.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range cfg.Warnings {
		if w.Directive == "cipher" {
			found = true
			if w.Line != 13 || w.String() != "line 13: cipher: cipher AES-256-CBC is not used to negotiate (as in OpenVPN 2.6): add it to data-ciphers, or give data-ciphers-fallback AES-256-CBC for a peer that negotiates nothing" {
				t.Errorf("cipher warning %q (line %d), want line 13", w, w.Line)
			}
		}
	}
	if !found {
		t.Errorf("no cipher warning: %v", cfg.Warnings)
	}
}

// TestMisspeltDirectivesGetSuggestions checks that an unknown directive's
// warning names the directive it was probably meant to be, whether this
// side handles it, the shared table does, or it is one known to be
// ignored.
func TestMisspeltDirectivesGetSuggestions(t *testing.T) {
	base := "client\nremote h\n<ca>\n" + pem + "</ca>\nauth-user-pass\n" // 8 lines
	for _, c := range []struct{ line, want string }{
		{"remot h2", "line 9: remot: unknown directive ignored; did you mean remote?"},
		{"keepalve 10 60", "line 9: keepalve: unknown directive ignored; did you mean keepalive?"},
		{"data-cipher AES-256-GCM", "line 9: data-cipher: unknown directive ignored; did you mean data-ciphers?"},
		{"resolv-rety infinite", "line 9: resolv-rety: unknown directive ignored; did you mean resolv-retry?"},
		{"frobnicate", "line 9: frobnicate: unknown directive ignored"},
	} {
		cfg, err := Parse([]byte(base+c.line+"\n"), "x.ovpn", "")
		if err != nil {
			t.Fatalf("%s: %v", c.line, err)
		}
		if len(cfg.Warnings) != 1 || cfg.Warnings[0].String() != c.want {
			t.Errorf("%s: warnings %v, want %q", c.line, cfg.Warnings, c.want)
		}
	}
}

// TestMisspeltInlineBlockGetsASuggestion checks an unknown inline block's
// error: at its line, with the likely block named.
func TestMisspeltInlineBlockGetsASuggestion(t *testing.T) {
	_, err := Parse([]byte("client\nremote h\n<caa>\n"+pem+"</caa>\n"), "x.ovpn", "")
	if want := "x.ovpn:3: <caa>: unknown inline block; did you mean ca?"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// user and group are kept with their lines (the caller looks them up and
// drops to them); a missing name is an error.
func TestUserGroup(t *testing.T) {
	const creds = testpki.FixtureInline
	cfg, err := Parse([]byte("client\nremote 192.0.2.1\nuser nobody\ngroup nogroup\n"+creds), "c.ovpn", "")
	if err != nil || cfg.User != "nobody" || cfg.UserLine != 3 || cfg.Group != "nogroup" || cfg.GroupLine != 4 {
		t.Fatalf("%+v, %v", cfg.Common, err)
	}
	for _, w := range cfg.Warnings {
		if w.Directive == "user" || w.Directive == "group" {
			t.Errorf("warned: %+v", w)
		}
	}
	for _, line := range []string{"user", "group a b"} {
		_, err := Parse([]byte("client\nremote 192.0.2.1\n"+line+"\n"+creds), "c.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), "c.ovpn:3: "+strings.Fields(line)[0]+": takes 1 argument") {
			t.Errorf("%q: %v", line, err)
		}
	}
}
