package main

import (
	"strings"
	"testing"
)

// TestOvpnFlags checks how `wirelane ovpn connect|serve` parse their
// command lines: the exit status and what stderr says.
func TestOvpnFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"connect without a file", []string{"connect"}, 2, "want exactly one file argument, got 0"},
		{"connect with two files", []string{"connect", "a.ovpn", "b.ovpn"}, 2, "got 2"},
		{"connect with an unknown flag", []string{"connect", "--bogus", "a.ovpn"}, 2, "flag provided but not defined"},
		{"connect with a bad MTU", []string{"connect", "--mtu", "10", "a.ovpn"}, 2, "--mtu 10 out of range"},
		{"connect with a bad --dns", []string{"connect", "--dns", "yes", "a.ovpn"}, 2, `--dns "yes": want auto or off`},
		{"connect help", []string{"connect", "--help"}, 0, "Usage: wirelane ovpn connect"},
		{"connect help spells long flags with two dashes", []string{"connect", "--help"}, 0, "\n  --auth-file FILE\n"},
		{"connect help spells one-letter flags with one", []string{"connect", "--help"}, 0, "\n  -v\n"},
		{"connect flags after the file", []string{"connect", "/nonexistent/x.ovpn", "--dev", "wlx0"}, 1, "no such file"},
		{"serve without a file", []string{"serve"}, 2, "want exactly one file argument"},
		{"serve help", []string{"serve", "-h"}, 0, "Usage: wirelane ovpn serve"},
		{"connect to a missing file", []string{"connect", "/nonexistent/x.ovpn"}, 1, "no such file"},
		{"serve a missing file", []string{"serve", "/nonexistent/server.conf"}, 1, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := wl(t, "", append([]string{"ovpn"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			// --help is what was asked for: it goes to standard output.
			got, stream := stderr, "stderr"
			if tc.code == 0 {
				got, stream = stdout, "stdout"
			}
			if !strings.Contains(got, tc.want) {
				t.Fatalf("%s lacks %q:\n%s", stream, tc.want, got)
			}
		})
	}
}
