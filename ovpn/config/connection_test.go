package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/data"
)

// <connection> blocks become the remote list in order, each from the
// file's proto and port as they stand where the block begins, with its
// own server-poll-timeout; remote lines outside them are not used.
func TestConnectionBlocks(t *testing.T) {
	text := "client\nproto tcp\nport 443\nremote outside.example 1\nauth-user-pass\n<ca>\n" + pem + "</ca>\n" +
		"<connection>\nremote a.example\n</connection>\n" +
		"<connection>\nremote b.example 1195\nproto udp6\nserver-poll-timeout 4\nexplicit-exit-notify 2\n</connection>\n" +
		"proto udp\n" +
		"<connection>\nremote c.example 1196 tcp4\nport 9\n</connection>\n"
	cfg, err := Parse([]byte(text), "x.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	want := []Remote{
		{Host: "a.example", Port: 443, Proto: TCP},
		{Host: "b.example", Port: 1195, Proto: UDP, Family: 6, PollTimeout: 4},
		{Host: "c.example", Port: 1196, Proto: TCP, Family: 4},
	}
	if len(cfg.Remotes) != len(want) {
		t.Fatalf("remotes %+v", cfg.Remotes)
	}
	for i := range want {
		if cfg.Remotes[i] != want[i] {
			t.Errorf("remote %d: %+v, want %+v", i, cfg.Remotes[i], want[i])
		}
	}
	var notes []string
	for _, w := range cfg.Warnings {
		notes = append(notes, w.String())
	}
	all := strings.Join(notes, "\n")
	for _, w := range []string{"remote line(s) outside the <connection> blocks are not used", "explicit-exit-notify"} {
		if !strings.Contains(all, w) {
			t.Errorf("warnings lack %q:\n%s", w, all)
		}
	}
}

// Mistakes inside a block are reported at their own line.
func TestConnectionBlockErrors(t *testing.T) {
	base := "client\nauth-user-pass\n<ca>\n" + pem + "</ca>\n"
	at := strings.Count(base, "\n") + 1 // the <connection> line
	for _, tc := range []struct {
		body, want  string
		unsupported bool
	}{
		{"", fmt.Sprintf("x.ovpn:%d: ", at+0) + "<connection>: no remote in the block", false},
		{"proto udp\n", fmt.Sprintf("x.ovpn:%d: ", at+0) + "<connection>: no remote", false},
		{"remote a\nremote b\n", fmt.Sprintf("x.ovpn:%d: ", at+2) + "remote: a <connection> block holds exactly one remote", false},
		{"remote a\ntls-crypt ta.key\n", fmt.Sprintf("x.ovpn:%d: ", at+2) + "tls-crypt: per-connection control-channel keys", true},
		{"remote a\nhttp-proxy p 8080\n", fmt.Sprintf("x.ovpn:%d: ", at+2) + "http-proxy: HTTP proxies", true},
		{"remote a\nfragment 1300\n", fmt.Sprintf("x.ovpn:%d: ", at+2) + "fragment", true},
		{"remote a\ncipher AES-256-GCM\n", fmt.Sprintf("x.ovpn:%d: ", at+2) + "cipher: not allowed in a <connection> block", false},
		{"remote a\nproto sctp\n", fmt.Sprintf("x.ovpn:%d: ", at+2) + "proto: unknown protocol", false},
		{"remote a 99999\n", fmt.Sprintf("x.ovpn:%d: ", at+1) + "remote: bad number", false},
		{"remote \"a\n", fmt.Sprintf("x.ovpn:%d: ", at+1) + "<connection>: unterminated quote", false},
		{"remote a\n<http-proxy-user-pass>\n", fmt.Sprintf("x.ovpn:%d: ", at+2) + "<connection>: inline blocks", true},
	} {
		_, err := Parse([]byte(base+"<connection>\n"+tc.body+"</connection>\n"), "x.ovpn", "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.body, err, tc.want)
			continue
		}
		if errors.Is(err, ErrUnsupported) != tc.unsupported {
			t.Errorf("%q: errors.Is(ErrUnsupported) = %v", tc.body, !tc.unsupported)
		}
	}
}

// docs/examples/ovpn-provider.ovpn parses (its placeholder CA and
// tls-crypt key replaced by real ones) into two connections with auth-user-pass,
// auth-nocache and stub-v2 framing.
func TestExampleProviderProfile(t *testing.T) {
	b, err := os.ReadFile("../../docs/examples/ovpn-provider.ovpn")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, "<tls-crypt>\n"), strings.Index(text, "</tls-crypt>")
	text = text[:i] + "<tls-crypt>\n" + staticKeyText() + text[j:]
	i, j = strings.Index(text, "<ca>\n"), strings.Index(text, "</ca>")
	text = text[:i] + "<ca>\n" + pem + text[j:]
	cfg, err := Parse([]byte(text), "ovpn-provider.ovpn", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Remotes) != 2 || cfg.Remotes[1].Port != 443 || cfg.Remotes[1].Proto != TCP || cfg.Remotes[0].PollTimeout != 0 ||
		!cfg.AuthUserPass || !cfg.AuthNoCache || cfg.Compress != data.FramingV2 || cfg.ServerPollTimeout != 10 {
		t.Fatalf("%+v", cfg)
	}
}
