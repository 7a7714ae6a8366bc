package service

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DefaultSocket is where the service listens unless told otherwise.
const DefaultSocket = "/run/wirelane/wirelane.sock"

// ErrSocketInUse reports that another live service answers on the socket.
var ErrSocketInUse = errors.New("socket is in use by a running service")

// Listen creates the API socket at path: its directory with mode 0755 if
// missing, the socket with mode 0666 (the service checks every caller's
// credentials itself, and an unprivileged caller should get a clear
// refusal rather than EACCES). The socket appears at path with that mode
// already set: it is bound under a temporary name, changed, then linked
// into place, so no caller ever meets it with the umask's mode, and two
// services starting at once cannot both take it. A stale socket (nobody
// answers) is replaced; a live one is ErrSocketInUse; any other file is
// left alone. Closing the listener removes the socket file.
func Listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("service: socket directory: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != os.ModeSocket {
			return nil, fmt.Errorf("service: %s exists and is not a socket; not replacing it", path)
		}
		c, err := net.DialTimeout("unix", path, 2*time.Second)
		if err == nil {
			c.Close()
			return nil, fmt.Errorf("service: %s: %w", path, ErrSocketInUse)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("service: cannot tell whether %s is still in use: %w", path, err)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("service: removing stale socket %s: %w", path, err)
		}
	}
	tmp := filepath.Join(dir, fmt.Sprintf(".%s.%d.%x.new", filepath.Base(path), os.Getpid(), rand.Uint64()))
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("service: listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false) // the name it was bound to goes away below
	defer os.Remove(tmp)
	if err := os.Chmod(tmp, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("service: %s: %w", path, err)
	}
	if err := os.Link(tmp, path); err != nil {
		l.Close()
		if errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("service: %s: %w", path, ErrSocketInUse)
		}
		return nil, fmt.Errorf("service: listen on %s: %w", path, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("service: %s: %w", path, err)
	}
	return &socketListener{UnixListener: l, path: path, file: fi}, nil
}

// socketListener is the API socket's listener; Close also removes the
// socket file, if it is still the one Listen made.
type socketListener struct {
	*net.UnixListener
	path string
	file os.FileInfo
}

// Close stops listening and removes the socket file.
func (l *socketListener) Close() error {
	err := l.UnixListener.Close()
	if fi, serr := os.Lstat(l.path); serr == nil && os.SameFile(fi, l.file) {
		os.Remove(l.path)
	}
	return err
}
