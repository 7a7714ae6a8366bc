package uapi

// The socket's life: Listen (or ListenFD) -> the daemon's accept loop runs
// Serve per connection -> WatchRemoved tells the daemon when someone deletes
// or replaces the socket file (wg-style "delete the socket to stop the
// daemon") -> Close unlinks the file only if it is still ours.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// SocketDir is the directory Listen places sockets in. Tests and embedders
// may change it before calling Listen; it is not safe to change while
// Listen runs.
var SocketDir = "/var/run/wireguard"

// ErrSocketInUse reports that another live process answers on the socket
// Listen was asked to create.
var ErrSocketInUse = errors.New("socket is in use by a running process")

// SocketPath returns the socket path Listen uses for an interface.
func SocketPath(ifname string) string {
	return filepath.Join(SocketDir, ifname+".sock")
}

// Listen creates the UAPI socket for ifname, SocketDir/IFNAME.sock: the
// directory is created with mode 0755 if missing, the socket with mode 0600
// (bound under umask 0177; the reference's umask 077 gives 0700, and the
// execute bit means nothing on a socket). A stale socket left by a dead
// process (one that refuses connections) is replaced; a socket that accepts
// a connection belongs to a running process and Listen fails with an error
// wrapping ErrSocketInUse. Anything else at the path (a regular file, say)
// is left alone and reported.
//
// Closing the returned listener removes the socket file, unless it has
// been replaced by another file meanwhile. A process that hands the socket
// to a child (through its File method, promoted from *net.UnixListener, and
// WG_UAPI_FD) should exit without calling Close.
func Listen(ifname string) (net.Listener, error) {
	return listenIn(SocketDir, ifname)
}

// ListenFD wraps an inherited listening UNIX socket, such as the one the
// WG_UAPI_FD environment variable names. It takes ownership of fd. Closing
// the returned listener removes the socket file as Listen's does (only if
// the path still names that socket).
func ListenFD(fd int) (net.Listener, error) {
	if fd < 0 {
		return nil, fmt.Errorf("uapi: invalid listener file descriptor %d", fd)
	}
	f := os.NewFile(uintptr(fd), "uapi-listener")
	if f == nil {
		return nil, fmt.Errorf("uapi: invalid listener file descriptor %d", fd)
	}
	defer f.Close() // net.FileListener works on a duplicate
	l, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("uapi: file descriptor %d: %w", fd, err)
	}
	ul, ok := l.(*net.UnixListener)
	if !ok {
		l.Close()
		return nil, fmt.Errorf("uapi: file descriptor %d is not a UNIX socket listener", fd)
	}
	ul.SetUnlinkOnClose(false)
	path := ul.Addr().String()
	if path == "" || path[0] == '@' {
		return ul, nil // unnamed or abstract: no file to manage
	}
	id, err := os.Lstat(path)
	if err != nil {
		return ul, nil // the file is already gone
	}
	return &listener{UnixListener: ul, path: path, id: id}, nil
}

// listener is a UNIX listener that removes its socket file on Close only if
// the path still names the socket it created.
type listener struct {
	*net.UnixListener
	path string
	id   os.FileInfo // the socket file as created; immutable
}

// Close stops accepting and removes the socket file if it is still ours.
func (l *listener) Close() error {
	err := l.UnixListener.Close()
	if fi, lerr := os.Lstat(l.path); lerr == nil && os.SameFile(fi, l.id) {
		if rerr := os.Remove(l.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) && err == nil {
			err = rerr
		}
	}
	return err
}

// validIfname applies the kernel's rule for interface names (dev_valid_name).
func validIfname(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("uapi: invalid interface name %q", name)
	case len(name) > unix.IFNAMSIZ-1:
		return fmt.Errorf("uapi: interface name %q longer than %d bytes", name, unix.IFNAMSIZ-1)
	case strings.ContainsAny(name, "/: \t\n\v\f\r\x00"):
		return fmt.Errorf("uapi: invalid interface name %q", name)
	}
	return nil
}

func listenIn(dir, ifname string) (*listener, error) {
	if err := validIfname(ifname); err != nil {
		return nil, err
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, ifname+".sock")
	ul, err := bindUnix(path)
	if errors.Is(err, syscall.EADDRINUSE) {
		if err = removeStale(path); err != nil {
			return nil, err
		}
		ul, err = bindUnix(path)
	}
	if err != nil {
		return nil, fmt.Errorf("uapi: listen on %s: %w", path, err)
	}
	ul.SetUnlinkOnClose(false) // listener.Close decides
	id, err := os.Lstat(path)
	if err != nil {
		ul.Close()
		return nil, fmt.Errorf("uapi: listen on %s: %w", path, err)
	}
	return &listener{UnixListener: ul, path: path, id: id}, nil
}

// ensureDir creates dir with mode 0755 (whatever the umask) if it is missing.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("uapi: socket directory %s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("uapi: socket directory: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("uapi: socket directory: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fmt.Errorf("uapi: socket directory: %w", err)
	}
	return nil
}

// umaskMu serialises the umask changes of this package. The umask is
// process-wide: a file another goroutine creates during the bind gets a
// stricter mode, never a looser one.
var umaskMu sync.Mutex

// bindUnix binds and listens on path with the socket file at mode 0600.
func bindUnix(path string) (*net.UnixListener, error) {
	umaskMu.Lock()
	defer umaskMu.Unlock()
	old := unix.Umask(0o177)
	defer unix.Umask(old)
	return net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
}

// staleDialTimeout bounds the liveness probe of an existing socket.
const staleDialTimeout = 2 * time.Second

// removeStale removes the socket at path if no process answers on it.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // gone meanwhile; the next bind decides
		}
		return fmt.Errorf("uapi: %s: %w", path, err)
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("uapi: %s exists and is not a socket; not replacing it", path)
	}
	c, err := net.DialTimeout("unix", path, staleDialTimeout)
	if err == nil {
		c.Close()
		return fmt.Errorf("uapi: %s: %w", path, ErrSocketInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("uapi: cannot tell whether %s is still in use: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("uapi: removing stale socket %s: %w", path, err)
	}
	return nil
}

// watchPollInterval is how often WatchRemoved checks the path when inotify
// is unavailable.
var watchPollInterval = time.Second

// WatchRemoved returns a channel that is closed once path no longer names
// the file it named when WatchRemoved was called: deleted, renamed away, or
// replaced by another file. If path does not exist at the call, the channel
// is closed at once. Closing done stops the watch (the channel then stays
// open). The watch uses inotify, and polls every second if inotify is
// unavailable; it holds one goroutine and one file descriptor.
func WatchRemoved(path string, done <-chan struct{}) <-chan struct{} {
	gone := make(chan struct{})
	orig, err := os.Lstat(path)
	if err != nil {
		close(gone)
		return gone
	}
	stillThere := func() bool {
		fi, err := os.Lstat(path)
		return err == nil && os.SameFile(fi, orig)
	}
	go func() {
		if watchInotify(path, stillThere, done) {
			close(gone)
		}
	}()
	return gone
}

// watchInotify waits until stillThere turns false (returning true) or done
// is closed (returning false). Every inotify event on path triggers a fresh
// check; unlinking a file changes its link count, which inotify reports as
// IN_ATTRIB even while the bound socket keeps the inode alive.
func watchInotify(path string, stillThere func() bool, done <-chan struct{}) bool {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return watchPoll(stillThere, done)
	}
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_ATTRIB|unix.IN_DELETE_SELF|unix.IN_MOVE_SELF); err != nil {
		unix.Close(fd)
		return watchPoll(stillThere, done)
	}
	f := os.NewFile(uintptr(fd), "inotify") // non-blocking: reads park in the runtime poller
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-done:
		case <-stop:
		}
		f.Close() // wakes a blocked Read
	}()
	buf := make([]byte, 4096)
	for {
		// Check before every read: the event may have come before the watch.
		if !stillThere() {
			return true
		}
		if _, err := f.Read(buf); err != nil {
			select {
			case <-done:
				return false
			default:
				return watchPoll(stillThere, done)
			}
		}
	}
}

func watchPoll(stillThere func() bool, done <-chan struct{}) bool {
	t := time.NewTicker(watchPollInterval)
	defer t.Stop()
	for {
		if !stillThere() {
			return true
		}
		select {
		case <-done:
			return false
		case <-t.C:
		}
	}
}
