// Package dbustest runs what a desktop tray test needs on D-Bus without a
// desktop: a private session bus per test (a real dbus-daemon), and fakes
// of the desktop's parts that a headless machine does not run (a
// StatusNotifierWatcher, a notification daemon, the desktop portal's file
// chooser), plus a reader of a dbusmenu (GetLayout, Event).
//
// The fakes are fakes because the real ones need a desktop session: a
// panel (the watcher), a notification daemon with a display, and
// xdg-desktop-portal with a desktop backend. Test files only.
package dbustest

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"
)

// Bus is a private session bus.
type Bus struct {
	// Address is its D-Bus address, for DBUS_SESSION_BUS_ADDRESS.
	Address string
	cmd     *exec.Cmd
}

// StartBus runs a dbus-daemon with the session configuration on a socket
// of its own in a temporary directory, stopped when the test ends. It
// skips the test when dbus-daemon is not installed.
func StartBus(t testing.TB) *Bus {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Skip("dbus-daemon is not installed (apt: dbus-daemon): the tray tests need a private session bus")
	}
	dir, err := os.MkdirTemp("", "wl-bus-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The session configuration, except that any user may connect (a
	// test runs the tray as another user for the read-only case) and the
	// bus's socket is in the test's directory.
	conf := filepath.Join(dir, "bus.conf")
	os.Chmod(dir, 0o755)
	err = os.WriteFile(conf, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=`+filepath.Join(dir, "bus")+`</listen>
  <auth>EXTERNAL</auth>
  <standard_session_servicedirs/>
  <policy context="default">
    <allow user="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Its complaints (it cannot raise its descriptor limit in a
	// container) are not the test's business.
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("dbus-daemon: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- strings.TrimSpace(s)
	}()
	select {
	case a := <-line:
		if a == "" {
			t.Fatal("dbus-daemon printed no address")
		}
		return &Bus{Address: a, cmd: cmd}
	case <-time.After(10 * time.Second):
		t.Fatal("dbus-daemon printed no address within 10 s")
	}
	return nil
}

// Env is the environment entry that points a program at the bus.
func (b *Bus) Env() string { return "DBUS_SESSION_BUS_ADDRESS=" + b.Address }

// Conn opens a connection to the bus, closed when the test ends.
func (b *Bus) Conn(t testing.TB) *dbus.Conn {
	t.Helper()
	c, err := dbus.Connect(b.Address)
	if err != nil {
		t.Fatalf("connecting to the private bus: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Eventually calls f until it returns nil or d passes, then fails with its
// last error.
func Eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// claim takes a well-known name on c.
func claim(t testing.TB, c *dbus.Conn, name string) {
	t.Helper()
	r, err := c.RequestName(name, dbus.NameFlagDoNotQueue)
	if err != nil || r != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("claiming %s: %v (reply %d)", name, err, r)
	}
}
