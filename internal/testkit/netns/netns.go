// Package netns holds test helpers for network namespaces: creating
// uniquely named namespaces and veth pairs, running commands inside them
// (through `ip netns exec`), starting background processes, and removing
// all of it through t.Cleanup even when a test fails.
//
// Every helper takes a testing.TB and fails the test with the command, its
// output and its exit status when something goes wrong, so tests read as a
// list of steps. A nil *NS stands for the namespace the test runs in.
package netns

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// CommandTimeout bounds every command run through Run or Try.
const CommandTimeout = 60 * time.Second

// Need skips the test unless it runs as root and the given commands (plus
// `ip`) are on PATH.
func Need(t testing.TB, commands ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces, interfaces and daemons")
	}
	for _, c := range append([]string{"ip"}, commands...) {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("needs %s on PATH (scripts/test.sh installs it when run as root): %v", c, err)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
}

var seq atomic.Uint32

// tag is shared by all names one test binary creates, so that parallel runs
// of the package (or leftovers of a killed run) never collide.
var tag = fmt.Sprintf("%03x", (uint32(os.Getpid())^rand.Uint32())&0xfff)

// Unique returns a name made of prefix and a short suffix unique to this
// process, short enough for an interface name (15 bytes) when prefix has at
// most 6 bytes.
func Unique(prefix string) string {
	return fmt.Sprintf("%s%s%d", prefix, tag, seq.Add(1))
}

// NS is a network namespace created for one test.
type NS struct {
	// Name is the namespace's name under /run/netns.
	Name string
}

// New creates a namespace whose name starts with prefix, brings its
// loopback up, and deletes it (after killing processes still inside) when
// the test ends.
func New(t testing.TB, prefix string) *NS {
	t.Helper()
	n := &NS{Name: Unique(prefix)}
	Run(t, nil, "ip", "netns", "add", n.Name)
	t.Cleanup(func() { n.remove(t) })
	Run(t, n, "ip", "link", "set", "lo", "up")
	return n
}

// remove kills whatever still runs in the namespace and deletes it.
func (n *NS) remove(t testing.TB) {
	out, _ := exec.Command("ip", "netns", "pids", n.Name).Output()
	for _, f := range strings.Fields(string(out)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && pid != os.Getpid() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if out, err := exec.Command("ip", "netns", "del", n.Name).CombinedOutput(); err != nil {
		t.Logf("cleanup: ip netns del %s: %v: %s", n.Name, err, out)
	}
}

// Command returns an unstarted command that runs args in n (or in the
// current namespace when n is nil).
func Command(n *NS, args ...string) *exec.Cmd {
	if n != nil {
		args = append([]string{"ip", "netns", "exec", n.Name}, args...)
	}
	return exec.Command(args[0], args[1:]...)
}

// Try runs args in n with an extra environment (KEY=VALUE entries) and
// returns the combined output. The error describes the command and its
// status.
func Try(n *NS, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CommandTimeout)
	defer cancel()
	cmd := Command(n, args...)
	cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// The command's own children (a daemonized process) may keep the
	// output pipe open; do not wait for them once the command exits.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if err != nil {
		where := "root namespace"
		if n != nil {
			where = "netns " + n.Name
		}
		err = fmt.Errorf("%s: %q: %w", where, strings.Join(args, " "), err)
	}
	return out.String(), err
}

// Run runs args in n and fails the test if the command fails.
func Run(t testing.TB, n *NS, args ...string) string {
	t.Helper()
	out, err := Try(n, nil, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// RunEnv is Run with an extra environment.
func RunEnv(t testing.TB, n *NS, env []string, args ...string) string {
	t.Helper()
	out, err := Try(n, env, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// Proc is a background process started by Start.
type Proc struct {
	Cmd  *exec.Cmd
	done chan struct{}
	out  bytes.Buffer // written by the exec package until done is closed
	err  error        // set before done is closed
}

// Start runs args in n in the background. The process is killed when the
// test ends unless it has exited.
func Start(t testing.TB, n *NS, args ...string) *Proc {
	t.Helper()
	return StartEnv(t, n, nil, args...)
}

// StartEnv is Start with an extra environment (KEY=VALUE entries).
func StartEnv(t testing.TB, n *NS, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{Cmd: Command(n, args...), done: make(chan struct{})}
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout = &p.out
	p.Cmd.Stderr = &p.out
	p.Cmd.WaitDelay = time.Second
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %q: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.Cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// Output returns what the process has written to stdout and stderr. It
// may only be called after the process has exited (see Wait and Exited).
func (p *Proc) Output() string {
	<-p.done
	return p.out.String()
}

// Exited returns a channel closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Wait waits up to d for the process to exit and returns its output and
// exit error; it fails the test on timeout.
func (p *Proc) Wait(t testing.TB, d time.Duration) (string, error) {
	t.Helper()
	select {
	case <-p.done:
		return p.out.String(), p.err
	case <-time.After(d):
		t.Fatalf("%q still running after %v", strings.Join(p.Cmd.Args, " "), d)
		return "", nil
	}
}

// Veth creates a veth pair with one end named aName in a and the other
// named bName in b, both up. The pair disappears with its namespaces.
func Veth(t testing.TB, a *NS, aName string, b *NS, bName string) {
	t.Helper()
	tmpA, tmpB := Unique("va"), Unique("vb")
	Run(t, nil, "ip", "link", "add", tmpA, "type", "veth", "peer", "name", tmpB)
	t.Cleanup(func() { exec.Command("ip", "link", "del", tmpA).Run() })
	move := func(tmp string, n *NS, name string) {
		args := []string{"ip", "link", "set", tmp}
		if n != nil {
			args = append(args, "netns", n.Name)
		}
		Run(t, nil, append(args, "name", name)...)
		Run(t, n, "ip", "link", "set", name, "up")
	}
	move(tmpA, a, aName)
	move(tmpB, b, bName)
}

// Eventually polls cond every 50ms until it returns nil or d passes, then
// fails the test with the last error.
func Eventually(t testing.TB, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true after %v: %v", what, d, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
