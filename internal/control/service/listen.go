package service

import (
	"errors"
	"fmt"
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
// refusal rather than EACCES). A stale socket (nobody answers) is
// replaced; a live one is ErrSocketInUse; any other file is left alone.
// Closing the listener removes the socket file.
func Listen(path string) (*net.UnixListener, error) {
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
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("service: listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		l.Close()
		return nil, fmt.Errorf("service: %s: %w", path, err)
	}
	return l, nil
}
