package uapi

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// useSocketDir points SocketDir at a fresh directory for one test.
func useSocketDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run", "wireguard")
	old := SocketDir
	SocketDir = dir
	t.Cleanup(func() { SocketDir = old })
	return dir
}

func TestListenCreatesDirectoryAndPrivateSocket(t *testing.T) {
	dir := useSocketDir(t)
	// A strict umask must not make the directory 0700, and the daemon's
	// umask must come back unchanged.
	old := unix.Umask(0o077)
	l, err := Listen("wlt0")
	after := unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if after != 0o077 {
		t.Errorf("umask changed to %#o", after)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("directory mode %v, want 0755", fi.Mode().Perm())
	}
	path := filepath.Join(dir, "wlt0.sock")
	if SocketPath("wlt0") != path {
		t.Errorf("SocketPath = %s, want %s", SocketPath("wlt0"), path)
	}
	fi, err = os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want socket 0600", fi.Mode())
	}
}

func TestListenServesConnections(t *testing.T) {
	useSocketDir(t)
	l, err := Listen("wlt1")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := goldenHandler(t)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go Serve(c, h)
		}
	}()
	c, err := net.Dial("unix", SocketPath("wlt1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("get=1\n\n"))
	buf := make([]byte, len(goldenGet))
	if _, err := readFull(c, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != goldenGet {
		t.Fatalf("got %q", buf)
	}
}

func readFull(c net.Conn, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// staleSocket leaves a socket file at path with nothing listening on it,
// as a crashed daemon does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd) // never listened: connections are refused
}

func TestListenReplacesStaleSocket(t *testing.T) {
	useSocketDir(t)
	path := SocketPath("wlt2")
	staleSocket(t, path)
	if _, err := net.Dial("unix", path); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("stale socket not stale: %v", err)
	}
	l, err := Listen("wlt2")
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("the replacement does not accept: %v", err)
	}
	c.Close()
}

func TestListenRefusesToStealLiveSocket(t *testing.T) {
	useSocketDir(t)
	first, err := Listen("wlt3")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := Listen("wlt3")
	if err == nil {
		second.Close()
		t.Fatal("second Listen succeeded")
	}
	if !errors.Is(err, ErrSocketInUse) || !strings.Contains(err.Error(), "wlt3.sock") {
		t.Fatalf("error %q should wrap ErrSocketInUse and name the socket", err)
	}
	// The first listener is untouched.
	c, err := net.Dial("unix", SocketPath("wlt3"))
	if err != nil {
		t.Fatalf("first listener lost its socket: %v", err)
	}
	c.Close()
}

func TestListenLeavesOtherFilesAlone(t *testing.T) {
	dir := useSocketDir(t)
	os.MkdirAll(dir, 0o755)
	path := SocketPath("wlt4")
	if err := os.WriteFile(path, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if l, err := Listen("wlt4"); err == nil {
		l.Close()
		t.Fatal("Listen replaced a regular file")
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep" {
		t.Fatalf("regular file damaged: %q %v", b, err)
	}
}

func TestListenRejectsBadNames(t *testing.T) {
	useSocketDir(t)
	for _, name := range []string{"", ".", "..", "a/b", "../x", "wg 0", "wg:0", "0123456789abcdef", "a\x00b"} {
		if l, err := Listen(name); err == nil {
			l.Close()
			t.Errorf("Listen(%q) succeeded", name)
		}
	}
}

func TestCloseRemovesOnlyItsOwnSocket(t *testing.T) {
	useSocketDir(t)
	path := SocketPath("wlt5")
	l, err := Listen("wlt5")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Close: %v", err)
	}

	// A daemon whose socket was deleted and re-created by a successor must
	// not remove the successor's socket when it closes.
	old, err := Listen("wlt5")
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(path)
	successor, err := Listen("wlt5")
	if err != nil {
		t.Fatal(err)
	}
	defer successor.Close()
	old.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("closing the old listener removed the successor's socket: %v", err)
	}
	c.Close()
}

func TestListenFD(t *testing.T) {
	useSocketDir(t)
	l, err := Listen("wlt6")
	if err != nil {
		t.Fatal(err)
	}
	f, err := l.(*listener).File() // a duplicate, as a parent would pass down
	if err != nil {
		t.Fatal(err)
	}
	l.(*listener).UnixListener.Close() // the parent lets go without unlinking
	fd, err := unix.Dup(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	inherited, err := ListenFD(fd)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		c, err := inherited.Accept()
		if err == nil {
			Serve(c, &fakeHandler{})
		}
	}()
	c, err := net.Dial("unix", SocketPath("wlt6"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("set=1\n\n"))
	buf := make([]byte, 9)
	if _, err := readFull(c, buf); err != nil || string(buf) != "errno=0\n\n" {
		t.Fatalf("got %q %v", buf, err)
	}
	c.Close()
	inherited.Close()
	if _, err := os.Lstat(SocketPath("wlt6")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after closing the inherited listener: %v", err)
	}
}

func TestListenFDRejectsOtherDescriptors(t *testing.T) {
	if _, err := ListenFD(-1); err == nil {
		t.Error("ListenFD(-1) succeeded")
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	fd, _ := unix.Dup(int(f.Fd()))
	f.Close()
	if l, err := ListenFD(fd); err == nil {
		l.Close()
		t.Error("ListenFD on a regular file succeeded")
	}
	u, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	uf, _ := u.(*net.UDPConn).File()
	u.Close()
	fd, _ = unix.Dup(int(uf.Fd()))
	uf.Close()
	if l, err := ListenFD(fd); err == nil {
		l.Close()
		t.Error("ListenFD on a UDP socket succeeded")
	}
}

func TestWatchRemoved(t *testing.T) {
	for _, tt := range []struct {
		name   string
		remove func(t *testing.T, path string)
	}{
		{"deleted", func(t *testing.T, path string) { os.Remove(path) }},
		{"renamed away", func(t *testing.T, path string) { os.Rename(path, path+".old") }},
		{"replaced by another socket", func(t *testing.T, path string) {
			tmp := path + ".new"
			staleSocket(t, tmp)
			if err := os.Rename(tmp, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			useSocketDir(t)
			l, err := Listen("wlt7")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			done := make(chan struct{})
			defer close(done)
			gone := WatchRemoved(SocketPath("wlt7"), done)
			select {
			case <-gone:
				t.Fatal("reported removed while present")
			case <-time.After(50 * time.Millisecond):
			}
			tt.remove(t, SocketPath("wlt7"))
			select {
			case <-gone:
			case <-time.After(500 * time.Millisecond): // inotify: well under the poll interval
				t.Fatal("removal not reported")
			}
		})
	}
}

func TestWatchRemovedStopsWhenDone(t *testing.T) {
	useSocketDir(t)
	l, err := Listen("wlt8")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	done := make(chan struct{})
	gone := WatchRemoved(SocketPath("wlt8"), done)
	close(done)
	time.Sleep(20 * time.Millisecond)
	os.Remove(SocketPath("wlt8"))
	select {
	case <-gone:
		t.Fatal("reported after done was closed")
	case <-time.After(100 * time.Millisecond):
	}
	if g := WatchRemoved(SocketPath("wlt8"), done); g == nil {
		t.Fatal("nil channel")
	} else {
		select {
		case <-g:
		default:
			t.Fatal("a missing path must be reported at once")
		}
	}
}

func TestWatchRemovedPollFallback(t *testing.T) {
	old := watchPollInterval
	watchPollInterval = 5 * time.Millisecond
	defer func() { watchPollInterval = old }()
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	os.WriteFile(path, nil, 0o600)
	orig, _ := os.Lstat(path)
	done := make(chan struct{})
	defer close(done)
	result := make(chan bool, 1)
	go func() {
		result <- watchPoll(func() bool {
			fi, err := os.Lstat(path)
			return err == nil && os.SameFile(fi, orig)
		}, done)
	}()
	os.Remove(path)
	select {
	case r := <-result:
		if !r {
			t.Fatal("poll reported done instead of removal")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("poll did not notice the removal")
	}
}
