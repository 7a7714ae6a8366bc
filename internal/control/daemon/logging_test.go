package daemon

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// withSyslog points syslogSocket at a datagram socket in a temporary
// directory and returns it (closed at the end of the test).
func withSyslog(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "log")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	old := syslogSocket
	syslogSocket = path
	t.Cleanup(func() { syslogSocket = old })
	return c
}

// stderrJournalStream returns the JOURNAL_STREAM value that names this
// process's standard error.
func stderrJournalStream(t *testing.T) string {
	var st unix.Stat_t
	if err := unix.Fstat(2, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

func TestDetachedLogTargetChoice(t *testing.T) {
	old := syslogSocket
	syslogSocket = filepath.Join(t.TempDir(), "no-syslog-here")
	t.Cleanup(func() { syslogSocket = old })
	t.Setenv("JOURNAL_STREAM", "")
	base := Config{Interface: "wg7"}
	fallback := "file:" + filepath.Join(FallbackLogDir, "wg7.log")
	if got := detachedLogTarget(&base).String(); got != fallback {
		t.Errorf("no journal, no syslog: %s, want %s", got, fallback)
	}
	withSyslog(t)
	if got := detachedLogTarget(&base).String(); got != "syslog" {
		t.Errorf("with a syslog socket: %s, want syslog", got)
	}
	set := base
	set.logLevelSet = true
	if got := detachedLogTarget(&set).String(); got != "stderr" {
		t.Errorf("LOG_LEVEL given: %s, want stderr (as wireguard-go)", got)
	}
	t.Setenv("JOURNAL_STREAM", "1:2") // someone else's stream
	if got := detachedLogTarget(&base).String(); got != "syslog" {
		t.Errorf("JOURNAL_STREAM of another stream: %s, want syslog", got)
	}
	t.Setenv("JOURNAL_STREAM", stderrJournalStream(t))
	if got := detachedLogTarget(&set).String(); got != "journal" {
		t.Errorf("standard error is the journal: %s, want journal", got)
	}
	file := base
	file.LogFile = "/tmp/x.log"
	if got := detachedLogTarget(&file).String(); got != "file:/tmp/x.log" {
		t.Errorf("--log-file: %s", got)
	}
	silent := file
	silent.LogLevel = LogSilent
	if got := detachedLogTarget(&silent).String(); got != "none" {
		t.Errorf("LOG_LEVEL=silent: %s, want none", got)
	}
	if got := foregroundLogTarget(&base).String(); got != "journal" {
		t.Errorf("foreground under the journal: %s", got)
	}
	t.Setenv("JOURNAL_STREAM", "")
	if got := foregroundLogTarget(&base).String(); got != "stderr" {
		t.Errorf("foreground: %s, want stderr", got)
	}
}

func TestJournalDescriptionNamesTheUnit(t *testing.T) {
	f := filepath.Join(t.TempDir(), "cgroup")
	old := cgroupFile
	cgroupFile = f
	t.Cleanup(func() { cgroupFile = old })
	os.WriteFile(f, []byte("0::/system.slice/system-wirelane.slice/wirelane@wg0.service\n"), 0o644)
	if got := (logTarget{kind: "journal"}).describe("wirelane", 42); got != "the journal (journalctl -u wirelane@wg0.service)" {
		t.Errorf("in a unit: %q", got)
	}
	os.WriteFile(f, []byte("4:memory:/x\n1:name=systemd:/system.slice/wirelane-ovpn@a.service\n0::/\n"), 0o644)
	if got := (logTarget{kind: "journal"}).describe("wirelane", 42); got != "the journal (journalctl -u wirelane-ovpn@a.service)" {
		t.Errorf("cgroup v1: %q", got)
	}
	os.WriteFile(f, []byte("0::/user.slice/user-0.slice/session-3.scope\n"), 0o644)
	if got := (logTarget{kind: "journal"}).describe("wirelane", 42); got != "the journal (journalctl _PID=42)" {
		t.Errorf("outside a unit: %q", got)
	}
}

func TestParseLogTarget(t *testing.T) {
	for _, s := range []string{"journal", "syslog", "stderr", "none", "file:/var/log/x.log"} {
		got, err := parseLogTarget(s)
		if err != nil || got.String() != s {
			t.Errorf("parseLogTarget(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "file:", "file:relative.log", "console"} {
		if _, err := parseLogTarget(s); err == nil {
			t.Errorf("parseLogTarget(%q) accepted", s)
		}
	}
}

func TestJournalLinesCarryTheirLevel(t *testing.T) {
	var lines []string
	h := newLevelHandler(&slog.HandlerOptions{Level: slog.LevelDebug}, func(l slog.Level, line []byte) {
		lines = append(lines, fmt.Sprintf("<%d>%s", journalPriority(l), line))
	})
	log := slog.New(h).With("interface", "wg0")
	log.Error("stopping", "err", "boom")
	log.Warn("odd")
	log.Info("daemon ready")
	log.Debug("detail")
	want := []string{
		"<3>level=ERROR msg=stopping interface=wg0 err=boom\n",
		"<4>level=WARN msg=odd interface=wg0\n",
		"<6>level=INFO msg=\"daemon ready\" interface=wg0\n",
		"<7>level=DEBUG msg=detail interface=wg0\n",
	}
	if strings.Join(lines, "") != strings.Join(want, "") {
		t.Errorf("journal lines:\n%s\nwant:\n%s", strings.Join(lines, ""), strings.Join(want, ""))
	}
}

func TestSyslogGetsLevels(t *testing.T) {
	srv := withSyslog(t)
	cfg := Config{Interface: "wg0"}
	log, closer, err := openLog(logTarget{kind: "syslog"}, &cfg, "wirelaned")
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	log.Info("daemon ready")
	log.Error("stopping: UAPI listener failed")
	log.Debug("not at the default level")
	buf := make([]byte, 2048)
	var got []string
	for i := 0; i < 2; i++ {
		srv.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := srv.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(buf[:n]))
	}
	// daemon facility (3 << 3) + info (6) = 30; + err (3) = 27.
	if !strings.HasPrefix(got[0], "<30>") || !strings.Contains(got[0], "wirelaned[") || !strings.Contains(got[0], "daemon ready") {
		t.Errorf("info line %q", got[0])
	}
	if !strings.HasPrefix(got[1], "<27>") || !strings.Contains(got[1], "UAPI listener failed") {
		t.Errorf("error line %q", got[1])
	}
}

// TestDetachedDaemonLogsToFileAndSaysSo runs a daemon detached with
// --log-file: the parent names the file on its standard error, and the
// file gets the daemon's start and stop lines.
func TestDetachedDaemonLogsToFileAndSaysSo(t *testing.T) {
	needRoot(t)
	dir := withSocketDir(t)
	name := uniqueIf()
	logFile := filepath.Join(t.TempDir(), "d.log")
	self, _ := os.Executable()
	cmd := exec.Command(self, "--log-file", logFile, name)
	cmd.Env = append(os.Environ(), envTestChild+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("daemon: %v\n%s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })
	if !strings.Contains(string(out), "logs to "+logFile) {
		t.Errorf("parent did not say where the log goes: %q", out)
	}
	if err := exec.Command("ip", "link", "del", name).Run(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		data, _ := os.ReadFile(logFile)
		if strings.Contains(string(data), "stopping") {
			if !strings.Contains(string(data), `msg="daemon ready"`) || !strings.Contains(string(data), "level=INFO") {
				t.Errorf("log file lacks the start line:\n%s", data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stop line in the log file 5s after the interface was deleted:\n%s", data)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDetachedDaemonLogsToSyslog runs a daemon detached with a syslog
// socket and no journal: its lines arrive there with the program's tag.
func TestDetachedDaemonLogsToSyslog(t *testing.T) {
	needRoot(t)
	dir := withSocketDir(t)
	srv := withSyslog(t)
	name := uniqueIf()
	self, _ := os.Executable()
	t.Setenv("JOURNAL_STREAM", "")
	t.Setenv(envTestChild, dir)
	t.Setenv("WIRELANE_TEST_SYSLOG", syslogSocket)
	// The child finds the socket through the same variable.
	var says strings.Builder
	old := os.Stderr
	r, w, _ := os.Pipe()
	os.Stderr = w
	err := Run(context.Background(), Config{Interface: name, ReexecArgs: []string{self, name}})
	os.Stderr = old
	w.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		says.WriteString(sc.Text())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })
	if !strings.Contains(says.String(), "logs to syslog as") {
		t.Errorf("parent said %q, want the syslog line", says.String())
	}
	// The data-path plan comes first (an Info line too), then the
	// ready line.
	buf := make([]byte, 2048)
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	var got []string
	for len(got) < 5 {
		n, err := srv.Read(buf)
		if err != nil {
			t.Fatalf("no ready line reached syslog (%v); it got %q", err, got)
		}
		line := string(buf[:n])
		if !strings.HasPrefix(line, "<30>") {
			t.Errorf("syslog got %q", line)
		}
		if strings.Contains(line, "daemon ready") {
			return
		}
		got = append(got, line)
	}
	t.Errorf("syslog got %q, no ready line", got)
}

func FuzzParseLogTarget(f *testing.F) {
	for _, s := range []string{"journal", "syslog", "stderr", "none", "file:/var/log/x.log", "file:", "file:rel", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseLogTarget(s)
		if err != nil {
			return
		}
		// Whatever is accepted goes back to the same text.
		if got.String() != s {
			t.Errorf("parseLogTarget(%q) = %q", s, got.String())
		}
	})
}

// TestDetachedDaemonUnderTheJournal starts a daemon whose standard error
// is the stream JOURNAL_STREAM names, as systemd sets it up: the detached
// copy keeps that stream and writes its lines with journal priorities.
func TestDetachedDaemonUnderTheJournal(t *testing.T) {
	needRoot(t)
	dir := withSocketDir(t)
	name := uniqueIf()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(w.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, name)
	cmd.Env = append(os.Environ(), envTestChild+"="+dir, fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
	cmd.Stderr = w
	err = cmd.Run()
	w.Close()
	if err != nil {
		t.Fatalf("daemon: %v", err)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var said, ready bool
	timeout := time.After(5 * time.Second)
	for !said || !ready {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("stream closed; parent's line seen %v, daemon's start line seen %v", said, ready)
			}
			said = said || strings.Contains(l, "logs to the journal")
			ready = ready || strings.HasPrefix(l, `<6>level=INFO msg="daemon ready"`)
		case <-timeout:
			t.Fatalf("after 5s: parent's line seen %v, daemon's <6> start line seen %v", said, ready)
		}
	}
	// The journal stamps its own time: the lines carry none.
	exec.Command("ip", "link", "del", name).Run()
	timeout = time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return // the daemon ended and closed the stream
			}
			if strings.Contains(l, "time=") {
				t.Errorf("journal line with a time stamp: %q", l)
			}
		case <-timeout:
			t.Fatal("the daemon kept the stream open 5s after its interface was deleted")
		}
	}
}
