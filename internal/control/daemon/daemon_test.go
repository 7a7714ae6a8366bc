package daemon

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/tun"
	"golang.org/x/sys/unix"
)

// envTestChild makes the test binary act as a daemon (with the stand-in
// engine) so that daemonizing can be tested end to end.
const envTestChild = "WIRELANE_DAEMON_TEST_CHILD"

func TestMain(m *testing.M) {
	// A binary built with -race sleeps a second on exit (the race
	// runtime's atexit_sleep_ms), and these tests start the test binary
	// as a child hundreds of times; the children are checked by this
	// process, so they may exit at once.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	if dir := os.Getenv(envTestChild); dir != "" {
		uapi.SocketDir = dir
		if s := os.Getenv("WIRELANE_TEST_SYSLOG"); s != "" {
			syslogSocket = s
		}
		engineFunc = newFakeEngine
		os.Exit(Main(os.Args[1:]))
	}
	// Detached test daemons without syslog log to files; keep them out of
	// /var/log.
	logDir, err := os.MkdirTemp("", "wirelane-daemon-test-logs")
	if err != nil {
		panic(err)
	}
	FallbackLogDir = logDir
	code := m.Run()
	os.RemoveAll(logDir)
	os.Exit(code)
}

// fakeEngine stands in for the device: it reads the TUN until the read
// fails (the interface is gone) and answers every UAPI connection with a
// fixed line.
type fakeEngine struct {
	t    tun.Device
	done chan struct{}
	once sync.Once
}

func newFakeEngine(t tun.Device, log *slog.Logger) (engine, error) {
	e := &fakeEngine{t: t, done: make(chan struct{})}
	go func() {
		bufs := make([][]byte, t.BatchSize())
		for i := range bufs {
			bufs[i] = make([]byte, 65536+16)
		}
		sizes := make([]int, len(bufs))
		for {
			if _, err := t.Read(bufs, sizes, 16); err != nil && !errors.Is(err, tun.ErrTooManySegments) {
				e.Close()
				return
			}
		}
	}()
	return e, nil
}

func (e *fakeEngine) ServeUAPI(c net.Conn) {
	fmt.Fprintf(c, "fake=%d\n\n", os.Getpid())
}
func (e *fakeEngine) Done() <-chan struct{} { return e.done }
func (e *fakeEngine) Close() {
	e.once.Do(func() {
		e.t.Close()
		close(e.done)
	})
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create TUN interfaces")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
}

func uniqueIf() string { return fmt.Sprintf("wldt%d%04x", os.Getpid()%1000, rand.Uint32()&0xffff) }

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    Config
		action  string
		wantErr string
	}{
		{args: []string{"wg0"}, want: Config{Interface: "wg0"}},
		{args: []string{"-f", "wg0"}, want: Config{Interface: "wg0", Foreground: true}},
		{args: []string{"--log-file", "/tmp/w.log", "wg0"}, want: Config{Interface: "wg0", LogFile: "/tmp/w.log"}},
		{args: []string{"--log-file=/tmp/w.log", "wg0"}, want: Config{Interface: "wg0", LogFile: "/tmp/w.log"}},
		{args: []string{"wg0", "--log-file"}, wantErr: "--log-file needs a file name"},
		{args: []string{"--", "-odd"}, want: Config{Interface: "-odd"}},
		{args: []string{"--help"}, action: "help"},
		{args: []string{"--version"}, action: "version"},
		{args: []string{"version"}, action: "version"},
		{args: nil, wantErr: "missing interface name"},
		{args: []string{"-x", "wg0"}, wantErr: `unknown option "-x" (argument 1)`},
		// Ref mode is a build of the daemon (-tags wirelane_refmode), not a flag.
		{args: []string{"--ref-mode", "wg0"}, wantErr: `unknown option "--ref-mode" (argument 1)`},
		{args: []string{"wg0", "wg1"}, wantErr: `unexpected argument "wg1"`},
	} {
		cfg, action, err := parseArgs(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseArgs(%q) error = %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || action != tc.action || cfg.Interface != tc.want.Interface ||
			cfg.Foreground != tc.want.Foreground || cfg.LogFile != tc.want.LogFile {
			t.Errorf("parseArgs(%q) = %+v, %q, %v; want %+v, %q", tc.args, cfg, action, err, tc.want, tc.action)
		}
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add("wg0")
	f.Add("-f\x00wg0")
	f.Add("--foreground\x00--\x00x")
	f.Add("--version")
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Split(s, "\x00")
		cfg, action, err := parseArgs(args)
		if err == nil && action == "" && cfg.Interface == "" {
			t.Fatalf("parseArgs(%q) accepted no interface name", args)
		}
		if err == nil && action == "" {
			cfg.validate() // must not panic
		}
	})
}

func TestParseLogLevel(t *testing.T) {
	for in, want := range map[string]LogLevel{"": LogError, "error": LogError, "verbose": LogVerbose, "debug": LogVerbose, "SILENT": LogSilent} {
		if got, err := ParseLogLevel(in); err != nil || got != want {
			t.Errorf("ParseLogLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLogLevel("loud"); err == nil || !strings.Contains(err.Error(), `LOG_LEVEL="loud"`) {
		t.Errorf("ParseLogLevel(loud) error = %v", err)
	}
}

func FuzzParseLogLevel(f *testing.F) {
	for _, s := range []string{"", "verbose", "error", "silent", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLogLevel(s)
		if err == nil {
			if again, err := ParseLogLevel(l.String()); err != nil || again != l {
				t.Fatalf("level %v does not round-trip: %v, %v", l, again, err)
			}
		}
	})
}

// FuzzParseFD checks the parser of WG_TUN_FD and WG_UAPI_FD: an accepted
// value is empty (0) or the decimal spelling of a number from 3 on, and a
// rejected one names the variable.
func FuzzParseFD(f *testing.F) {
	for _, s := range []string{"", "3", "2", "-1", "017", "+5", "2147483647", "2147483648", " 4", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fd, err := parseFD(EnvTunFD, s)
		if err != nil {
			if fd != 0 || !strings.Contains(err.Error(), EnvTunFD+"=") {
				t.Fatalf("parseFD(%q) = %d, %v", s, fd, err)
			}
			return
		}
		if s == "" {
			if fd != 0 {
				t.Fatalf("parseFD(\"\") = %d", fd)
			}
			return
		}
		if fd < 3 || strconv.Itoa(fd) != strings.TrimLeft(s, "0") {
			t.Fatalf("parseFD(%q) = %d", s, fd)
		}
	})
}

func TestConfigRejectsBadInput(t *testing.T) {
	for _, c := range []Config{
		{Interface: ""},
		{Interface: "much-too-long-name"},
		{Interface: "a/b"},
		{Interface: "wg0", TunFD: 1},
		{Interface: "wg0", UAPIFD: 2},
	} {
		if err := Run(context.Background(), c); err == nil {
			t.Errorf("Run(%+v) succeeded", c)
		}
	}
	t.Setenv(EnvTunFD, "banana")
	var c Config
	if err := c.applyEnv(); err == nil || !strings.Contains(err.Error(), "WG_TUN_FD") {
		t.Errorf("applyEnv with WG_TUN_FD=banana: %v", err)
	}
}

// startForeground runs the daemon in-process with the stand-in engine and
// returns once it is ready, plus a channel carrying Run's result.
func startForeground(t *testing.T, ctx context.Context, name string) <-chan error {
	t.Helper()
	old := engineFunc
	engineFunc = newFakeEngine
	t.Cleanup(func() { engineFunc = old })
	ready := make(chan struct{})
	res := make(chan error, 1)
	go func() {
		res <- Run(ctx, Config{Interface: name, Foreground: true, Ready: func() { close(ready) },
			Logger: slog.New(slog.DiscardHandler)})
	}()
	select {
	case <-ready:
	case err := <-res:
		t.Fatalf("Run ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("daemon not ready after 10s")
	}
	return res
}

func waitResult(t *testing.T, res <-chan error, why string) {
	t.Helper()
	select {
	case err := <-res:
		if err != nil {
			t.Fatalf("Run after %s: %v", why, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("daemon still running 5s after %s", why)
	}
}

func withSocketDir(t *testing.T) string {
	dir := filepath.Join(t.TempDir(), "wireguard")
	old := uapi.SocketDir
	uapi.SocketDir = dir
	t.Cleanup(func() { uapi.SocketDir = old })
	return dir
}

func TestSocketPermissionsAndCleanExitOnCancel(t *testing.T) {
	needRoot(t)
	dir := withSocketDir(t)
	name := uniqueIf()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := startForeground(t, ctx, name)

	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("socket directory mode = %v, %v; want 0755", st.Mode(), err)
	}
	st, err = os.Stat(uapi.SocketPath(name))
	if err != nil || st.Mode()&os.ModeSocket == 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %v, %v; want a 0600 socket", st.Mode(), err)
	}
	c, err := net.Dial("unix", uapi.SocketPath(name))
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	if line != fmt.Sprintf("fake=%d\n", os.Getpid()) {
		t.Errorf("UAPI answer %q, want the engine's", line)
	}
	if _, err := os.Stat("/sys/class/net/" + name); err != nil {
		t.Errorf("interface %s missing while the daemon runs: %v", name, err)
	}

	// A second daemon for the same name must refuse, not steal the socket.
	err = Run(context.Background(), Config{Interface: name, Foreground: true, Logger: slog.New(slog.DiscardHandler)})
	if err == nil {
		t.Error("second daemon on the same interface started")
	}

	cancel()
	waitResult(t, res, "cancellation")
	if _, err := os.Stat(uapi.SocketPath(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file left behind: %v", err)
	}
	if _, err := os.Stat("/sys/class/net/" + name); err == nil {
		t.Errorf("interface %s left behind", name)
	}
}

func TestExitWhenSocketRemoved(t *testing.T) {
	needRoot(t)
	withSocketDir(t)
	name := uniqueIf()
	res := startForeground(t, context.Background(), name)
	if err := os.Remove(uapi.SocketPath(name)); err != nil {
		t.Fatal(err)
	}
	waitResult(t, res, "removing the socket")
	if _, err := os.Stat("/sys/class/net/" + name); err == nil {
		t.Errorf("interface %s left behind", name)
	}
}

func TestExitWhenInterfaceDeleted(t *testing.T) {
	needRoot(t)
	withSocketDir(t)
	name := uniqueIf()
	res := startForeground(t, context.Background(), name)
	if out, err := exec.Command("ip", "link", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("ip link del: %v: %s", err, out)
	}
	waitResult(t, res, "deleting the interface")
	if _, err := os.Stat(uapi.SocketPath(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket file left behind: %v", err)
	}
}

func TestStaleSocketIsReplaced(t *testing.T) {
	needRoot(t)
	withSocketDir(t)
	name := uniqueIf()
	os.MkdirAll(uapi.SocketDir, 0o755)
	// A socket file nobody listens on, as a crashed daemon leaves behind.
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: uapi.SocketPath(name), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	res := startForeground(t, ctx, name)
	c, err := net.Dial("unix", uapi.SocketPath(name))
	if err != nil {
		t.Fatalf("new socket does not answer: %v", err)
	}
	c.Close()
	cancel()
	waitResult(t, res, "cancellation")
}

// TestDaemonizeReturnsWhenReady runs the real re-exec path: the parent
// must return only once the child serves the socket, and must leave the
// child running detached.
func TestDaemonizeReturnsWhenReady(t *testing.T) {
	needRoot(t)
	dir := withSocketDir(t)
	name := uniqueIf()
	t.Setenv(envTestChild, dir)
	self, _ := os.Executable()
	err := Run(context.Background(), Config{Interface: name, ReexecArgs: []string{self, name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })
	// No waiting: the socket must answer and the interface must exist now.
	c, err := net.Dial("unix", uapi.SocketPath(name))
	if err != nil {
		t.Fatalf("socket not ready when Run returned: %v", err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "fake="), "\n"))
	if err != nil || pid == os.Getpid() {
		t.Fatalf("answer %q did not come from a separate daemon process", line)
	}
	if sid, _ := unix.Getsid(pid); sid != pid {
		t.Errorf("daemon session id %d, want its own session %d", sid, pid)
	}
	// Moving the interface away at once must not disturb the daemon.
	ns := fmt.Sprintf("wldtns%d", rand.Uint32()&0xffff)
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	if out, err := exec.Command("ip", "link", "set", name, "netns", ns).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("daemon died after its interface moved to another namespace")
	}
	// Deleting the interface in its new namespace ends the daemon.
	if out, err := exec.Command("ip", "-n", ns, "link", "del", name).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The test process is the daemon's parent (a real caller exits and
	// leaves it to init), so reap it here.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ws unix.WaitStatus
		if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid {
			if ws.ExitStatus() != 0 {
				t.Errorf("daemon exit status %d, want 0", ws.ExitStatus())
			}
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("daemon still running 5s after its interface was deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDaemonizeReportsChildFailure checks that a setup error in the child
// reaches the caller instead of a silent success.
func TestDaemonizeReportsChildFailure(t *testing.T) {
	needRoot(t)
	// The child's socket directory is a regular file: its setup must fail.
	notDir := filepath.Join(t.TempDir(), "file")
	os.WriteFile(notDir, nil, 0o600)
	t.Setenv(envTestChild, notDir)
	self, _ := os.Executable()
	name := uniqueIf()
	err := Run(context.Background(), Config{Interface: name, ReexecArgs: []string{self, name}})
	if err == nil {
		exec.Command("ip", "link", "del", name).Run()
		t.Fatal("daemon whose setup failed reported success")
	}
	if !strings.Contains(err.Error(), "socket directory") {
		t.Errorf("error does not explain the failure: %v", err)
	}
	if _, err := os.Stat("/sys/class/net/" + name); err == nil {
		exec.Command("ip", "link", "del", name).Run()
		t.Errorf("failed daemon left interface %s behind", name)
	}
}

func TestInheritedDescriptorMustBeOpen(t *testing.T) {
	t.Setenv(EnvTunFD, "987")
	var stderr bytes.Buffer
	if code := mainIO("wirelaned", []string{"wlnever0"}, &stderr, &stderr); code == 0 {
		t.Fatal("daemon with a closed WG_TUN_FD reported success")
	}
	if !strings.Contains(stderr.String(), "WG_TUN_FD=987") {
		t.Errorf("error does not name the bad descriptor: %s", stderr.String())
	}
}

// TestInheritedDescriptorsSurviveDaemonizing hands the daemon an existing
// TUN and a listening socket through WG_TUN_FD and WG_UAPI_FD, on the
// detaching path: the descriptors are renumbered for the child, which must
// serve that very socket on that very interface.
func TestInheritedDescriptorsSurviveDaemonizing(t *testing.T) {
	needRoot(t)
	dir := withSocketDir(t)
	t.Setenv(envTestChild, dir)
	name := uniqueIf()
	dev, err := tun.CreateTUN(name, 1420)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })
	tunFD := dupFD(t, dev.File())
	dev.Close() // the duplicate keeps the interface alive

	sock := filepath.Join(t.TempDir(), "inherited.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	lf, _ := ln.File()
	uapiFD := dupFD(t, lf)
	lf.Close()
	ln.Close()

	var readied bool
	self, _ := os.Executable()
	err = Run(context.Background(), Config{Interface: "ignored", TunFD: tunFD, UAPIFD: uapiFD,
		ReexecArgs: []string{self, name}, Ready: func() { readied = true }})
	unix.Close(tunFD)
	unix.Close(uapiFD)
	if err != nil {
		t.Fatal(err)
	}
	if !readied {
		t.Error("Ready was not called after the detached daemon reported ready")
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("inherited socket not served: %v", err)
	}
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Close()
	pid, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(line, "fake="), "\n"))
	if err != nil || pid == os.Getpid() {
		t.Fatalf("answer %q did not come from the detached daemon", line)
	}
	// Removing the inherited socket's file ends the daemon too.
	os.Remove(sock)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ws unix.WaitStatus
		if got, _ := unix.Wait4(pid, &ws, unix.WNOHANG, nil); got == pid {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("daemon still running 5s after its inherited socket file was removed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat("/sys/class/net/" + name); err == nil {
		t.Errorf("interface %s survived its daemon", name)
	}
}

// dupFD returns a blocking duplicate of f's descriptor without switching f
// itself to blocking mode.
func dupFD(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	var derr error
	rc.Control(func(u uintptr) { fd, derr = unix.FcntlInt(u, unix.F_DUPFD_CLOEXEC, 3) })
	if derr != nil {
		t.Fatal(derr)
	}
	return fd
}

// TestForegroundFromEnvironment runs the daemon command with
// WG_PROCESS_FOREGROUND=1: it must not detach (the command keeps running
// and serving) and must end cleanly on SIGTERM.
func TestForegroundFromEnvironment(t *testing.T) {
	needRoot(t)
	dir := withSocketDir(t)
	name := uniqueIf()
	self, _ := os.Executable()
	cmd := exec.Command(self, name)
	cmd.Env = append(os.Environ(), envTestChild+"="+dir, EnvForeground+"=1", EnvLogLevel+"=verbose")
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.Dial("unix", uapi.SocketPath(name))
		if err == nil {
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if line != fmt.Sprintf("fake=%d\n", cmd.Process.Pid) {
				t.Fatalf("socket answered %q, not by the foreground process %d", line, cmd.Process.Pid)
			}
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("foreground daemon exited: %v\n%s", err, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("socket not up after 5s\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("foreground daemon ignored SIGTERM")
	}
	if !strings.Contains(logs.String(), "daemon ready") {
		t.Errorf("LOG_LEVEL=verbose logged no readiness line:\n%s", logs.String())
	}
	if _, err := os.Stat(uapi.SocketPath(name)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}
