package ovpnbed

import (
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
)

func TestConfigs(t *testing.T) {
	for _, proto := range []string{"udp", "tcp"} {
		c, err := Configs(Options{Proto: proto, ClientInline: "<ca>\nX\n</ca>\n"})
		if err != nil {
			t.Fatal(err)
		}
		if len(c) != 4 {
			t.Fatalf("%s: %d files, want 4", proto, len(c))
		}
		for name, body := range c {
			if !strings.Contains(body, "data-ciphers AES-256-GCM\n") {
				t.Errorf("%s %s: no default cipher:\n%s", proto, name, body)
			}
			if strings.Contains(body, "\nauth ") {
				t.Errorf("%s %s: auth line without Options.Auth", proto, name)
			}
		}
		wantServerProto := map[string]string{"udp": "proto udp4\n", "tcp": "proto tcp4-server\n"}[proto]
		if !strings.Contains(c[OpenVPNServerConf], wantServerProto) || !strings.Contains(c[WirelaneServerConf], "proto "+proto+"4\n") {
			t.Errorf("%s: servers' proto lines wrong:\n%s\n%s", proto, c[OpenVPNServerConf], c[WirelaneServerConf])
		}
		for _, name := range []string{WirelaneClientConf, OpenVPNClientConf} {
			if !strings.Contains(c[name], "remote "+ServerLink+" ") || !strings.HasSuffix(c[name], "<ca>\nX\n</ca>\n") {
				t.Errorf("%s %s: remote or inline credentials missing:\n%s", proto, name, c[name])
			}
		}
	}
	c, err := Configs(Options{Proto: "udp", Cipher: "AES-256-CBC", Auth: "SHA256"})
	if err != nil || !strings.Contains(c[OpenVPNClientConf], "data-ciphers AES-256-CBC\nauth SHA256\n") {
		t.Errorf("CBC with auth: %v\n%s", err, c[OpenVPNClientConf])
	}
	if _, err := Configs(Options{Proto: "sctp"}); err == nil || !strings.Contains(err.Error(), `"sctp"`) {
		t.Errorf("proto sctp: %v, want an error naming it", err)
	}
}

func TestNewCredsVerify(t *testing.T) {
	c, err := NewCreds("Test CA", "cli")
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CA) {
		t.Fatal("CA does not parse")
	}
	for _, tc := range []struct {
		cert, key []byte
		cn        string
		eku       x509.ExtKeyUsage
	}{{c.ServerCert, c.ServerKey, "server", x509.ExtKeyUsageServerAuth}, {c.ClientCert, c.ClientKey, "cli", x509.ExtKeyUsageClientAuth}} {
		pair, err := tls.X509KeyPair(tc.cert, tc.key)
		if err != nil {
			t.Fatalf("%s: %v", tc.cn, err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		if leaf.Subject.CommonName != tc.cn {
			t.Errorf("common name %q, want %q", leaf.Subject.CommonName, tc.cn)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{tc.eku}}); err != nil {
			t.Errorf("%s does not verify for its use: %v", tc.cn, err)
		}
	}
	if f := c.Files(); len(f) != 3 || f["ca.crt"] != string(c.CA) {
		t.Errorf("Files: %v", f)
	}
	if in := c.ClientInline(); !strings.Contains(in, "<cert>\n"+string(c.ClientCert)+"</cert>") {
		t.Errorf("ClientInline lacks the client certificate")
	}
}
