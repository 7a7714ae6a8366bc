package tray

// A fake service for the tests of what the real one never does (answer
// garbage, hang up mid-line, never answer, send hostile names) or does only
// with a real OpenVPN server behind it (ask for credentials). The tests
// against the real service are in internal/testkit/e2e (tray_test.go).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/dbustest"
)

// fakeService answers on a unix socket with handler: n counts the
// connections for the request's path (1 for the first).
type fakeService struct {
	socket string
	ln     net.Listener

	mu     sync.Mutex
	counts map[string]int    // guarded by mu
	posts  map[string][]byte // guarded by mu: the last body per path
	conns  []net.Conn        // guarded by mu
}

type handler func(fs *fakeService, c net.Conn, r *http.Request, n int)

func newFakeService(t *testing.T, h handler) *fakeService {
	t.Helper()
	dir, err := os.MkdirTemp("", "wl-fake-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	fs := &fakeService{socket: filepath.Join(dir, "api.sock"), counts: map[string]int{}, posts: map[string][]byte{}}
	fs.ln, err = net.Listen("unix", fs.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		fs.ln.Close()
		fs.mu.Lock()
		for _, c := range fs.conns {
			c.Close()
		}
		fs.mu.Unlock()
	})
	go func() {
		for {
			c, err := fs.ln.Accept()
			if err != nil {
				return
			}
			fs.mu.Lock()
			fs.conns = append(fs.conns, c)
			fs.mu.Unlock()
			go func() {
				br := bufio.NewReader(c)
				for {
					r, err := http.ReadRequest(br)
					if err != nil {
						c.Close()
						return
					}
					body, _ := io.ReadAll(r.Body)
					fs.mu.Lock()
					fs.counts[r.URL.Path]++
					n := fs.counts[r.URL.Path]
					if r.Method == http.MethodPost {
						fs.posts[r.URL.Path] = body
					}
					fs.mu.Unlock()
					h(fs, c, r, n)
				}
			}()
		}
	}()
	return fs
}

func (fs *fakeService) count(path string) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.counts[path]
}

func (fs *fakeService) posted(path string) []byte {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.posts[path]
}

// streamHead starts an event stream that lasts until the connection closes.
func streamHead(c net.Conn) {
	io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nConnection: close\r\n\r\n")
}

// send writes events as stream lines.
func send(c net.Conn, evs ...service.Event) {
	for _, e := range evs {
		b, _ := json.Marshal(e)
		c.Write(append(b, '\n'))
	}
}

// answer writes a JSON answer.
func answer(c net.Conn, status int, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, http.StatusText(status), len(b), b)
}

// snap is a snapshot event for a tunnel.
func snap(name string, kind service.Kind, st service.State) service.Event {
	return service.Event{Type: service.EventTunnel, Tunnel: name, State: st, Initial: true,
		Status: &service.Tunnel{Name: name, Kind: kind, State: st, Peers: []service.Peer{}}}
}

// executable is the test binary as a command (a tray child once its
// environment says so).
func executable(t *testing.T) (*exec.Cmd, error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exec.Command(exe), nil
}

// startChild runs the test binary as a tray for socket on desktop d.
func startChild(t *testing.T, d *dbustest.Desktop, socket string) *dbustest.Tray {
	t.Helper()
	cmd, _ := executable(t)
	return d.Run(t, cmd, "WIRELANE_TRAY_TEST_SOCKET="+socket,
		"WIRELANE_TRAY_TEST_ZENITY="+d.Zenity(), "WIRELANE_TRAY_TEST_RETRY=200ms")
}
