package e2e

// The tray's harness: wirelane-tray (the built binary) on a private session
// bus with a fake StatusNotifierWatcher, notification daemon and portal
// (internal/testkit/dbustest says why they are fakes), its menu read back
// with com.canonical.dbusmenu.GetLayout and clicked with Event.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/wirelane/wirelane/internal/testkit/dbustest"
)

// trayBed is one tray and the desktop around it.
type trayBed struct {
	bus     *dbustest.Bus
	watcher *dbustest.Watcher
	notes   *dbustest.Notifications
	portal  *dbustest.Portal
	conn    *dbus.Conn
	item    dbustest.Item
	menu    *dbustest.Menu
	cmd     *exec.Cmd
	out     *syncBuffer
	zenity  string // the stub's directory (its log is zenity.log there)
}

// syncBuffer is a bytes.Buffer safe for the process's writes and the
// test's reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// zenityStub is a stand-in for zenity (a real one needs a display and a
// user to type): it logs its arguments and answers as a user would.
const zenityStub = `#!/bin/sh
dir=$(dirname "$0")
echo "$*" >> "$dir/zenity.log"
case "$*" in
*--file-selection*) [ -f "$dir/file" ] && cat "$dir/file" && exit 0; exit 1 ;;
*--password*) printf 'alice|s3cr|et\n' ;;
*--entry*) printf '424242\n' ;;
*) exit 5 ;;
esac
`

type trayOpts struct {
	cred     *syscall.Credential // run as this user (nil: as the test)
	noPortal bool
}

// startTray runs wirelane-tray against socket on a new private bus.
func startTray(t *testing.T, socket string, o trayOpts) *trayBed {
	t.Helper()
	if err := buildErr["wirelane-tray"]; err != nil {
		t.Skipf("wirelane-tray did not build: %v", err)
	}
	tb := &trayBed{bus: dbustest.StartBus(t)}
	tb.watcher = dbustest.StartWatcher(t, tb.bus)
	tb.notes = dbustest.StartNotifications(t, tb.bus)
	if !o.noPortal {
		tb.portal = dbustest.StartPortal(t, tb.bus)
	}
	tb.conn = tb.bus.Conn(t)
	tb.zenity = t.TempDir()
	os.Chmod(tb.zenity, 0o777)
	if err := os.WriteFile(filepath.Join(tb.zenity, "zenity"), []byte(zenityStub), 0o755); err != nil {
		t.Fatal(err)
	}
	tb.run(t, socket, o)
	return tb
}

func (tb *trayBed) run(t *testing.T, socket string, o trayOpts) {
	t.Helper()
	home := t.TempDir()
	os.Chmod(home, 0o777)
	prog := filepath.Join(binDir, "wirelane-tray")
	if o.cred != nil {
		// binDir is root's alone: give the other user a copy.
		b, err := os.ReadFile(prog)
		if err != nil {
			t.Fatal(err)
		}
		prog = filepath.Join(tb.zenity, "wirelane-tray")
		if err := os.WriteFile(prog, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(prog, "--socket", socket, "--zenity", filepath.Join(tb.zenity, "zenity"), "--verbose")
	cmd.Env = []string{tb.bus.Env(), "HOME=" + home, "PATH=" + os.Getenv("PATH")}
	tb.out = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = tb.out, tb.out
	if o.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.cred}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tb.cmd = cmd
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("wirelane-tray's output:\n%s", tb.out.String())
		}
	})
	tb.item = tb.watcher.WaitItem(t, 10*time.Second)
	tb.menu = dbustest.MenuOf(t, tb.conn, tb.item)
}

// alive fails the test when the tray has exited.
func (tb *trayBed) alive(t *testing.T) {
	t.Helper()
	if tb.cmd.ProcessState != nil || tb.cmd.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatalf("wirelane-tray exited:\n%s", tb.out.String())
	}
}

// wait reads the menu until it has an entry starting with each of labels.
func (tb *trayBed) wait(t *testing.T, what string, labels ...string) *dbustest.Node {
	t.Helper()
	return tb.menu.Wait(t, 20*time.Second, what, func(n *dbustest.Node) error {
		for _, l := range labels {
			if n.Find(l) == nil {
				return fmt.Errorf("no entry %q", l)
			}
		}
		return nil
	})
}

// tooltip waits for the tooltip to contain want.
func (tb *trayBed) tooltip(t *testing.T, want string) {
	t.Helper()
	dbustest.Eventually(t, 15*time.Second, "the tooltip says "+want, func() error {
		s, err := dbustest.Tooltip(tb.conn, tb.item)
		if err != nil {
			return err
		}
		if !strings.Contains(s, want) {
			return fmt.Errorf("tooltip %q", s)
		}
		return nil
	})
}

// zenityLog is what the zenity stub was asked.
func (tb *trayBed) zenityLog() string {
	b, _ := os.ReadFile(filepath.Join(tb.zenity, "zenity.log"))
	return string(b)
}
