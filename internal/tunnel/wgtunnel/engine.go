package wgtunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/uapi"
)

// Engine runs WireGuard devices, one per interface name. The library asks
// it to create a device, to read and change a device's configuration, and
// to wait for a device to end once its interface was deleted.
//
// Daemon implements it with one userspace daemon process per interface;
// a service that runs the devices in its own process implements it with
// the devices themselves. Methods may be called from several goroutines
// for different names.
type Engine interface {
	// Start creates the interface name and returns once the device
	// answers Device and Configure. Cancelling ctx abandons the start (an
	// engine started half way must stop by itself or when its interface
	// is deleted).
	Start(ctx context.Context, name string) error
	// Device returns the running configuration of name. An error
	// wrapping fs.ErrNotExist means no device of that name runs; one
	// wrapping syscall.ECONNREFUSED, that its engine died and left its
	// control socket behind.
	Device(name string) (*wgtypes.Device, error)
	// Devices returns every running device, sorted by name. A device whose
	// engine died is skipped (and what it left behind removed).
	Devices() ([]*wgtypes.Device, error)
	// Configure applies cfg to the device name.
	Configure(name string, cfg wgtypes.Config) error
	// Stopped returns once the device name has ended after its interface
	// was deleted, making it end if it has not within d.
	Stopped(name string, d time.Duration)
	// InUse reports whether a device called name runs anywhere, also in
	// another network namespace (whose interfaces this one cannot see).
	InUse(name string) bool
	// Close releases the engine's resources (not the devices).
	Close() error
}

var _ Engine = (*Daemon)(nil)

// DaemonEnv names the variable that makes Daemon run another userspace
// implementation: WIRELANE_DAEMON=PATH runs "PATH IFNAME".
const DaemonEnv = "WIRELANE_DAEMON"

// Daemon is the Engine of `wirelane up`: one daemon process per interface
// (this binary re-executed as "EXE daemon IFNAME", or the program
// WIRELANE_DAEMON names, with the wireguard-go command line), which
// creates the TUN device and the UAPI socket uapi.SocketPath(IFNAME),
// detaches, and exits when its interface is deleted or its socket
// removed. Configuration goes over the UAPI socket.
type Daemon struct {
	// Log, Stderr and Prog are set before first use and not changed
	// after.

	// Log receives the command line that starts a daemon; nil = silent.
	Log func(string)
	// Stderr receives the starting daemon's output; nil = os.Stderr.
	Stderr io.Writer
	// Prog names this binary in log lines ("wirelane daemon wg0").
	Prog string
	// Exec, when set, is the daemon program, run as "Exec IFNAME" (as
	// WIRELANE_DAEMON is, which it overrides): the service, whose own
	// binary is wirelaned, sets it to that binary.
	Exec string

	mu sync.Mutex     // guards wc
	wc *wgctrl.Client // opened on first use
}

func (d *Daemon) client() (*wgctrl.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.wc == nil {
		wc, err := wgctrl.New()
		if err != nil {
			return nil, err
		}
		d.wc = wc
	}
	return d.wc, nil
}

// Close releases the UAPI client.
func (d *Daemon) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.wc == nil {
		return nil
	}
	err := d.wc.Close()
	d.wc = nil
	return err
}

func (d *Daemon) log(s string) {
	if d.Log != nil {
		d.Log(s)
	}
}

// Start runs the daemon for name and waits until its UAPI socket answers.
// The daemon detaches itself once its TUN and socket are ready.
func (d *Daemon) Start(ctx context.Context, name string) error {
	var cmd *exec.Cmd
	impl := d.Exec
	if impl == "" {
		impl = os.Getenv(DaemonEnv)
	}
	if impl != "" {
		d.log(impl + " " + name)
		cmd = exec.CommandContext(ctx, impl, name)
	} else {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		prog := d.Prog
		if prog == "" {
			prog = filepath.Base(exe)
		}
		d.log(prog + " daemon " + name)
		cmd = exec.CommandContext(ctx, exe, "daemon", name)
	}
	out := d.Stderr
	if out == nil {
		out = os.Stderr
	}
	cmd.Stdout, cmd.Stderr = out, out
	// When ctx ends, interrupt rather than kill the starting daemon, so
	// that it can stop the detached copy it may already have started.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("the daemon for %s failed to start: %w", name, err)
	}
	return d.waitUAPI(ctx, name, 5*time.Second)
}

// waitUAPI polls until a get on the interface's UAPI socket succeeds.
func (d *Daemon) waitUAPI(ctx context.Context, name string, timeout time.Duration) error {
	wc, err := d.client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		_, err := wc.Device(name)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the daemon's socket %s did not answer within %v: %w", uapi.SocketPath(name), timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Device reads the device's configuration over its UAPI socket.
func (d *Daemon) Device(name string) (*wgtypes.Device, error) {
	wc, err := d.client()
	if err != nil {
		return nil, err
	}
	return wc.Device(name)
}

// Configure applies cfg over the device's UAPI socket.
func (d *Daemon) Configure(name string, cfg wgtypes.Config) error {
	wc, err := d.client()
	if err != nil {
		return err
	}
	return wc.ConfigureDevice(name, cfg)
}

// Devices returns every device whose UAPI socket answers, sorted by name.
// A socket left behind by a daemon that died (nobody accepts on it) is
// skipped and removed, as wg does, instead of failing the whole listing,
// so one crashed tunnel cannot hide the others.
func (d *Daemon) Devices() ([]*wgtypes.Device, error) {
	wc, err := d.client()
	if err != nil {
		return nil, err
	}
	socks, err := filepath.Glob(uapi.SocketPath("*"))
	if err != nil {
		return nil, err
	}
	var devs []*wgtypes.Device
	for _, s := range socks {
		name := strings.TrimSuffix(filepath.Base(s), ".sock")
		dev, err := wc.Device(name)
		if err != nil {
			if errors.Is(err, syscall.ECONNREFUSED) {
				RemoveStaleSocket(name)
				continue
			}
			if errors.Is(err, fs.ErrNotExist) {
				continue // gone meanwhile
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		devs = append(devs, dev)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i].Name < devs[j].Name })
	return devs, nil
}

// InUse reports whether a daemon answers on name's socket. Sockets live
// in one directory for all network namespaces: a daemon answering there
// serves an interface of that name, perhaps elsewhere.
func (d *Daemon) InUse(name string) bool {
	c, err := net.DialTimeout("unix", uapi.SocketPath(name), time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// Stopped waits for the daemon to remove its socket as it exits, so that
// Up right after Down finds the name free. A daemon that has not noticed
// its interface going away within d is told to stop the other way the
// protocol offers: its socket file is removed.
func (d *Daemon) Stopped(name string, timeout time.Duration) {
	p := uapi.SocketPath(name)
	gone := func() bool {
		for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(p); err != nil {
				return true
			}
		}
		return false
	}
	if gone() {
		return
	}
	d.log("rm " + p + " (the daemon did not exit when its interface was deleted)")
	os.Remove(p)
	gone()
}

// RemoveStaleSocket removes the UAPI socket of ifname if nobody accepts
// connections on it any more (its daemon died), as wg does, and says what
// it did ("removed the stale socket ..." when it removed it).
func RemoveStaleSocket(ifname string) string {
	p := uapi.SocketPath(ifname)
	c, err := net.DialTimeout("unix", p, time.Second)
	if err == nil {
		c.Close()
		return "its socket " + p + " answers again"
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return "socket " + p + ": " + err.Error()
	}
	if err := os.Remove(p); err != nil {
		return "cannot remove the stale socket: " + err.Error()
	}
	return "removed the stale socket " + p
}

// HasSocket reports whether ifname has a UAPI socket file (its daemon may
// be alive or dead).
func HasSocket(ifname string) bool {
	_, err := os.Lstat(uapi.SocketPath(ifname))
	return err == nil
}

// staleRemover is implemented by engines whose dead devices leave
// something behind that Down must remove (Daemon: the UAPI socket).
type staleRemover interface {
	// RemoveStale removes what the dead device name left behind and
	// reports whether there was anything.
	RemoveStale(name string) (bool, error)
}

// RemoveStale removes name's socket if its daemon is dead, and reports
// whether it did; a socket that still answers is an error.
func (d *Daemon) RemoveStale(name string) (bool, error) {
	if !HasSocket(name) {
		return false, nil
	}
	msg := RemoveStaleSocket(name)
	if !strings.HasPrefix(msg, "removed") {
		return false, errors.New(msg)
	}
	d.log("rm " + uapi.SocketPath(name) + " (stale: its daemon is not running)")
	return true, nil
}
