package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestHelpAndFlags(t *testing.T) {
	var b bytes.Buffer
	if code := run([]string{"--help"}, &b); code != 0 {
		t.Errorf("--help: exit %d", code)
	}
	for _, want := range []string{"Usage: wirelane-tray", "--socket SOCKET", "--zenity PROGRAM", "--autostart", "--group GROUP"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, b.String())
		}
	}
	if regexp.MustCompile(`\n  -[a-z]`).MatchString(b.String()) {
		t.Errorf("a flag spelt with one dash:\n%s", b.String())
	}
	b.Reset()
	if code := run([]string{"--bogus"}, &b); code != 2 {
		t.Errorf("--bogus: exit %d", code)
	}
	if code := run([]string{"extra"}, &b); code != 2 || !strings.Contains(b.String(), `unexpected argument "extra"`) {
		t.Errorf("an argument: exit %d, %s", code, b.String())
	}
}

// TestNoSessionBus: without a session bus the tray says so and exits 1.
func TestNoSessionBus(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path="+t.TempDir()+"/none")
	var b bytes.Buffer
	if code := run([]string{"--socket", t.TempDir() + "/api.sock"}, &b); code != 1 || !strings.Contains(b.String(), "no D-Bus session bus") {
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
	if code := run([]string{"--autostart", "--group", "no-such-group-wl", "--verbose"}, &b); code != 0 || !strings.Contains(b.String(), "not starting") {
		t.Errorf("exit %d: %s", code, b.String())
	}
}
