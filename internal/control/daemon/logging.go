package daemon

// Where the daemon's log goes. A daemon in the foreground writes to its
// standard error, as it always did; a detached one has no terminal, so the
// parent picks a place people look and tells the child (EnvLogTarget):
//
//	--log-file PATH given             -> PATH (appended to)
//	standard error is the journal     -> the journal: the child keeps that
//	  (JOURNAL_STREAM, under systemd)    stream, lines carry "<N>" levels
//	LOG_LEVEL set explicitly          -> the parent's standard error, as
//	                                     wireguard-go does
//	a syslog socket (/dev/log)        -> syslog, tag = the program name
//	none of these                     -> /var/log/wirelane/IFNAME.log
//
// The parent prints the choice once the child is ready, so `wirelane up`
// and wg-quick show where the log is. Without LOG_LEVEL the journal,
// syslog and files get info lines (start, stop and why) and errors;
// standard error gets errors only.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"log/syslog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// EnvLogTarget tells the re-executed child where to log: "journal",
// "syslog", "stderr", "none" or "file:PATH".
const EnvLogTarget = "WIRELANE_LOG_TARGET"

// FallbackLogDir holds IFNAME.log for a detached daemon that has neither
// a journal nor a syslog socket nor --log-file.
var FallbackLogDir = "/var/log/wirelane"

// logTarget is where the log goes.
type logTarget struct {
	kind string // "stderr", "journal", "syslog", "file" or "none"
	path string // for "file"
}

func (t logTarget) String() string {
	if t.kind == "file" {
		return "file:" + t.path
	}
	return t.kind
}

// parseLogTarget parses an EnvLogTarget value.
func parseLogTarget(s string) (logTarget, error) {
	if p, ok := strings.CutPrefix(s, "file:"); ok && filepath.IsAbs(p) {
		return logTarget{kind: "file", path: p}, nil
	}
	switch s {
	case "stderr", "journal", "syslog", "none":
		return logTarget{kind: s}, nil
	}
	return logTarget{}, fmt.Errorf("%s=%q: want journal, syslog, stderr, none or file:/ABSOLUTE/PATH", EnvLogTarget, s)
}

// describe says where the log of the daemon with process id pid is, for
// people: the line the parent prints.
func (t logTarget) describe(prog string, pid int) string {
	switch t.kind {
	case "journal":
		if unit := systemdUnit(); unit != "" {
			return fmt.Sprintf("the journal (journalctl -u %s)", unit)
		}
		return fmt.Sprintf("the journal (journalctl _PID=%d)", pid)
	case "syslog":
		return fmt.Sprintf("syslog as %s[%d] (journalctl -t %s, or /var/log/syslog)", prog, pid, prog)
	case "file":
		return t.path
	case "none":
		return "nowhere (LOG_LEVEL=silent)"
	}
	return "standard error"
}

// cgroupFile is where the process's cgroup is read; a variable for tests.
var cgroupFile = "/proc/self/cgroup"

// systemdUnit returns the service unit this process runs in
// ("wirelane@wg0.service"), from the last component of its cgroup path
// (the unified hierarchy's, or systemd's own under cgroup v1), or "" when
// it is not in one.
func systemdUnit() string {
	data, err := os.ReadFile(cgroupFile)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		_, path, ok := strings.Cut(line, "::")
		if !ok {
			_, path, ok = strings.Cut(line, ":name=systemd:")
		}
		if !ok {
			continue
		}
		if unit := filepath.Base(path); strings.HasSuffix(unit, ".service") {
			return unit
		}
	}
	return ""
}

// journalStream reports whether f is the stream systemd connected to the
// journal (JOURNAL_STREAM=DEVICE:INODE names it, see systemd.exec(5)).
func journalStream(f *os.File) bool {
	v := os.Getenv("JOURNAL_STREAM")
	if v == "" {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return false
	}
	return v == fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// syslogSocket is the local syslog socket; a variable for tests.
var syslogSocket = "/dev/log"

// detachedLogTarget picks the log of a daemon about to detach.
func detachedLogTarget(cfg *Config) logTarget {
	switch {
	case cfg.LogLevel == LogSilent:
		return logTarget{kind: "none"}
	case cfg.LogFile != "":
		// The child runs in "/": a relative name would move.
		p, err := filepath.Abs(cfg.LogFile)
		if err != nil {
			p = cfg.LogFile
		}
		return logTarget{kind: "file", path: p}
	case journalStream(os.Stderr):
		return logTarget{kind: "journal"}
	case cfg.logLevelSet:
		return logTarget{kind: "stderr"}
	}
	if fi, err := os.Stat(syslogSocket); err == nil && fi.Mode()&os.ModeSocket != 0 {
		return logTarget{kind: "syslog"}
	}
	return logTarget{kind: "file", path: filepath.Join(FallbackLogDir, cfg.Interface+".log")}
}

// foregroundLogTarget picks the log of a daemon that stays in the
// foreground (not a re-executed child).
func foregroundLogTarget(cfg *Config) logTarget {
	switch {
	case cfg.LogLevel == LogSilent:
		return logTarget{kind: "none"}
	case cfg.LogFile != "":
		return logTarget{kind: "file", path: cfg.LogFile}
	case journalStream(os.Stderr):
		return logTarget{kind: "journal"}
	}
	return logTarget{kind: "stderr"}
}

// openLog builds the logger for t at the configured level. tag names the
// program in syslog. The returned closer flushes and closes what was
// opened.
func openLog(t logTarget, cfg *Config, tag string) (*slog.Logger, io.Closer, error) {
	lvl := slog.LevelError
	switch cfg.LogLevel {
	case LogSilent:
		return slog.New(slog.DiscardHandler), io.NopCloser(nil), nil
	case LogVerbose:
		lvl = slog.LevelDebug
	case LogInfo:
		lvl = slog.LevelInfo
	default:
		if !cfg.logLevelSet && t.kind != "stderr" {
			lvl = slog.LevelInfo // the journal and files want start and stop
		}
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch t.kind {
	case "none":
		return slog.New(slog.DiscardHandler), io.NopCloser(nil), nil
	case "journal":
		return slog.New(newLevelHandler(opts, func(l slog.Level, line []byte) {
			os.Stderr.Write(append([]byte(fmt.Sprintf("<%d>", journalPriority(l))), line...))
		})), io.NopCloser(nil), nil
	case "syslog":
		w, err := syslog.Dial("unixgram", syslogSocket, syslog.LOG_DAEMON|syslog.LOG_INFO, tag)
		if err != nil {
			w, err = syslog.Dial("unix", syslogSocket, syslog.LOG_DAEMON|syslog.LOG_INFO, tag)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("syslog: %w", err)
		}
		return slog.New(newLevelHandler(opts, func(l slog.Level, line []byte) {
			msg := strings.TrimSuffix(string(line), "\n")
			switch {
			case l >= slog.LevelError:
				w.Err(msg)
			case l >= slog.LevelWarn:
				w.Warning(msg)
			case l >= slog.LevelInfo:
				w.Info(msg)
			default:
				w.Debug(msg)
			}
		})), w, nil
	case "file":
		if err := os.MkdirAll(filepath.Dir(t.path), 0o750); err != nil {
			return nil, nil, fmt.Errorf("log file: %w", err)
		}
		f, err := os.OpenFile(t.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return nil, nil, fmt.Errorf("log file: %w", err)
		}
		return slog.New(slog.NewTextHandler(f, opts)), f, nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts)), io.NopCloser(nil), nil
}

// journalPriority maps a level to syslog(3) priorities as the journal reads
// them from a "<N>" prefix: err 3, warning 4, info 6, debug 7.
func journalPriority(l slog.Level) int {
	switch {
	case l >= slog.LevelError:
		return 3
	case l >= slog.LevelWarn:
		return 4
	case l >= slog.LevelInfo:
		return 6
	}
	return 7
}

// levelHandler formats records as slog's text lines without the time (the
// journal and syslog stamp their own) and hands each line, with its level,
// to emit.
type levelHandler struct {
	out   *levelOut
	inner slog.Handler // writes into out.buf
}

// levelOut is shared by a handler and those derived from it with
// WithAttrs and WithGroup.
type levelOut struct {
	mu   sync.Mutex   // guards buf and serialises emit
	buf  bytes.Buffer // the record being formatted; guarded by mu
	emit func(slog.Level, []byte)
}

func newLevelHandler(opts *slog.HandlerOptions, emit func(slog.Level, []byte)) *levelHandler {
	out := &levelOut{emit: emit}
	o := *opts
	o.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	return &levelHandler{out: out, inner: slog.NewTextHandler(&out.buf, &o)}
}

func (h *levelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, l)
}

func (h *levelHandler) Handle(ctx context.Context, r slog.Record) error {
	h.out.mu.Lock()
	defer h.out.mu.Unlock()
	h.out.buf.Reset()
	if err := h.inner.Handle(ctx, r); err != nil {
		return err
	}
	h.out.emit(r.Level, h.out.buf.Bytes())
	return nil
}

func (h *levelHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &levelHandler{out: h.out, inner: h.inner.WithAttrs(as)}
}

func (h *levelHandler) WithGroup(name string) slog.Handler {
	return &levelHandler{out: h.out, inner: h.inner.WithGroup(name)}
}
