package netns

// A systemd-resolved of a test's own, without systemd as PID 1:
//
//	dbus-daemon --config-file=bus.conf (a "system" bus on a socket in a
//	    temporary directory, every call allowed)
//	ip netns exec NS unshare -m sh -c 'mount -t tmpfs tmpfs /run/systemd;
//	    exec systemd-resolved'   (DBUS_SYSTEM_BUS_ADDRESS = that socket)
//
// resolved then watches the links of NS only and writes its state under a
// /run/systemd nobody else sees, and whatever the test points at the bus
// (wirelane up, resolvectl) talks to it and not to a resolved the host
// may run.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// resolvedBinaries are where Debian (and others) install the daemon.
var resolvedBinaries = []string{"/lib/systemd/systemd-resolved", "/usr/lib/systemd/systemd-resolved"}

// busConfig is the private bus: a system bus (resolved asks for one)
// that lets root do anything, as the host's own policy does for root.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=SOCKET</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`

// Resolved is a systemd-resolved started for one test.
type Resolved struct {
	// Env points a process at the private bus
	// ("DBUS_SYSTEM_BUS_ADDRESS=unix:path=...").
	Env string
	ns  *NS
}

// StartResolved starts a private system bus and systemd-resolved in n;
// both stop when the test ends. It skips the test when dbus-daemon,
// resolvectl or the daemon is not installed (scripts/test.sh installs
// them), and fails it when they do not come up.
func StartResolved(t testing.TB, n *NS) *Resolved {
	t.Helper()
	for _, c := range []string{"dbus-daemon", "resolvectl", "unshare"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("needs %s (packages dbus-daemon, systemd-resolved; scripts/test.sh installs them): %v", c, err)
		}
	}
	bin := ""
	for _, b := range resolvedBinaries {
		if _, err := os.Stat(b); err == nil {
			bin = b
			break
		}
	}
	if bin == "" {
		t.Skipf("needs systemd-resolved (Debian package systemd-resolved): none of %s", strings.Join(resolvedBinaries, ", "))
	}
	// resolved drops root for its own user, which must reach the
	// socket: t.TempDir's folders are root's alone.
	dir, err := os.MkdirTemp("", "wirelane-bus-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "system_bus_socket")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(strings.Replace(busConfig, "SOCKET", sock, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bus := Start(t, nil, "dbus-daemon", "--config-file="+conf, "--nofork")
	Eventually(t, 10*time.Second, "the private D-Bus socket", func() error {
		select {
		case <-bus.Exited():
			return errExited(bus.Output())
		default:
		}
		_, err := os.Stat(sock)
		return err
	})
	r := &Resolved{Env: "DBUS_SYSTEM_BUS_ADDRESS=unix:path=" + sock, ns: n}
	rd := StartEnv(t, n, []string{r.Env}, "unshare", "-m", "sh", "-c",
		"mkdir -p /run/systemd && mount -t tmpfs tmpfs /run/systemd && exec "+bin)
	Eventually(t, 10*time.Second, "systemd-resolved on the private bus", func() error {
		select {
		case <-rd.Exited():
			return errExited(rd.Output())
		default:
		}
		_, err := Try(n, []string{r.Env}, "resolvectl", "status")
		return err
	})
	return r
}

// Resolvectl runs `resolvectl args...` in the namespace against this
// resolved and returns its output; a failure fails the test.
func (r *Resolved) Resolvectl(t testing.TB, args ...string) string {
	t.Helper()
	return RunEnv(t, r.ns, []string{r.Env}, append([]string{"resolvectl"}, args...)...)
}

type errExited string

func (e errExited) Error() string { return "exited: " + string(e) }
