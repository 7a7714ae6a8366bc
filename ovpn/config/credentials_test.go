package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every malformed form of a client's credentials (auth-user-pass inline
// or from a file, static-challenge, askpass, auth-nocache) is refused at
// parse time with FILE:LINE of its block or directive, and the file's
// path where one is read (#18).
func TestMalformedCredentialsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"empty.txt": "", "nouser.txt": "\npw\n", "crlf.txt": "\r\npw\r\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o700); err != nil {
		t.Fatal(err)
	}
	h := "client\nremote h\n<ca>\n" + pem + "</ca>\n" // 7 lines
	file := func(n string) string { return filepath.Join(dir, n) }
	for _, tc := range []struct {
		name, text, want string
		noDir            bool // parsed without a directory (the service's import)
	}{
		{"an empty inline block", h + "<auth-user-pass>\n</auth-user-pass>\n", "x.ovpn:8: <auth-user-pass>: want a username line", false},
		{"an inline block whose username line is empty", h + "<auth-user-pass>\n\npw\n</auth-user-pass>\n", "x.ovpn:8: <auth-user-pass>: want a username line", false},
		{"an inline block never closed", h + "<auth-user-pass>\nalice\npw\n", "x.ovpn:8: <auth-user-pass>: inline block not closed with </auth-user-pass>", false},
		{"an inline block on one line", h + "<auth-user-pass>alice</auth-user-pass>\n", "x.ovpn:8: <auth-user-pass>: an inline block's <auth-user-pass> and </auth-user-pass> go on lines of their own", false},
		{"an inline block after other lines", h + "verb 3\n\n<auth-user-pass>\n\n</auth-user-pass>\n", "x.ovpn:10: <auth-user-pass>: want a username line", false},
		{"a missing file", h + "auth-user-pass missing.txt\n", "x.ovpn:8: auth-user-pass: open " + file("missing.txt") + ": no such file", false},
		{"an empty file", h + "auth-user-pass empty.txt\n", "x.ovpn:8: auth-user-pass: " + file("empty.txt") + ": want a username line", false},
		{"a file whose username line is empty", h + "auth-user-pass nouser.txt\n", "x.ovpn:8: auth-user-pass: " + file("nouser.txt") + ": want a username line", false},
		{"a file of CRLF lines whose username is empty", h + "auth-user-pass crlf.txt\n", "x.ovpn:8: auth-user-pass: " + file("crlf.txt") + ": want a username line", false},
		{"a directory", h + "auth-user-pass adir\n", "x.ovpn:8: auth-user-pass: read " + file("adir") + ": is a directory", false},
		{"two arguments", h + "auth-user-pass a b\n", "x.ovpn:8: auth-user-pass: takes 0 to 1 arguments, got 2", false},
		{"a file where files are not allowed", h + "auth-user-pass up.txt\n", `x.ovpn:8: auth-user-pass: file references are not allowed here ("up.txt")`, true},
		{"static-challenge without arguments", h + "auth-user-pass\nstatic-challenge\n", "x.ovpn:9: static-challenge: takes 2 argument(s), got 0", false},
		{"static-challenge without its echo flag", h + "auth-user-pass\nstatic-challenge PIN\n", "x.ovpn:9: static-challenge: takes 2 argument(s), got 1", false},
		{"static-challenge with a bad echo flag", h + "auth-user-pass\nstatic-challenge PIN 2\n", `x.ovpn:9: static-challenge: echo flag must be 0 or 1, got "2"`, false},
		{"auth-nocache with an argument", h + "auth-user-pass\nauth-nocache x\n", "x.ovpn:9: auth-nocache: takes 0 argument(s), got 1", false},
		{"askpass from a missing file", h + "auth-user-pass\naskpass missing.txt\n", "x.ovpn:9: askpass: open " + file("missing.txt"), false},
		{"inline proxy credentials", h + "auth-user-pass\n<http-proxy-user-pass>\na\nb\n</http-proxy-user-pass>\n", "x.ovpn:9: <http-proxy-user-pass>: inline not supported", false},
		{"auth-token-user in the file", h + "auth-user-pass\nauth-token-user\n", "x.ovpn:9: auth-token-user: a pushed option", false},
	} {
		d := dir
		if tc.noDir {
			d = ""
		}
		_, err := Parse([]byte(tc.text), "x.ovpn", d)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// What OpenVPN 2.6 accepts stays accepted: a username without its
// password (an inline block, a file of one line, an empty password
// line) is kept with Password "" and AsksPassword, to be asked for
// before connecting; lines after the password are ignored.
func TestUsernameOnlyCredentials(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "one.txt"), []byte("carol"), 0o600)
	os.WriteFile(filepath.Join(dir, "two.txt"), []byte("dave\r\n\r\n"), 0o600)
	h := "client\nremote h\n<ca>\n" + pem + "</ca>\n"
	for _, tc := range []struct {
		text, user, pass string
		asks             bool
	}{
		{h + "<auth-user-pass>\nbob\n</auth-user-pass>\n", "bob", "", true},
		{h + "auth-user-pass one.txt\n", "carol", "", true},
		{h + "auth-user-pass two.txt\n", "dave", "", true},
		{h + "<auth-user-pass>\nerin\ns3cret\nextra\n</auth-user-pass>\n", "erin", "s3cret", false},
		{h + "auth-user-pass\n", "", "", false},
	} {
		cfg, err := Parse([]byte(tc.text), "x.ovpn", dir)
		if err != nil {
			t.Errorf("%q: %v", tc.text[len(h):], err)
			continue
		}
		if cfg.Username != tc.user || cfg.Password != tc.pass || cfg.AsksPassword() != tc.asks {
			t.Errorf("%q: %q/%q, asks %v; want %q/%q, asks %v", tc.text[len(h):], cfg.Username, cfg.Password, cfg.AsksPassword(), tc.user, tc.pass, tc.asks)
		}
	}
}
