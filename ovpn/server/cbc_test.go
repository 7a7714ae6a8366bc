package server

import (
	"testing"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/data"
)

// The legacy CBC data channel between the Wirelane server and client,
// with each auth digest and through a renegotiation.
func TestCBCDataChannel(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		cipher data.Cipher
		auth   string
	}{{data.AES256CBC, "SHA1"}, {data.AES128CBC, "SHA256"}, {data.AES256CBC, "SHA512"}} {
		t.Run(tc.cipher.String()+"-"+tc.auth, func(t *testing.T) {
			cfg := f.serverConfig(UDP)
			cfg.DataCiphers = []data.Cipher{tc.cipher}
			cfg.Auth = tc.auth
			s := startServer(t, cfg, Options{})
			echoResponder(s)
			c := dialClient(t, f.clientConfig(t, s, "client1", "data-ciphers AES-256-GCM:"+tc.cipher.String()+"\nauth "+tc.auth+"\n"), client.Options{})
			if c.Cipher() != tc.cipher {
				t.Fatalf("cipher %v", c.Cipher())
			}
			ping(t, c, s.TunnelAddress().Addr(), 1)
			if err := c.Renegotiate(t.Context()); err != nil {
				t.Fatal(err)
			}
			ping(t, c, s.TunnelAddress().Addr(), 2)
			if bad := s.Stats().BadData.Load(); bad != 0 {
				t.Fatalf("server dropped %d packets", bad)
			}
		})
	}
}

// A client that negotiates nothing gets the cipher of its options string
// when the server has it, else data-ciphers-fallback.
func TestNegotiateOldClient(t *testing.T) {
	old := parsePeerInfo("IV_VER=2.3.18\nIV_PROTO=0\n")
	server := []data.Cipher{data.AES256GCM, data.AES128CBC}
	occ := "V4,dev-type tun,link-mtu 1558,tun-mtu 1500,proto UDPv4,cipher AES-128-CBC,auth SHA1,keysize 128,key-method 2,tls-client"
	if c, ok := negotiateCipher(server, 0, old, occ); !ok || c != data.AES128CBC {
		t.Fatalf("options string cipher: %v %v", c, ok)
	}
	if c, ok := negotiateCipher(server, data.AES256CBC, old, "V4,cipher BF-CBC"); !ok || c != data.AES256CBC {
		t.Fatalf("fallback: %v %v", c, ok)
	}
	if _, ok := negotiateCipher(server, 0, old, "V4,cipher BF-CBC"); ok {
		t.Fatal("an old client got a cipher without a fallback")
	}
	// A client that offers a list is not given the fallback.
	if _, ok := negotiateCipher(server, data.AES256CBC, parsePeerInfo("IV_CIPHERS=CHACHA20-POLY1305\n"), ""); ok {
		t.Fatal("the fallback was used for a client that negotiates")
	}
}
