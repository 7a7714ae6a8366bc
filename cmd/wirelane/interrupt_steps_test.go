package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	tnetns "github.com/wirelane/wirelane/internal/testkit/netns"
)

// interruption is one way to stop `up` from outside while it runs.
type interruption struct {
	name string
	// do acts on the frozen up process (pid) in ns, whose output pipe's
	// read end is r; it returns whether r was closed.
	do func(t *testing.T, ns *tnetns.NS, pid int, r *os.File) (closed bool)
}

var interruptions = []interruption{
	{"SIGINT", signalUp(syscall.SIGINT)},
	{"SIGTERM", signalUp(syscall.SIGTERM)},
	{"SIGHUP", signalUp(syscall.SIGHUP)},
	{"SIGPIPE", func(t *testing.T, _ *tnetns.NS, _ int, r *os.File) bool {
		r.Close() // the next line up writes meets a closed pipe, as with `| head`
		return true
	}},
	{"daemon SIGKILL", func(t *testing.T, ns *tnetns.NS, pid int, _ *os.File) bool {
		if d := daemonPid(ns, pid); d > 0 {
			syscall.Kill(d, syscall.SIGKILL)
			waitGone(d)
		}
		return false
	}},
}

func signalUp(sig syscall.Signal) func(*testing.T, *tnetns.NS, int, *os.File) bool {
	return func(t *testing.T, _ *tnetns.NS, pid int, _ *os.File) bool {
		syscall.Kill(pid, sig) // pending until SIGCONT
		return false
	}
}

// TestInterruptedUpAtEveryStep stops `up` of a full tunnel (addresses,
// routes, policy rules, firewall, hooks) after each line of its progress
// (each "[#] change" it is about to make, and the end), freezes it there
// with SIGSTOP, interrupts it in one of five ways (SIGINT, SIGTERM,
// SIGHUP, a closed output pipe, SIGKILL of its daemon) and lets it go on.
// Every run must end either fully up (exit 0, the same state as an
// undisturbed up) or with everything undone (exit 130 or a failure, the
// state exactly as before, no daemon left): never in between.
func TestInterruptedUpAtEveryStep(t *testing.T) {
	env := logDaemon(t)
	marker := filepath.Join(t.TempDir(), "hooks")
	body, _ := fullTunnelConf(t, fmt.Sprintf("PreUp = echo pre >> %s\nPostUp = echo post >> %s", marker, marker))

	// One undisturbed run: how many progress lines, and the state when up.
	ns := tnetns.New(t, "wls")
	ifname := tnetns.Unique("wls")
	conf := writeConf(t, ifname, body)
	before := netState(t, ns)
	out, err := tnetns.Try(ns, env, self(t), "up", conf)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	upState := netState(t, ns)
	steps := strings.Count(out, "[#] ")
	if steps < 8 {
		t.Fatalf("only %d progress lines from up; the test would prove little:\n%s", steps, out)
	}
	if out, err := tnetns.Try(ns, env, self(t), "down", conf); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if s := netState(t, ns); s != before {
		t.Fatalf("down left:\n%s\nwant:\n%s", s, before)
	}
	t.Logf("%d progress lines", steps)

	// Every line, with the five interruptions in turn (each meets every
	// fifth step; -all runs all five at every line, five times as long).
	for k := 1; k <= steps+1; k++ {
		for i, in := range interruptions {
			if !*allInterruptions && i != k%len(interruptions) {
				continue
			}
			t.Run(fmt.Sprintf("after line %d/%s", k, in.name), func(t *testing.T) {
				interruptUpAt(t, ns, env, conf, ifname, k, in, before, upState)
			})
		}
	}
}

var allInterruptions = flag.Bool("all", false, "TestInterruptedUpAtEveryStep: every interruption at every step")

// interruptUpAt runs up, freezes it once it has written its k-th progress
// line (k past the last: when its output ends), applies in, resumes it
// and checks the outcome.
func interruptUpAt(t *testing.T, ns *tnetns.NS, env []string, conf, ifname string, k int, in interruption, before, upState string) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := tnetns.Command(ns, self(t), "up", conf)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	pid := cmd.Process.Pid // ip netns exec runs wirelane in place
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var seen strings.Builder
	br := bufio.NewReader(r)
	for n := 0; n < k; {
		line, err := br.ReadString('\n')
		seen.WriteString(line)
		if err != nil {
			break // output ended: up finished (k past the last line)
		}
		if strings.HasPrefix(line, "[#] ") {
			n++
		}
	}
	syscall.Kill(pid, syscall.SIGSTOP)
	frozen := waitStopped(pid)
	closed := false
	if frozen {
		closed = in.do(t, ns, pid, r)
		syscall.Kill(pid, syscall.SIGCONT)
	}
	if !closed {
		go func() { io.Copy(&seen, br); r.Close() }()
	}
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("up did not end after %s:\n%s", in.name, seen.String())
	}
	time.Sleep(50 * time.Millisecond) // the copy above drains what is left
	state := netState(t, ns)
	switch {
	case err == nil:
		if state != upState {
			t.Errorf("up exited 0 after %s but the state is not the full tunnel:\n%s\nwant:\n%s\noutput:\n%s", in.name, state, upState, seen.String())
		}
		if out, err := tnetns.Try(ns, env, self(t), "down", conf); err != nil {
			t.Fatalf("down: %v\n%s", err, out)
		}
		if s := netState(t, ns); s != before {
			t.Fatalf("down left:\n%s\nwant:\n%s", s, before)
		}
	default:
		if state != before {
			t.Errorf("up failed after %s (%v) and left:\n%s\nwant:\n%s\noutput:\n%s", in.name, err, state, before, seen.String())
		}
	}
	tnetns.Eventually(t, 5*time.Second, "no daemon left", func() error {
		if err := noDaemonIn(ns); err != nil {
			return err
		}
		return socketGone(ifname)
	})
}

// waitStopped waits until pid is stopped (true) or has exited (false).
func waitStopped(pid int) bool {
	for i := 0; i < 500; i++ {
		switch procState(pid) {
		case "T", "t":
			return true
		case "Z", "X", "":
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return false
}

// procState is the state letter of /proc/PID/stat ("" when gone).
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return ""
	}
	return s[i+2 : i+3]
}

// daemonPid is the process in ns other than up (and its hooks) that is
// the tunnel's daemon, or 0.
func daemonPid(ns *tnetns.NS, up int) int {
	out, _ := exec.Command("ip", "netns", "pids", ns.Name).Output()
	for _, f := range strings.Fields(string(out)) {
		p, _ := strconv.Atoi(f)
		if p == up || p == 0 {
			continue
		}
		cl, _ := os.ReadFile("/proc/" + f + "/cmdline")
		args := strings.Split(string(cl), "\x00")
		if len(args) > 1 && (args[1] == "daemon" || strings.HasSuffix(args[0], "wirelaned") || strings.Contains(args[0], "wireguard-go")) {
			return p
		}
	}
	return 0
}

// waitGone waits until pid no longer exists (or is a zombie).
func waitGone(pid int) {
	for i := 0; i < 500; i++ {
		if s := procState(pid); s == "" || s == "Z" || s == "X" {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
}
