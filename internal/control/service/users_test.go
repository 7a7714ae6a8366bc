package service

// Permissions with real users over a real socket: root (this test), a
// member of the operators' group and another user, each a subprocess (this
// test binary again, as that user) that makes one request.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// clientEnv makes the test binary a one-request client (see TestMain).
const clientEnv = "WIRELANE_SERVICE_TEST_CLIENT"

func TestMain(m *testing.M) {
	if socket := os.Getenv(clientEnv); socket != "" {
		// Arguments: METHOD PATH pairs after the last "--".
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
			}
		}
		for i := 0; i+1 < len(args); i += 2 {
			if st := oneRequest(socket, args[i], args[i+1]); st != 0 {
				os.Exit(st)
			}
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// oneRequest makes one request and prints {"code": STATUS, "body": BODY}
// on a line (for the event stream: the status and its first line).
func oneRequest(socket, method, path string) int {
	var body io.Reader
	if method == "POST" && path == "/v1/tunnels" {
		body = strings.NewReader(`{"name":"imp","kind":"wireguard","config":"[Interface]"}`)
	}
	req, err := http.NewRequest(method, "http://wirelane"+path, body)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	resp, err := unixClient(socket).Do(req)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer resp.Body.Close()
	var b []byte
	if path == "/v1/events" && resp.StatusCode == 200 {
		b, _ = bufio.NewReader(resp.Body).ReadBytes('\n')
	} else {
		b, _ = io.ReadAll(resp.Body)
	}
	line, _ := json.Marshal(result{resp.StatusCode, string(b)})
	fmt.Printf("%s\n", line)
	return 0
}

type result struct {
	Code int    `json:"code"`
	Body string `json:"body"`
}

// testUser creates a system user (no home, no login) and returns its
// credentials; it is deleted when the test ends.
func testUser(t *testing.T, name string, groups ...string) *syscall.Credential {
	t.Helper()
	args := []string{"-M", "-s", "/usr/sbin/nologin"}
	if len(groups) > 0 {
		args = append(args, "-G", strings.Join(groups, ","))
	}
	exec.Command("userdel", name).Run() // left by an interrupted run
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

func TestPermissionsRealUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a group and two users (groupadd, useradd) and runs clients as them")
	}
	for _, tool := range []string{"groupadd", "groupdel", "useradd", "userdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (package passwd)", tool)
		}
	}
	// A group of its own, so that the machine's real wirelane group (if
	// any) is never touched; the service is told its name.
	group := fmt.Sprintf("wlsvc-t%d", os.Getpid()%100000)
	exec.Command("groupdel", group).Run()
	if out, err := exec.Command("groupadd", group).CombinedOutput(); err != nil {
		t.Fatalf("groupadd: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("groupdel", group).Run() })
	operator := testUser(t, fmt.Sprintf("wlsvc-op%d", os.Getpid()%100000), group)
	other := testUser(t, fmt.Sprintf("wlsvc-ot%d", os.Getpid()%100000))

	// The test binary, where the other users may run it, and the socket,
	// where they may reach it.
	dir, err := os.MkdirTemp("", "wirelane-perm-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client")
	src, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	h := NewFakeHost()
	ts := startService(t, h, Config{Socket: filepath.Join(dir, "run", "wirelane.sock"), Group: group}, -1)

	// as runs one client process as cred (nil: root, this process's
	// user) making the requests rs in order.
	type req struct{ method, path string }
	as := func(cred *syscall.Credential, rs ...req) []result {
		t.Helper()
		args := []string{"--"}
		for _, r := range rs {
			args = append(args, r.method, r.path)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{clientEnv + "=" + ts.socket, "PATH=/usr/bin:/bin"}
		if cred != nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		}
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("client %v: %v: %s", cmd.Args, err, out)
		}
		var res []result
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			res = append(res, decodeJSON[result](t, []byte(l)))
		}
		if len(res) != len(rs) {
			t.Fatalf("client %v: %d answers for %d requests: %s", cmd.Args, len(res), len(rs), out)
		}
		return res
	}
	reads := []req{{"GET", "/v1/tunnels"}, {"GET", "/v1/tunnels/wg0"}, {"GET", "/metrics"}, {"GET", "/v1/events"}}
	operates := []req{{"POST", "/v1/tunnels/wg0/up"}, {"POST", "/v1/tunnels/wg0/down"}}
	owns := []req{{"POST", "/v1/tunnels"}, {"DELETE", "/v1/tunnels/imp"}}
	check := func(who string, cred *syscall.Credential, rs []req, allowed bool) {
		t.Helper()
		for i, r := range as(cred, rs...) {
			switch {
			case allowed && r.Code >= 300:
				t.Errorf("%s: %s %s = %d %s, want success", who, rs[i].method, rs[i].path, r.Code, r.Body)
			case !allowed && (r.Code != 403 || !strings.Contains(r.Body, "permission denied")):
				t.Errorf("%s: %s %s = %d %s, want 403 with a clear error", who, rs[i].method, rs[i].path, r.Code, r.Body)
			}
		}
	}
	check("root", nil, reads, true)
	check("root", nil, operates, true)
	check("root", nil, owns, true)
	check("operator", operator, reads, true)
	check("operator", operator, operates, true)
	check("operator", operator, owns, false)
	check("other", other, reads, false)
	check("other", other, operates, false)
	check("other", other, owns, false)
	if r := as(other, req{"GET", "/v1/tunnels"}); !strings.Contains(r[0].Body, group) {
		t.Errorf("the refusal does not name the group to join: %s", r[0].Body)
	}
	if r := as(operator, req{"POST", "/v1/tunnels"}); !strings.Contains(r[0].Body, "only root") {
		t.Errorf("the operator's refusal to import does not say only root may: %s", r[0].Body)
	}
}

func TestRoleForRootAndUnknownGroup(t *testing.T) {
	if roleFor(0, 0, "no-such-group-wl") != roleRoot {
		t.Error("uid 0 is not root")
	}
	if r := roleFor(65534, 65534, "no-such-group-wl"); r != roleNone {
		t.Errorf("nobody with a missing group: %v", r)
	}
}
