package client

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
)

// The data cipher of a push: the pushed one if data-ciphers has it; from
// a server that pushes none, the cipher of its options string when
// data-ciphers has it, else data-ciphers-fallback, else an error that
// says what to add (as OpenVPN 2.6's client).
func TestPushedCipher(t *testing.T) {
	occ := "V4,dev-type tun,link-mtu 1570,tun-mtu 1500,proto UDPv4,cipher AES-256-CBC,auth SHA1,keysize 256,key-method 2,tls-server"
	for _, tc := range []struct {
		name     string
		ciphers  []data.Cipher
		fallback data.Cipher
		pushed   string
		want     data.Cipher
		err      string
	}{
		{"pushed", []data.Cipher{data.AES256GCM}, 0, "AES-256-GCM", data.AES256GCM, ""},
		{"pushed, not offered", []data.Cipher{data.AES256GCM}, 0, "AES-256-CBC", 0, "not in data-ciphers"},
		{"old server, listed", []data.Cipher{data.AES256GCM, data.AES256CBC}, 0, "", data.AES256CBC, ""},
		{"old server, fallback", []data.Cipher{data.AES256GCM}, data.AES128CBC, "", data.AES128CBC, ""},
		{"old server, nothing", []data.Cipher{data.AES256GCM}, 0, "", 0, "add it to data-ciphers (or data-ciphers-fallback AES-256-CBC)"},
	} {
		s := &Session{cfg: &config.Config{Common: config.Common{DataCiphers: tc.ciphers, DataCiphersFallback: tc.fallback}},
			log: slog.New(slog.DiscardHandler), serverOptions: occ}
		got, err := s.pushedCipher(&control.PushReply{Cipher: tc.pushed})
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v %v", tc.name, got, err)
		}
	}
}
