// Package daemon is Wirelane's userspace WireGuard daemon: the program
// wg-quick runs as WG_QUICK_USERSPACE_IMPLEMENTATION. It creates the TUN
// interface and the UAPI socket /var/run/wireguard/NAME.sock, detaches
// into the background once both are ready, and exits when the interface is
// deleted, when the socket file is removed, or on SIGTERM/SIGINT.
//
// Main is the whole command line, shared by the wirelaned binary and the
// hidden `wirelane daemon` subcommand; Run is the same daemon for programs
// that build a Config themselves.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/wirelane/wirelane/internal/sys/buildinfo"
	"github.com/wirelane/wirelane/internal/sys/procs"
)

// VersionString returns the version reported by --version: the module
// version and VCS revision (internal/sys/buildinfo).
func VersionString() string { return buildinfo.String() }

// Usage is the help text; %[1]s is the program name.
const Usage = `Usage: %[1]s [-f|--foreground] [--log-file PATH] INTERFACE-NAME
       %[1]s --version | --help

Runs a Wirelane WireGuard device on the TUN interface INTERFACE-NAME,
configured through /var/run/wireguard/INTERFACE-NAME.sock (use wg(8) or
wirelane). Without --foreground it returns once the interface and the socket
are ready and keeps running in the background. It exits when the interface
is deleted, when the socket file is removed, or on SIGTERM/SIGINT.

  -f, --foreground  stay in the foreground (also WG_PROCESS_FOREGROUND=1)
      --log-file PATH
                    append the log to PATH; otherwise a detached daemon logs
                    to the journal under systemd, else to syslog, and says so

Environment: LOG_LEVEL=verbose|info|error|silent, WG_TUN_FD, WG_UAPI_FD,
WG_PROCESS_FOREGROUND, WIRELANE_AEAD=auto|generic, GOMAXPROCS (default:
the model's share of the CPUs, 1 of 2, 2 of 4, 7 of 16), WIRELANE_INLINE_CRYPTO
(largest batch sealed without the crypto workers, 0-128; default from the
model). LOG_LEVEL=info logs the values chosen.
`

// Main runs the daemon command line. args are the arguments after the
// program (or subcommand) name, for example os.Args[1:] in wirelaned and
// os.Args[2:] in `wirelane daemon`. The detached copy is started as
// /proc/self/exe with this process's os.Args, so the program must route
// that argument vector back into Main. Main returns the exit status.
//
// Main also sets how many threads run Go code (internal/sys/procs, whose
// model also gives the device's crypto workers and inline-crypto
// threshold): one on a host that gives the process two CPUs, unless
// GOMAXPROCS is set.
func Main(args []string) int {
	procs.Apply()
	return mainIO(progName(args), args, os.Stdout, os.Stderr)
}

// progName names the command in messages: the program's base name and any
// subcommand words before args ("wirelane daemon").
func progName(args []string) string {
	words := []string{"wirelaned"}
	if len(os.Args) > 0 && len(os.Args) >= len(args) {
		words = append([]string{filepath.Base(os.Args[0])}, os.Args[1:len(os.Args)-len(args)]...)
	}
	return strings.Join(words, " ")
}

func mainIO(prog string, args []string, stdout, stderr io.Writer) int {
	cfg, action, err := parseArgs(args)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		fmt.Fprintf(stderr, Usage, prog)
		return 2
	case action == "help":
		fmt.Fprintf(stdout, Usage, prog)
		return 0
	case action == "version":
		fmt.Fprintf(stdout, "%s %s\n", prog, VersionString())
		return 0
	}

	rep, err := childReporter()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	// The environment only adds to the flags (WG_PROCESS_FOREGROUND=1
	// cannot undo -f).
	if err := cfg.applyEnv(); err != nil {
		rep.fail(err)
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	if rep != nil {
		// The re-executed child: do the work here, report to the parent.
		cfg.Foreground = true
		cfg.Ready = rep.ok
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	// A detached daemon has no terminal; a hang-up must not kill it.
	signal.Ignore(syscall.SIGHUP)

	if err := Run(ctx, cfg); err != nil {
		rep.fail(err)
		fmt.Fprintf(stderr, "%s: %s: %v\n", prog, cfg.Interface, err)
		return 1
	}
	rep.fail(errors.New("daemon ended before it was ready"))
	return 0
}

// parseArgs parses the command line; action is "", "help" or "version".
func parseArgs(args []string) (cfg Config, action string, err error) {
	skip := false
	for i, a := range args {
		if skip {
			skip = false
			continue
		}
		if v, ok := strings.CutPrefix(a, "--log-file="); ok {
			if v == "" {
				return cfg, "", fmt.Errorf("--log-file needs a file name (argument %d)", i+1)
			}
			if cfg.LogFile, err = filepath.Abs(v); err != nil {
				return cfg, "", fmt.Errorf("--log-file: %w", err)
			}
			continue
		}
		switch a {
		case "-h", "--help":
			return cfg, "help", nil
		case "--version", "version":
			return cfg, "version", nil
		case "-f", "--foreground":
			cfg.Foreground = true
		case "--log-file":
			if i+1 >= len(args) || args[i+1] == "" {
				return cfg, "", fmt.Errorf("--log-file needs a file name (argument %d)", i+1)
			}
			skip = true
			if cfg.LogFile, err = filepath.Abs(args[i+1]); err != nil {
				return cfg, "", fmt.Errorf("--log-file: %w", err)
			}
		case "--":
			rest := args[i+1:]
			if cfg.Interface != "" || len(rest) != 1 {
				return cfg, "", errors.New("exactly one interface name expected")
			}
			if rest[0] == "" {
				return cfg, "", fmt.Errorf("empty interface name (argument %d)", i+2)
			}
			cfg.Interface = rest[0]
			return cfg, "", nil
		default:
			if len(a) > 1 && a[0] == '-' {
				return cfg, "", fmt.Errorf("unknown option %q (argument %d)", a, i+1)
			}
			if cfg.Interface != "" {
				return cfg, "", fmt.Errorf("unexpected argument %q after interface name %q", a, cfg.Interface)
			}
			if a == "" {
				return cfg, "", fmt.Errorf("empty interface name (argument %d)", i+1)
			}
			cfg.Interface = a
		}
	}
	if cfg.Interface == "" {
		return cfg, "", errors.New("missing interface name")
	}
	return cfg, "", nil
}
