package service

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestListAndGetShowTheIssuesFields(t *testing.T) {
	ts := startService(t, NewFakeHost(), Config{}, roleRoot)
	code, body, hdr := ts.do("GET", "/v1/tunnels", "")
	if code != http.StatusOK || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /v1/tunnels: %d %s %s", code, hdr.Get("Content-Type"), body)
	}
	var raw []map[string]any
	raw = decodeJSON[[]map[string]any](t, body)
	if len(raw) != 2 || raw[0]["name"] != "ovs" || raw[1]["name"] != "wg0" {
		t.Fatalf("list: %s", body)
	}
	for _, f := range []string{"name", "kind", "state", "addresses", "peers", "rx_bytes", "tx_bytes"} {
		if _, ok := raw[1][f]; !ok {
			t.Errorf("tunnel has no %q field: %s", f, body)
		}
	}
	if _, ok := raw[1]["error"]; ok {
		t.Errorf("a tunnel that has not failed carries an error field")
	}
	if ps, _ := raw[0]["peers"].([]any); ps == nil {
		t.Errorf("a tunnel without peers must show peers: [] (not null): %s", body)
	}
	peers := raw[1]["peers"].([]any)
	p0 := peers[0].(map[string]any)
	if p0["name"] != "Alice's phone" || p0["endpoint"] != "192.0.2.1:51820" || p0["public_key"] != FakeKeyA {
		t.Errorf("peer 0: %v", p0)
	}
	if _, ok := p0["latest_handshake"]; ok {
		t.Errorf("a peer that never shook hands has a latest_handshake: %v", p0)
	}
	for _, secret := range []string{"private", "preshared", "password"} {
		if strings.Contains(strings.ToLower(string(body)), secret) {
			t.Errorf("the answer mentions %q: %s", secret, body)
		}
	}

	code, body, _ = ts.do("GET", "/v1/tunnels/wg0", "")
	tun := decodeJSON[Tunnel](t, body)
	if code != http.StatusOK || tun.Name != "wg0" || tun.Kind != KindWireGuard || tun.State != StateDown || len(tun.Peers) != 2 {
		t.Errorf("GET /v1/tunnels/wg0: %d %s", code, body)
	}
}

func TestErrorAnswersAreJSONWithHonestCodes(t *testing.T) {
	h := NewFakeHost()
	ts := startService(t, h, Config{MaxBody: 4096}, roleRoot)
	h.Up(t.Context(), "ovs")
	huge := `{"name":"big","kind":"wireguard","config":"` + strings.Repeat("x", 5000) + `"}`
	for _, c := range []struct {
		name, method, path, body string
		code                     int
		want                     string // in the error message
		line                     int
	}{
		{"an unknown tunnel is 404", "GET", "/v1/tunnels/nope", "", 404, `no tunnel named "nope"`, 0},
		{"up of an unknown tunnel is 404", "POST", "/v1/tunnels/nope/up", "", 404, "no such tunnel", 0},
		{"an invalid name is 404", "GET", "/v1/tunnels/a%20b", "", 404, "no such tunnel", 0},
		{"an unknown action is 404", "POST", "/v1/tunnels/wg0/explode", "", 404, "no such endpoint", 0},
		{"a path outside the API is 404", "GET", "/v2/tunnels", "", 404, "under /v1/", 0},
		{"GET on up is 405", "GET", "/v1/tunnels/wg0/up", "", 405, "allowed: POST", 0},
		{"PUT on the list is 405", "PUT", "/v1/tunnels", "", 405, "allowed: GET, POST", 0},
		{"POST on a tunnel is 405", "POST", "/v1/tunnels/wg0", "", 405, "allowed: GET, DELETE", 0},
		{"POST on events is 405", "POST", "/v1/events", "", 405, "allowed: GET", 0},
		{"malformed JSON is 400", "POST", "/v1/tunnels", `{"name": "x",`, 400, "malformed", 0},
		{"not an object is 400", "POST", "/v1/tunnels", `[1,2]`, 400, "malformed request", 0},
		{"an unknown field is 400", "POST", "/v1/tunnels", `{"name":"x","kind":"wireguard","config":"a","private_key":"k"}`, 400, "unknown field", 0},
		{"two JSON values are 400", "POST", "/v1/tunnels", `{"name":"x","kind":"wireguard","config":"a"} {}`, 400, "more than one", 0},
		{"an empty body is 400", "POST", "/v1/tunnels", ``, 400, "empty request body", 0},
		{"a huge body is 413", "POST", "/v1/tunnels", huge, 413, "larger than 4096 bytes", 0},
		{"a bad name is 400", "POST", "/v1/tunnels", `{"name":"../etc","kind":"wireguard","config":"a"}`, 400, "invalid tunnel name", 0},
		{"a bad kind is 400", "POST", "/v1/tunnels", `{"name":"x","kind":"ipsec","config":"a"}`, 400, "invalid kind", 0},
		{"an empty config is 400", "POST", "/v1/tunnels", `{"name":"x","kind":"wireguard","config":" "}`, 400, "config is empty", 0},
		{"an invalid config is 400 with its line", "POST", "/v1/tunnels", `{"name":"x","kind":"wireguard","config":"[Interface]\nok\nbad\n"}`, 400, "x.conf:3: this line is bad", 3},
		{"importing an existing name is 409", "POST", "/v1/tunnels", `{"name":"wg0","kind":"wireguard","config":"a"}`, 409, "already exists", 0},
		{"deleting an up tunnel is 409", "DELETE", "/v1/tunnels/ovs", "", 409, "not down", 0},
		{"deleting an unknown tunnel is 404", "DELETE", "/v1/tunnels/nope", "", 404, "no such tunnel", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body, hdr := ts.do(c.method, c.path, c.body)
			if code != c.code {
				t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, code, c.code, body)
			}
			if hdr.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type %q", hdr.Get("Content-Type"))
			}
			e := decodeJSON[apiError](t, body)
			if !strings.Contains(e.Error, c.want) || e.Line != c.line {
				t.Errorf("error %+v, want %q with line %d", e, c.want, c.line)
			}
			if code == 405 && hdr.Get("Allow") == "" {
				t.Errorf("405 without an Allow header")
			}
		})
	}
}

func TestUpDownImportDelete(t *testing.T) {
	h := NewFakeHost()
	ts := startService(t, h, Config{}, roleRoot)
	code, body, _ := ts.do("POST", "/v1/tunnels/wg0/up", "")
	if tun := decodeJSON[Tunnel](t, body); code != 200 || tun.State != StateUp || tun.ListenPort != 51820 {
		t.Fatalf("up: %d %s", code, body)
	}
	code, body, _ = ts.do("POST", "/v1/tunnels/wg0/up", "")
	if code != 200 {
		t.Errorf("up of an up tunnel: %d %s", code, body)
	}
	code, body, _ = ts.do("POST", "/v1/tunnels/wg0/down", "")
	if tun := decodeJSON[Tunnel](t, body); code != 200 || tun.State != StateDown {
		t.Fatalf("down: %d %s", code, body)
	}

	h.FailUp("ovs", "cannot bind 0.0.0.0:1194: address already in use")
	code, body, _ = ts.do("POST", "/v1/tunnels/ovs/up", "")
	if e := decodeJSON[apiError](t, body); code != 500 || !strings.Contains(e.Error, "address already in use") {
		t.Errorf("failed up: %d %s", code, body)
	}
	_, body, _ = ts.do("GET", "/v1/tunnels/ovs", "")
	if tun := decodeJSON[Tunnel](t, body); tun.State != StateFailed || !strings.Contains(tun.Error, "address already in use") {
		t.Errorf("a failed tunnel shows state failed with its error: %s", body)
	}

	code, body, hdr := ts.do("POST", "/v1/tunnels", `{"name":"office","kind":"openvpn-client","config":"client\nremote vpn.example 1194\n"}`)
	if tun := decodeJSON[Tunnel](t, body); code != 201 || tun.Name != "office" || tun.State != StateDown || hdr.Get("Location") != "/v1/tunnels/office" {
		t.Fatalf("import: %d %s %v", code, body, hdr)
	}
	code, body, _ = ts.do("DELETE", "/v1/tunnels/office", "")
	if code != 204 || len(body) != 0 {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, _, _ := ts.do("GET", "/v1/tunnels/office", ""); code != 404 {
		t.Errorf("deleted tunnel still there: %d", code)
	}
	code, body, _ = ts.do("POST", "/v1/tunnels/wg0/auth", `{"username":"u","password":"p"}`)
	if code != 204 || len(h.Answers()) != 1 || h.Answers()[0].Password != "p" {
		t.Errorf("auth answer: %d %s", code, body)
	}
}

func TestRolesGetExactlyTheirRights(t *testing.T) {
	all := []struct{ method, path, body string }{
		{"GET", "/v1/tunnels", ""},
		{"GET", "/v1/tunnels/wg0", ""},
		{"GET", "/metrics", ""},
		{"POST", "/v1/tunnels/wg0/up", ""},
		{"POST", "/v1/tunnels/wg0/down", ""},
		{"POST", "/v1/tunnels/wg0/auth", `{"response":"123456"}`},
		{"POST", "/v1/tunnels", `{"name":"new","kind":"wireguard","config":"[Interface]"}`},
		{"DELETE", "/v1/tunnels/new", ""},
	}
	rootOnly := map[string]bool{"POST /v1/tunnels": true, "DELETE /v1/tunnels/new": true}
	for _, r := range []struct {
		name string
		role role
	}{{"nobody", roleNone}, {"metrics-only", roleMetrics}, {"operator", roleOperator}, {"root", roleRoot}} {
		t.Run(r.name, func(t *testing.T) {
			ts := startService(t, NewFakeHost(), Config{}, r.role)
			for _, c := range all {
				code, body, _ := ts.do(c.method, c.path, c.body)
				allowed := r.role == roleRoot || r.role == roleOperator && !rootOnly[c.method+" "+c.path]
				if allowed && code >= 300 {
					t.Errorf("%s %s: %d %s, want success", c.method, c.path, code, body)
				}
				if !allowed {
					e := decodeJSON[apiError](t, body)
					if code != 403 || !strings.Contains(e.Error, "permission denied") {
						t.Errorf("%s %s: %d %s, want 403 with a clear error", c.method, c.path, code, body)
					}
				}
			}
			resp, err := ts.hc.Get("http://wirelane/v1/events")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close() // a granted stream does not end by itself: only the status is read
			if want := r.role >= roleOperator; want != (resp.StatusCode == 200) {
				t.Errorf("GET /v1/events as %s: %s", r.name, resp.Status)
			}
		})
	}
}

func TestRunServesUntilCancelled(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "sub", "wirelane.sock")
	s := New(NewFakeHost(), Config{Socket: socket})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitFor(t, "the socket", func() bool { _, err := os.Stat(socket); return err == nil })
	if fi, _ := os.Stat(socket); fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode %v, want 0666 (callers are checked by their credentials)", fi.Mode().Perm())
	}
	resp, err := unixClient(socket).Get("http://wirelane/v1/tunnels")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %s", resp.Status)
	}
	// A second service on the same socket is refused.
	if _, err := Listen(socket); !errors.Is(err, ErrSocketInUse) {
		t.Errorf("second Listen: %v, want ErrSocketInUse", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Errorf("the socket outlives the service: %v", err)
	}
	// A stale socket file (its service died) is replaced.
	l, _ := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	l.SetUnlinkOnClose(false)
	l.Close()
	l2, err := Listen(socket)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l2.Close()
}

// TestListenRaceHasOneWinner starts two listeners on one path at once: one
// gets the socket, the other is told it is in use (neither takes over the
// other's socket, as a bind-then-replace would).
func TestListenRaceHasOneWinner(t *testing.T) {
	for i := 0; i < 20; i++ {
		socket := filepath.Join(t.TempDir(), "wirelane.sock")
		errs := make(chan error, 2)
		ls := make(chan net.Listener, 2)
		for j := 0; j < 2; j++ {
			go func() {
				l, err := Listen(socket)
				if err == nil {
					ls <- l
				}
				errs <- err
			}()
		}
		var won, inUse int
		for j := 0; j < 2; j++ {
			switch err := <-errs; {
			case err == nil:
				won++
			case errors.Is(err, ErrSocketInUse):
				inUse++
			default:
				t.Fatalf("Listen: %v", err)
			}
		}
		if won != 1 || inUse != 1 {
			t.Fatalf("round %d: %d listeners won, %d were told in use; want 1 and 1", i, won, inUse)
		}
		l := <-ls
		if fi, err := os.Stat(socket); err != nil || fi.Mode().Perm() != 0o666 {
			t.Fatalf("socket after the race: %v %v", fi, err)
		}
		l.Close()
		if _, err := os.Stat(socket); !os.IsNotExist(err) {
			t.Fatalf("socket left after Close: %v", err)
		}
	}
}
