package e2e

// The tray's harness: wirelane-tray (the built binary) on a headless
// desktop (internal/testkit/dbustest: a private session bus with a fake
// StatusNotifierWatcher, notification daemon and portal, and why they are
// fakes), its menu read back with com.canonical.dbusmenu.GetLayout and
// clicked with Event.

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/dbustest"
)

type trayOpts struct {
	cred     *syscall.Credential // run as this user (nil: as the test)
	noPortal bool
}

// trayBed is one tray and the desktop around it.
type trayBed struct {
	*dbustest.Desktop
	*dbustest.Tray
}

// startTray runs wirelane-tray against socket on a new desktop.
func startTray(t *testing.T, socket string, o trayOpts) *trayBed {
	t.Helper()
	if err := buildErr["wirelane-tray"]; err != nil {
		t.Skipf("wirelane-tray did not build: %v", err)
	}
	d := dbustest.NewDesktop(t, !o.noPortal)
	prog := filepath.Join(binDir, "wirelane-tray")
	if o.cred != nil {
		// binDir is root's alone: give the other user a copy.
		b, err := os.ReadFile(prog)
		if err != nil {
			t.Fatal(err)
		}
		prog = filepath.Join(d.ZenityDir, "wirelane-tray")
		if err := os.WriteFile(prog, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(prog, "--socket", socket, "--zenity", d.Zenity(), "--verbose")
	if o.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.cred}
	}
	return &trayBed{Desktop: d, Tray: d.Run(t, cmd)}
}
