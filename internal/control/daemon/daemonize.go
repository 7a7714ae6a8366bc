package daemon

// Daemonizing with a readiness report.
//
//	parent (Run, Foreground false)          child (/proc/self/exe, same argv)
//	------                                  -----
//	pipe(); start child with the write  --> Main sees WIRELANE_READY_FD,
//	end as fd 3, env WG_PROCESS_            runs in the foreground:
//	FOREGROUND=1, new session               create TUN, socket, device
//	read the pipe                       <-- "ok\n" once everything is up
//	                                        (or "error: ...\n" and exit 1)
//	return nil (exit 0) / the error
//
// The parent returns only after the child has finished its setup, so a
// caller such as wg-quick can configure the interface, or move it into
// another network namespace, the moment the command returns. A child that
// dies without a word is reported with its exit status.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// readyTimeout bounds how long the parent waits for the child's report.
const readyTimeout = 30 * time.Second

// Readiness messages on the pipe.
const (
	readyOK    = "ok"
	readyError = "error: "
)

// daemonize starts the detached child and waits for its report.
func daemonize(ctx context.Context, cfg *Config) error {
	args := cfg.ReexecArgs
	if args == nil {
		args = os.Args
	}
	if len(args) == 0 {
		return errors.New("daemonize: empty argument vector")
	}
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("daemonize: %w", err)
	}
	defer r.Close()

	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return fmt.Errorf("daemonize: %w", err)
	}
	defer devnull.Close()

	// Descriptors the child inherits: 0-2, then the readiness pipe, then
	// any TUN and UAPI descriptors we were given, renumbered.
	files := []*os.File{devnull, devnull, devnull, w}
	logTo := detachedLogTarget(cfg)
	switch logTo.kind {
	case "stderr":
		// Asked for logs explicitly: keep them visible, as the
		// reference daemon does.
		files[1], files[2] = os.Stdout, os.Stderr
	case "journal":
		files[2] = os.Stderr // the journal's stream, kept by the child
	}
	env := filterEnv(os.Environ(), EnvReadyFD, EnvForeground, EnvTunFD, EnvUAPIFD, EnvLogLevel, EnvLogTarget)
	env = append(env, EnvReadyFD+"=3", EnvForeground+"=1", EnvLogTarget+"="+logTo.String())
	if cfg.logLevelSet {
		env = append(env, EnvLogLevel+"="+cfg.LogLevel.String())
	}
	for _, in := range []struct {
		env string
		fd  int
	}{{EnvTunFD, cfg.TunFD}, {EnvUAPIFD, cfg.UAPIFD}} {
		if in.fd == 0 {
			continue
		}
		// Pass a duplicate: the caller keeps its own descriptor.
		dup, err := unix.FcntlInt(uintptr(in.fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			w.Close()
			closeFrom(files, 4)
			return fmt.Errorf("daemonize: %s=%d: %w", in.env, in.fd, err)
		}
		env = append(env, in.env+"="+strconv.Itoa(len(files)))
		files = append(files, os.NewFile(uintptr(dup), in.env))
	}
	defer closeFrom(files, 4)

	proc, err := os.StartProcess("/proc/self/exe", args, &os.ProcAttr{
		Dir:   "/",
		Env:   env,
		Files: files,
		Sys:   &syscall.SysProcAttr{Setsid: true},
	})
	w.Close()
	if err != nil {
		return fmt.Errorf("daemonize: start %s: %w", args[0], err)
	}

	type report struct {
		line string
		err  error
	}
	got := make(chan report, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		got <- report{strings.TrimSuffix(line, "\n"), err}
	}()

	var rep report
	select {
	case rep = <-got:
	case <-ctx.Done():
		proc.Kill()
		proc.Wait()
		return fmt.Errorf("daemonize: interrupted while waiting for the daemon: %w", ctx.Err())
	case <-time.After(readyTimeout):
		proc.Kill()
		proc.Wait()
		return fmt.Errorf("daemonize: daemon not ready after %v; killed it", readyTimeout)
	}
	switch {
	case rep.line == readyOK:
		// The child lives on in its own session; nothing to wait for.
		// Say where its log is: nobody will see its standard error.
		if logTo.kind != "stderr" && logTo.kind != "none" {
			prog := filepath.Base(args[0])
			fmt.Fprintf(os.Stderr, "%s: %s: daemon (pid %d) logs to %s\n", prog, cfg.Interface, proc.Pid, logTo.describe(prog, proc.Pid))
		}
		proc.Release()
		if cfg.Ready != nil {
			cfg.Ready()
		}
		return nil
	case strings.HasPrefix(rep.line, readyError):
		proc.Wait()
		return errors.New(strings.TrimPrefix(rep.line, readyError))
	}
	st, werr := proc.Wait()
	if werr != nil {
		return fmt.Errorf("daemonize: daemon exited before it was ready: %v", werr)
	}
	return fmt.Errorf("daemonize: daemon exited before it was ready (%v)", st)
}

// closeFrom closes files[from:], the duplicates made for the child.
func closeFrom(files []*os.File, from int) {
	for _, f := range files[from:] {
		f.Close()
	}
}

// filterEnv returns env without the entries for the given names.
func filterEnv(env []string, names ...string) []string {
	out := env[:0:0]
next:
	for _, kv := range env {
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// readyReporter is the child's end of the readiness pipe.
type readyReporter struct {
	f *os.File // nil once reported
}

// childReporter returns the reporter named by WIRELANE_READY_FD, or nil
// when this process is not a re-executed child. It removes the variable so
// that processes the daemon might start do not inherit it.
func childReporter() (*readyReporter, error) {
	s, ok := os.LookupEnv(EnvReadyFD)
	if !ok {
		return nil, nil
	}
	os.Unsetenv(EnvReadyFD)
	fd, err := strconv.ParseUint(s, 10, 31)
	if err != nil || fd < 3 {
		return nil, fmt.Errorf("%s=%q: want a file descriptor number of 3 or more", EnvReadyFD, s)
	}
	syscall.CloseOnExec(int(fd))
	return &readyReporter{f: os.NewFile(uintptr(fd), "ready")}, nil
}

// ok tells the parent that setup is complete.
func (r *readyReporter) ok() { r.send(readyOK) }

// fail tells the parent why setup failed.
func (r *readyReporter) fail(err error) {
	r.send(readyError + strings.ReplaceAll(err.Error(), "\n", " "))
}

func (r *readyReporter) send(line string) {
	if r == nil || r.f == nil {
		return
	}
	r.f.WriteString(line + "\n")
	r.f.Close()
	r.f = nil
}
