package server

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
)

func TestNegotiateCipher(t *testing.T) {
	all := []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305}
	for _, tc := range []struct {
		server []data.Cipher
		info   string
		want   data.Cipher
		ok     bool
	}{
		{all, "IV_CIPHERS=CHACHA20-POLY1305:AES-128-GCM\n", data.AES128GCM, true},
		{[]data.Cipher{data.ChaCha20Poly1305, data.AES256GCM}, "IV_CIPHERS=AES-256-GCM:CHACHA20-POLY1305", data.ChaCha20Poly1305, true},
		{all, "IV_CIPHERS=aes-256-gcm", data.AES256GCM, true},
		{all, "IV_NCP=2\n", data.AES256GCM, true},
		{[]data.Cipher{data.ChaCha20Poly1305}, "IV_NCP=2\n", 0, false},
		{all, "IV_CIPHERS=BF-CBC", 0, false},
		{all, "", 0, false},
	} {
		got, ok := negotiateCipher(tc.server, 0, parsePeerInfo(tc.info), "")
		if got != tc.want || ok != tc.ok {
			t.Errorf("server %v, peer-info %q: got %v %v, want %v %v", tc.server, tc.info, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParsePeerInfo(t *testing.T) {
	pi := parsePeerInfo("IV_VER=2.6.14\nIV_PLAT=linux\nIV_PROTO=990\nIV_NCP=2\nIV_CIPHERS=AES-256-GCM:CHACHA20-POLY1305\nbroken line\n")
	if pi.version != "2.6.14" || pi.proto != 990 || pi.ncp != 2 || strings.Join(pi.ciphers, ",") != "AES-256-GCM,CHACHA20-POLY1305" {
		t.Fatalf("%+v", pi)
	}
	if pi.proto&ivProtoDataV2 == 0 || pi.proto&ivProtoTLSExport == 0 || pi.proto&ivProtoCCExit == 0 {
		t.Fatalf("IV_PROTO bits of %d", pi.proto)
	}
}

func TestCookies(t *testing.T) {
	j, err := newCookieJar(60 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddrPort("192.0.2.1:1194")
	sid := wire.SessionID{1, 2, 3}
	now := time.Now()
	c := j.sessionID(a, sid, now)
	if !j.valid(a, sid, c, now) || !j.valid(a, sid, c, now.Add(30*time.Second)) {
		t.Fatal("cookie rejected within its slot or the next")
	}
	if j.valid(a, sid, c, now.Add(61*time.Second)) {
		t.Fatal("cookie accepted two slots later")
	}
	if j.valid(netip.MustParseAddrPort("192.0.2.1:1195"), sid, c, now) || j.valid(a, wire.SessionID{1, 2, 4}, c, now) {
		t.Fatal("cookie accepted for another address or client session")
	}
	other, _ := newCookieJar(60 * time.Second)
	if other.valid(a, sid, c, now) {
		t.Fatal("cookie accepted by another server key")
	}
}

func TestPushMessagesSplit(t *testing.T) {
	if m := pushMessages([]string{"a", "b"}); len(m) != 1 || m[0] != "PUSH_REPLY,a,b" {
		t.Fatalf("%q", m)
	}
	var opts []string
	for i := 0; i < 150; i++ {
		opts = append(opts, fmt.Sprintf("route 10.%d.0.0 255.255.0.0", i))
	}
	msgs := pushMessages(opts)
	if len(msgs) < 3 {
		t.Fatalf("%d messages", len(msgs))
	}
	var acc control.PushAccumulator
	for i, m := range msgs {
		if len(m) > maxPushMessage {
			t.Fatalf("message %d has %d bytes", i, len(m))
		}
		done, err := acc.Add(m)
		if err != nil || done != (i == len(msgs)-1) {
			t.Fatalf("message %d: done %v err %v", i, done, err)
		}
	}
	r, err := acc.Reply()
	if err != nil || len(r.Routes) != 150 {
		t.Fatalf("%d routes, %v", len(r.Routes), err)
	}
}

// A reply too long for one message reaches the client in parts.
func TestSplitPushReply(t *testing.T) {
	f := newFixture(t)
	cfg := f.serverConfig(UDP)
	cfg.Push = nil
	for i := 0; i < 120; i++ {
		cfg.Push = append(cfg.Push, fmt.Sprintf("route 172.16.%d.0 255.255.255.0", i))
	}
	s := startServer(t, cfg, Options{})
	c := dialClient(t, f.clientConfig(t, s, "many", ""), client.Options{})
	p := c.Pushed()
	if len(p.Routes) != 120 || p.Cipher == "" || !p.HasPeerID || p.Local.Addr() != netip.MustParseAddr("10.8.0.2") {
		t.Fatalf("%d routes, cipher %q, peer-id %v, local %v", len(p.Routes), p.Cipher, p.HasPeerID, p.Local)
	}
}
