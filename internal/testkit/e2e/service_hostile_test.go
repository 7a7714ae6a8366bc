package e2e

// Hostile and unprivileged clients against the real service over its real
// Host (wirelaned without an interface name, a WireGuard tunnel up): each
// gets a clear error or is dropped, nothing panics, and the tunnel keeps
// carrying traffic and its state.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// restartWith restarts the bed's service with extra flags.
func (sb *serviceBed) restartWith(t *testing.T, extra ...string) {
	t.Helper()
	sb.stop(t)
	args := append([]string{filepath.Join(binDir, "wirelaned"), "--socket", sb.socket,
		"--wireguard-dir", filepath.Join(sb.dir, "wireguard"), "--wirelane-dir", filepath.Join(sb.dir, "wirelane")}, extra...)
	sb.proc = netns.StartEnv(t, sb.nsA, []string{"WIRELANE_FIREWALL=off"}, args...)
	netns.Eventually(t, 5*time.Second, "the service's socket answers", func() error {
		select {
		case <-sb.proc.Exited():
			t.Fatalf("the service exited:\n%s", sb.proc.Output())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := sb.c.List(ctx)
		return err
	})
}

// raw makes one request on the service's socket and returns the status and
// body.
func (sb *serviceBed) raw(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sb.socket)
	}}}
	req, err := http.NewRequest(method, "http://wirelane"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// alive checks that the service answers, that tunnel A is still up and
// that it still carries traffic.
func (sb *serviceBed) alive(t *testing.T, after string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tn, err := sb.c.Get(ctx, sb.a)
	if err != nil || tn.State != service.StateUp {
		t.Fatalf("after %s: %+v, %v; want up", after, tn, err)
	}
	select {
	case <-sb.proc.Exited():
		t.Fatalf("after %s the service exited:\n%s", after, sb.proc.Output())
	default:
	}
	if out, err := netns.Try(sb.nsA, nil, "ping", "-c", "1", "-W", "2", "10.78.0.2"); err != nil {
		t.Fatalf("after %s the tunnel carries nothing:\n%s", after, out)
	}
}

// errorBody reports whether body is the API's JSON error with a message.
func errorBody(body string) bool {
	var e struct {
		Error string `json:"error"`
	}
	return json.Unmarshal([]byte(body), &e) == nil && e.Error != ""
}

// TestServiceHostileClients: bad JSON, an oversized body, tunnel names that
// try to leave the configuration directory, unknown tunnels and methods,
// a client that never reads its event stream, and 200 concurrent
// subscribers, against the real Host with a tunnel up.
func TestServiceHostileClients(t *testing.T) {
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), sb.a)
	sb.alive(t, "up")

	for _, c := range []struct {
		method, path, body string
		code               int
	}{
		{"POST", "/v1/tunnels", `{"name": "x", "kind": `, 400},
		{"POST", "/v1/tunnels", `{"name": "x", "kind": "wireguard", "config": "[Interface]"} {"again": 1}`, 400},
		{"POST", "/v1/tunnels", `{"name": "x", "kind": "wireguard", "config": "[Interface]", "extra": 1}`, 400},
		{"POST", "/v1/tunnels", `["not", "an", "object"]`, 400},
		{"POST", "/v1/tunnels", `{"name": "x", "kind": "wireguard", "config": "` + strings.Repeat("A", 4<<20) + `"}`, 413},
		{"POST", "/v1/tunnels", `{"name": "../../etc/evil", "kind": "wireguard", "config": "[Interface]\n"}`, 400},
		{"POST", "/v1/tunnels", `{"name": "..", "kind": "wireguard", "config": "[Interface]\n"}`, 400},
		{"POST", "/v1/tunnels", `{"name": "a/b", "kind": "wireguard", "config": "[Interface]\n"}`, 400},
		{"POST", "/v1/tunnels", `{"name": "` + sb.a + `", "kind": "wireguard", "config": "[Interface]\n"}`, 409},
		{"GET", "/v1/tunnels/..%2F..%2Fetc%2Fpasswd", "", 404},
		{"GET", "/v1/tunnels/%2e%2e", "", 404},
		{"POST", "/v1/tunnels/..%2Fwireguard%2F" + sb.a + "/down", "", 404},
		{"DELETE", "/v1/tunnels/..%2F" + sb.a, "", 404},
		{"DELETE", "/v1/tunnels/" + sb.a, "", 409},
		{"GET", "/v1/tunnels/nope", "", 404},
		{"POST", "/v1/tunnels/nope/up", "", 404},
		{"PUT", "/v1/tunnels/" + sb.a, "", 405},
	} {
		code, body := sb.raw(t, c.method, c.path, c.body)
		if code != c.code || !errorBody(body) {
			short := c.body
			if len(short) > 60 {
				short = short[:60] + "..."
			}
			t.Errorf("%s %s %q: %d %s; want %d with a JSON error", c.method, c.path, short, code, body, c.code)
		}
	}
	// Nothing was written outside (or inside) the directories.
	for _, p := range []string{filepath.Join(sb.dir, "etc"), filepath.Join(sb.dir, "wireguard", "x.conf"), filepath.Join(sb.dir, "evil.conf")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("%s was created", p)
		}
	}
	sb.alive(t, "malformed requests")

	// A subscriber that never reads, and 200 that do, while the tunnel
	// goes down and up again.
	stuck, err := net.Dial("unix", sb.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	fmt.Fprintf(stuck, "GET /v1/events HTTP/1.1\r\nHost: wirelane\r\n\r\n")
	const subscribers = 200
	var wg sync.WaitGroup
	sawUp := make(chan bool, subscribers)
	subCtx, subCancel := context.WithTimeout(ctx, 40*time.Second)
	defer subCancel()
	ready := make(chan struct{}, subscribers)
	for range subscribers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			evs, err := sb.c.Events(subCtx)
			if err != nil {
				ready <- struct{}{}
				sawUp <- false
				return
			}
			defer evs.Close()
			first := true
			for evs.Next() {
				e := evs.Event()
				if first && e.Initial {
					first = false
					ready <- struct{}{}
				}
				if e.Type == service.EventTunnel && !e.Initial && e.Tunnel == sb.a && e.State == service.StateUp {
					sawUp <- true
					return
				}
			}
			if first {
				ready <- struct{}{}
			}
			sawUp <- false
		}()
	}
	for range subscribers {
		<-ready
	}
	if _, err := sb.c.Down(ctx, sb.a); err != nil {
		t.Fatalf("down with %d subscribers: %v", subscribers, err)
	}
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatalf("up with %d subscribers: %v", subscribers, err)
	}
	wg.Wait()
	close(sawUp)
	n := 0
	for ok := range sawUp {
		if ok {
			n++
		}
	}
	if n != subscribers {
		t.Errorf("%d of %d subscribers saw the tunnel come up again", n, subscribers)
	}
	sb.alive(t, fmt.Sprintf("%d subscribers and one that never reads", subscribers))
}

// TestServiceRealUsersAgainstRealHost: with the real Host, a member of the
// operators' group (--group) may list and bring the tunnel down and up
// with the CLI, but not import or delete (403); another user may do
// nothing (403 from the API; the CLI falls back and says it needs root);
// the tunnel is up and carries traffic at the end.
func TestServiceRealUsersAgainstRealHost(t *testing.T) {
	for _, tool := range []string{"groupadd", "groupdel", "useradd", "userdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (package passwd)", tool)
		}
	}
	sb := newServiceBed(t)
	group := fmt.Sprintf("wlhost-g%d", os.Getpid()%100000)
	exec.Command("groupdel", group).Run()
	if out, err := exec.Command("groupadd", group).CombinedOutput(); err != nil {
		t.Fatalf("groupadd: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("groupdel", group).Run() })
	operator := e2eUser(t, fmt.Sprintf("wlhost-o%d", os.Getpid()%100000), group)
	other := e2eUser(t, fmt.Sprintf("wlhost-x%d", os.Getpid()%100000))
	sb.restartWith(t, "--group", group)
	// The socket and the CLI where the users reach them.
	for d := sb.dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	pub := t.TempDir()
	os.Chmod(pub, 0o755)
	cli := filepath.Join(pub, "wirelane")
	b, err := os.ReadFile(filepath.Join(binDir, "wirelane"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cli, b, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(pub, "imp.conf")
	os.WriteFile(conf, []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n"), 0o644)
	as := func(cred *syscall.Credential, args ...string) (string, error) {
		cmd := exec.Command(cli, args...)
		cmd.Env = []string{"WIRELANE_SOCKET=" + sb.socket, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		cmd.Dir = pub
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), sb.a)

	if out, err := as(operator, "list"); err != nil || !strings.Contains(out, sb.a) {
		t.Errorf("operator: list: %v\n%s", err, out)
	}
	if out, err := as(operator, "down", sb.a); err != nil {
		t.Errorf("operator: down: %v\n%s", err, out)
	}
	if tn, _ := sb.c.Get(ctx, sb.a); tn.State != service.StateDown {
		t.Errorf("after the operator's down: %s", tn.State)
	}
	if out, err := as(operator, "up", sb.a); err != nil {
		t.Errorf("operator: up: %v\n%s", err, out)
	}
	if tn, _ := sb.c.Get(ctx, sb.a); tn.State != service.StateUp {
		t.Errorf("after the operator's up: %s", tn.State)
	}
	// Import and delete are root's; the operator gets the API's refusal.
	if code, body := sb.rawAs(t, operator, pub, "DELETE", "/v1/tunnels/"+sb.a); code != 403 || !errorBody(body) {
		t.Errorf("operator: DELETE: %d %s, want 403", code, body)
	}
	if code, body := sb.rawAs(t, operator, pub, "POST", "/v1/tunnels"); code != 403 || !errorBody(body) {
		t.Errorf("operator: import: %d %s, want 403", code, body)
	}
	// The CLI of a user the service refuses falls back to the foreground
	// way (docs/cli.md), which says it needs root.
	if out, err := as(other, "down", sb.a); err == nil || !strings.Contains(out, "needs root") {
		t.Errorf("another user: down: %v\n%s", err, out)
	}
	if code, body := sb.rawAs(t, other, pub, "GET", "/v1/tunnels"); code != 403 || !errorBody(body) {
		t.Errorf("another user: GET /v1/tunnels: %d %s, want 403", code, body)
	}
	sb.alive(t, "the users' requests")
}

// rawAs makes one request as another user: the raw HTTP request goes
// through ncat (which the tests already need) run with that user's
// credentials, so that the service sees them through SO_PEERCRED.
func (sb *serviceBed) rawAs(t *testing.T, cred *syscall.Credential, dir, method, path string) (int, string) {
	t.Helper()
	body := ""
	if method == "POST" {
		body = `{"name":"imp","kind":"wireguard","config":"[Interface]\n"}`
	}
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: wirelane\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", method, path, len(body), body)
	cmd := exec.Command("ncat", "-U", sb.socket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(req)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ncat as uid %d: %v\n%s", cred.Uid, err, out)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(out))), nil)
	if err != nil {
		t.Fatalf("the answer to %s %s: %v\n%s", method, path, err, out)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// e2eUser creates a system user (no home, no login), optionally in
// groups, and returns its credentials; it is deleted when the test ends.
func e2eUser(t *testing.T, name string, groups ...string) *syscall.Credential {
	t.Helper()
	args := []string{"-M", "-s", "/usr/sbin/nologin"}
	if len(groups) > 0 {
		args = append(args, "-G", strings.Join(groups, ","))
	}
	exec.Command("userdel", name).Run()
	if out, err := exec.Command("useradd", append(args, name)...).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() { exec.Command("userdel", name).Run() })
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	gids, _ := u.GroupIds()
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	for _, g := range gids {
		n, _ := strconv.Atoi(g)
		cred.Groups = append(cred.Groups, uint32(n))
	}
	return cred
}
