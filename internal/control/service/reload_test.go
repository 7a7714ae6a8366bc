package service

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// reloadHost is the fake host with a Reloader: it records the requests
// and answers from its table (a stand-in for the tunnel library, which
// the end-to-end tests run for real).
type reloadHost struct {
	*FakeHost
	mu   sync.Mutex
	reqs []string // "NAME dry" or "NAME", guarded by mu
}

func (h *reloadHost) Reload(ctx context.Context, name string, dry bool) (ReloadResult, error) {
	h.mu.Lock()
	h.reqs = append(h.reqs, fmt.Sprintf("%s %v", name, dry))
	h.mu.Unlock()
	switch name {
	case "wg0":
		return ReloadResult{Tunnel: name, DryRun: dry, Changes: []string{"add address 10.80.0.1/24"}}, nil
	case "same":
		return ReloadResult{Tunnel: name}, nil
	case "broken":
		return ReloadResult{}, &ConfigError{File: "/etc/wireguard/broken.conf", Line: 7, Msg: "bad AllowedIPs"}
	case "down":
		return ReloadResult{}, fmt.Errorf("%q is down: %w", name, ErrBusy)
	}
	return ReloadResult{}, fmt.Errorf("%q: %w", name, ErrNotFound)
}

func TestReloadEndpoint(t *testing.T) {
	h := &reloadHost{FakeHost: NewFakeHost()}
	ts := startService(t, h, Config{}, roleOperator)
	for _, c := range []struct {
		path, body string
		code       int
		want       string
	}{
		{"/v1/tunnels/wg0/reload", "", 200, `{"tunnel":"wg0","changes":["add address 10.80.0.1/24"]}`},
		{"/v1/tunnels/wg0/reload", `{"dry_run":true}`, 200, `{"tunnel":"wg0","dry_run":true,"changes":["add address 10.80.0.1/24"]}`},
		{"/v1/tunnels/same/reload", "", 200, `{"tunnel":"same","changes":[]}`},
		{"/v1/tunnels/broken/reload", "", 400, `"line":7`},
		{"/v1/tunnels/down/reload", "", 409, "is down"},
		{"/v1/tunnels/nosuch/reload", "", 404, "no such tunnel"},
		{"/v1/tunnels/wg0/reload", `{"dry_run":"yes"}`, 400, ""},
		{"/v1/tunnels/wg0/reload", `{"dry":true}`, 400, ""},
	} {
		code, body, _ := ts.do("POST", c.path, c.body)
		if code != c.code || !strings.Contains(string(body), c.want) {
			t.Errorf("POST %s %s: %d %s, want %d with %s", c.path, c.body, code, body, c.code, c.want)
		}
	}
	if code, _, hdr := ts.do("GET", "/v1/tunnels/wg0/reload", ""); code != 405 || hdr.Get("Allow") != "POST" {
		t.Errorf("GET reload: %d %v", code, hdr)
	}
	h.mu.Lock()
	got := strings.Join(h.reqs, ",")
	h.mu.Unlock()
	if want := "wg0 false,wg0 true,same false,broken false,down false,nosuch false"; got != want {
		t.Errorf("the host got %s, want %s", got, want)
	}
	// A host without Reloader: 501; a caller without rights: 403.
	if code, _, _ := startService(t, NewFakeHost(), Config{}, roleOperator).do("POST", "/v1/tunnels/wg0/reload", ""); code != 501 {
		t.Errorf("reload without a Reloader: %d", code)
	}
	if code, _, _ := startService(t, h, Config{}, roleMetrics).do("POST", "/v1/tunnels/wg0/reload", ""); code != 403 {
		t.Errorf("reload by a metrics-only caller: %d", code)
	}
}
