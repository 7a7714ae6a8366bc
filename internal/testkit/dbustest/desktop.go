package dbustest

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
)

// Desktop is what a tray finds on a desktop, headless: a private bus with
// the fake watcher, notification daemon and (unless left out) portal, and a
// zenity stand-in.
type Desktop struct {
	Bus     *Bus
	Watcher *Watcher
	Notes   *Notifications
	Portal  *Portal // nil without one
	Conn    *dbus.Conn
	// ZenityDir holds the zenity stand-in (ZenityDir/zenity); it logs its
	// arguments to zenity.log there, picks the file named in ZenityDir/file,
	// answers a password dialog with ZenityDir/password ("USER|PASSWORD";
	// alice|s3cr|et without it, s3cr|et without --username, Cancel when
	// ZenityDir/cancel exists) and
	// an entry with 424242.
	ZenityDir string
}

// zenityStub is a stand-in for zenity (a real one needs a display and a
// user to type): it logs its arguments and answers as a user would.
const zenityStub = `#!/bin/sh
dir=$(dirname "$0")
echo "$*" >> "$dir/zenity.log"
case "$*" in
*--file-selection*) [ -f "$dir/file" ] && cat "$dir/file" && exit 0; exit 1 ;;
*--password*) [ -f "$dir/cancel" ] && exit 1
	if [ -f "$dir/password" ]; then cat "$dir/password"
	elif [ -n "${*##*--username*}" ]; then printf 's3cr|et\n'
	else printf 'alice|s3cr|et\n'; fi ;;
*--entry*) printf '424242\n' ;;
*) exit 5 ;;
esac
`

// NewDesktop starts a desktop; portal says whether it has a file chooser.
func NewDesktop(t testing.TB, portal bool) *Desktop {
	t.Helper()
	d := &Desktop{Bus: StartBus(t)}
	d.Watcher = StartWatcher(t, d.Bus)
	d.Notes = StartNotifications(t, d.Bus)
	if portal {
		d.Portal = StartPortal(t, d.Bus)
	}
	d.Conn = d.Bus.Conn(t)
	dir, err := os.MkdirTemp("", "wl-zenity-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	d.ZenityDir = dir
	if err := os.WriteFile(d.Zenity(), []byte(zenityStub), 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// Zenity is the stand-in's path.
func (d *Desktop) Zenity() string { return filepath.Join(d.ZenityDir, "zenity") }

// ZenityLog is what the stand-in was asked, one call a line.
func (d *Desktop) ZenityLog() string {
	b, _ := os.ReadFile(filepath.Join(d.ZenityDir, "zenity.log"))
	return string(b)
}

// Tray is a tray process on a Desktop.
type Tray struct {
	d    *Desktop
	Cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	// Item is its registration with the watcher, Menu its dbusmenu.
	Item Item
	Menu *Menu
}

// syncBuffer is a bytes.Buffer safe for a process's writes and a test's
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start runs cmd (its Env is set here, plus extra) as a tray on the
// desktop, stopped with SIGTERM when the test ends. It does not wait for
// the item to register: see Register.
func (d *Desktop) Start(t testing.TB, cmd *exec.Cmd, extra ...string) *Tray {
	t.Helper()
	home, err := os.MkdirTemp("", "wl-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	os.Chmod(home, 0o777)
	cmd.Env = append([]string{d.Bus.Env(), "HOME=" + home, "PATH=" + os.Getenv("PATH")}, extra...)
	tr := &Tray{d: d, Cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = tr.out, tr.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(tr.done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-tr.done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-tr.done
		}
		if t.Failed() {
			t.Logf("the tray's output:\n%s", tr.out.String())
		}
	})
	return tr
}

// Run starts cmd as a tray and waits for its item to register.
func (d *Desktop) Run(t testing.TB, cmd *exec.Cmd, extra ...string) *Tray {
	t.Helper()
	tr := d.Start(t, cmd, extra...)
	tr.Register(t, d.Watcher)
	return tr
}

// Register waits for the tray's item on watcher w and finds its menu.
func (tr *Tray) Register(t testing.TB, w *Watcher) {
	t.Helper()
	tr.Item = w.WaitItem(t, 10*time.Second)
	tr.Menu = MenuOf(t, tr.d.Conn, tr.Item)
}

// Output is what the tray printed so far.
func (tr *Tray) Output() string { return tr.out.String() }

// Alive fails the test when the tray has exited.
func (tr *Tray) Alive(t testing.TB) {
	t.Helper()
	select {
	case <-tr.done:
		t.Fatalf("the tray exited (%v):\n%s", tr.Cmd.ProcessState, tr.out.String())
	default:
	}
}

// Exited is closed when the tray has exited.
func (tr *Tray) Exited() <-chan struct{} { return tr.done }

// Wait reads the menu until it has an entry starting with each of labels.
func (tr *Tray) Wait(t testing.TB, what string, labels ...string) *Node {
	t.Helper()
	return tr.Menu.Wait(t, 20*time.Second, what, func(n *Node) error {
		for _, l := range labels {
			if n.Find(l) == nil {
				return fmt.Errorf("no entry %q", l)
			}
		}
		return nil
	})
}

// Tooltip waits for the tooltip to contain want.
func (tr *Tray) Tooltip(t testing.TB, want string) {
	t.Helper()
	Eventually(t, 15*time.Second, "the tooltip says "+want, func() error {
		s, err := Tooltip(tr.d.Conn, tr.Item)
		if err != nil {
			return err
		}
		if !strings.Contains(s, want) {
			return fmt.Errorf("tooltip %q", s)
		}
		return nil
	})
}
