package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestHelpAndFlags: --help (and -h) prints the usage and every flag spelt
// --name on standard output and exits 0; --version prints the version.
func TestHelpAndFlags(t *testing.T) {
	for _, arg := range []string{"--help", "-h"} {
		var out, errOut bytes.Buffer
		if code := run([]string{arg}, &out, &errOut); code != 0 || errOut.Len() > 0 {
			t.Errorf("%s: exit %d, stderr %q", arg, code, errOut.String())
		}
		for _, want := range []string{"Usage: wirelane-tray", "--socket SOCKET", "--zenity PROGRAM", "--autostart", "--group GROUP", "--verbose", "--version"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s lacks %q:\n%s", arg, want, out.String())
			}
		}
		if regexp.MustCompile(`\n  -[a-z]`).MatchString(out.String()) {
			t.Errorf("a flag spelt with one dash:\n%s", out.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := run([]string{"--version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "wirelane-tray ") || !strings.Contains(out.String(), "(revision ") {
		t.Errorf("--version: exit %d, %q %q", code, out.String(), errOut.String())
	}
}

// TestBadUsage: a bad flag, a flag without its value or an argument is
// exit 2 with a message that names it, spelt --name, and the usage line.
func TestBadUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--bogus"}, "wirelane-tray: flag provided but not defined: --bogus"},
		{[]string{"-bogus"}, "wirelane-tray: flag provided but not defined: --bogus"},
		{[]string{"--socket"}, "wirelane-tray: flag needs an argument: --socket"},
		{[]string{"--verbose=maybe"}, "--verbose"},
		{[]string{"extra"}, `wirelane-tray: unexpected argument "extra"`},
	} {
		var out, errOut bytes.Buffer
		code := run(c.args, &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), c.want) || out.Len() > 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out.String(), errOut.String(), c.want)
		}
		if strings.HasPrefix(c.args[0], "-") && !strings.Contains(errOut.String(), "Usage: wirelane-tray [--socket PATH]") {
			t.Errorf("%v: no usage line:\n%s", c.args, errOut.String())
		}
	}
}

// TestNoSessionBus: without a session bus the tray says so and exits 1.
func TestNoSessionBus(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+t.TempDir()+"/none")
	var b bytes.Buffer
	if code := run([]string{"--socket", t.TempDir() + "/api.sock"}, &b, &b); code != 1 || !strings.Contains(b.String(), "no D-Bus session bus") {
		t.Errorf("exit %d: %s", code, b.String())
	}
}

// TestAutostartSkipsOutsiders: --autostart does nothing for a user who is
// neither root nor in the group.
func TestAutostartSkipsOutsiders(t *testing.T) {
	if os.Geteuid() == 0 {
		// Root is always let through; a group nobody is in is not enough.
		t.Skip("root always gets the tray")
	}
	var b bytes.Buffer
	if code := run([]string{"--autostart", "--group", "no-such-group-wl", "--verbose"}, &b, &b); code != 0 || !strings.Contains(b.String(), "not starting") {
		t.Errorf("exit %d: %s", code, b.String())
	}
}
