package daemon

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/crypto/chachapoly"
	"github.com/wirelane/wirelane/internal/sys/procs"
)

// Environment variables of the userspace-implementation contract, plus the
// ones the daemon uses to hand its configuration to the re-executed child.
const (
	EnvTunFD      = "WG_TUN_FD"             // inherited TUN descriptor
	EnvUAPIFD     = "WG_UAPI_FD"            // inherited listening UAPI socket
	EnvForeground = "WG_PROCESS_FOREGROUND" // "1" = do not daemonize
	EnvLogLevel   = "LOG_LEVEL"             // verbose, info, error or silent
	// EnvReadyFD names the descriptor a re-executed child reports its
	// readiness on. Its presence marks the process as that child.
	EnvReadyFD = "WIRELANE_READY_FD"
)

// DefaultMTU is the MTU a newly created interface starts with (wg-quick and
// `ip link set mtu` usually change it right after).
const DefaultMTU = 1420

// LogLevel selects what the daemon logs.
type LogLevel int

// Log levels, from the LOG_LEVEL environment variable.
const (
	LogError   LogLevel = iota // errors only (the default)
	LogVerbose                 // everything, including per-event debug lines
	LogSilent                  // nothing
	LogInfo                    // start, stop and why, and errors
)

// ParseLogLevel parses a LOG_LEVEL value: "verbose" (or "debug"), "info",
// "error" or "silent"; the empty string means LogError (and a detached
// daemon's journal, syslog or file then gets info lines too: logging.go).
func ParseLogLevel(s string) (LogLevel, error) {
	switch strings.ToLower(s) {
	case "", "error":
		return LogError, nil
	case "verbose", "debug":
		return LogVerbose, nil
	case "silent":
		return LogSilent, nil
	case "info":
		return LogInfo, nil
	}
	return LogError, fmt.Errorf("%s=%q: want verbose, info, error or silent", EnvLogLevel, s)
}

// String returns the LOG_LEVEL spelling of l ("verbose", "error" or
// "silent"), which ParseLogLevel accepts.
func (l LogLevel) String() string {
	switch l {
	case LogVerbose:
		return "verbose"
	case LogSilent:
		return "silent"
	case LogInfo:
		return "info"
	}
	return "error"
}

// Config describes one daemon.
type Config struct {
	// Interface is the TUN interface (and UAPI socket) name. With TunFD
	// set, the name the descriptor's interface really has wins.
	Interface string
	// Foreground keeps Run in the calling process until the daemon ends;
	// otherwise Run starts a detached copy of the program and returns once
	// that copy is ready.
	Foreground bool
	// LogLevel selects what is logged.
	LogLevel LogLevel
	// LogFile, when set, is the file (an absolute path) the daemon appends
	// its log to; otherwise logging.go picks the journal, syslog or
	// standard error.
	LogFile string
	// TunFD is an inherited, already created TUN descriptor; 0 = create
	// the interface. A foreground daemon takes the descriptor over; the
	// detaching path passes a duplicate and leaves it to the caller.
	TunFD int
	// UAPIFD is an inherited listening UAPI socket; 0 = create
	// /var/run/wireguard/NAME.sock. Owned like TunFD.
	UAPIFD int
	// ReexecArgs is the argument vector (program name first) the detached
	// copy is started with; it must lead that copy back into Main with
	// the same interface name. Nil means os.Args. The executable is always
	// /proc/self/exe.
	ReexecArgs []string
	// Ready, when set, is called once the interface and the socket exist
	// and the device is up (in the foreground, by the daemon itself;
	// otherwise once the detached copy has reported so); a caller may then
	// configure the interface or move it into another network namespace
	// at once.
	Ready func()
	// Logger overrides the logger built from LogLevel (used by tests).
	Logger *slog.Logger

	logLevelSet bool       // LOG_LEVEL was given
	logTarget   *logTarget // the re-executed child's log, from EnvLogTarget
}

func (c *Config) validate() error {
	if c.TunFD == 0 {
		if c.Interface == "" || len(c.Interface) >= unix.IFNAMSIZ || strings.ContainsAny(c.Interface, "/ \t\n") {
			return fmt.Errorf("interface name %q: must be 1 to %d bytes without '/' or spaces", c.Interface, unix.IFNAMSIZ-1)
		}
	}
	for _, fd := range []struct {
		env string
		fd  int
	}{{EnvTunFD, c.TunFD}, {EnvUAPIFD, c.UAPIFD}} {
		if fd.fd != 0 && fd.fd < 3 {
			return fmt.Errorf("%s=%d: standard streams cannot be used", fd.env, fd.fd)
		}
		if fd.fd != 0 {
			if _, err := unix.FcntlInt(uintptr(fd.fd), unix.F_GETFD, 0); err != nil {
				return fmt.Errorf("%s=%d: not an open descriptor: %w", fd.env, fd.fd, err)
			}
		}
	}
	return nil
}

// applyEnv fills the parts of c that the environment controls.
func (c *Config) applyEnv() error {
	if os.Getenv(EnvForeground) == "1" {
		c.Foreground = true
	}
	if err := chachapoly.EnvError(); err != nil {
		return err
	}
	if err := procs.EnvError(); err != nil {
		return err
	}
	lvl, err := ParseLogLevel(os.Getenv(EnvLogLevel))
	if err != nil {
		return err
	}
	c.LogLevel = lvl
	c.logLevelSet = os.Getenv(EnvLogLevel) != ""
	if v, ok := os.LookupEnv(EnvLogTarget); ok {
		os.Unsetenv(EnvLogTarget)
		t, err := parseLogTarget(v)
		if err != nil {
			return err
		}
		c.logTarget = &t
	}
	if c.TunFD, err = envFD(EnvTunFD); err != nil {
		return err
	}
	if c.UAPIFD, err = envFD(EnvUAPIFD); err != nil {
		return err
	}
	return nil
}

// envFD reads a descriptor number from the environment variable name;
// unset or empty means 0 (none).
func envFD(name string) (int, error) { return parseFD(name, os.Getenv(name)) }

// parseFD parses the value s of the variable name: empty (none, 0) or a
// decimal descriptor number of 3 or more.
func parseFD(name, s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	fd, err := strconv.ParseUint(s, 10, 31)
	if err != nil || fd < 3 {
		return 0, fmt.Errorf("%s=%q: want a file descriptor number of 3 or more", name, s)
	}
	return int(fd), nil
}

// logger builds the daemon's logger (logging.go): the re-executed child's
// target as its parent chose it, or the foreground daemon's own. When the
// target cannot be opened (syslog went away), the fallback file is tried
// before giving up.
func (c *Config) logger() (*slog.Logger, io.Closer, error) {
	if c.Logger != nil {
		return c.Logger, io.NopCloser(nil), nil
	}
	t := foregroundLogTarget(c)
	if c.logTarget != nil {
		t = *c.logTarget
	}
	tag := filepath.Base(os.Args[0])
	log, closer, err := openLog(t, c, tag)
	if err != nil && t.kind != "file" {
		fb := logTarget{kind: "file", path: filepath.Join(FallbackLogDir, c.Interface+".log")}
		var ferr error
		if log, closer, ferr = openLog(fb, c, tag); ferr == nil {
			log.Warn("log target unavailable; logging to this file", "target", t.String(), "err", err)
			return log, closer, nil
		}
	}
	return log, closer, err
}
