package ovpntunnel

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseControlRequest(t *testing.T) {
	for _, tc := range []struct {
		line               string
		dry, runtime, fail bool
	}{
		{`{"reload":true}`, false, false, false},
		{`{"reload":true,"dry_run":true}` + "\n", true, false, false},
		{`{"runtime":true}`, false, true, false},
		{`{"runtime":true,"reload":true}`, false, false, true},
		{`{"runtime":true,"dry_run":true}`, false, false, true},
		{`{"reload":false}`, false, false, true},
		{`{"reload":true,"rm":"-rf"}`, false, false, true},
		{`reload`, false, false, true},
		{``, false, false, true},
	} {
		req, err := parseControlRequest([]byte(tc.line))
		if (err != nil) != tc.fail || (err == nil && (req.DryRun != tc.dry || req.Runtime != tc.runtime)) {
			t.Errorf("%q: %+v, %v", tc.line, req, err)
		}
	}
}

func FuzzParseControlRequest(f *testing.F) {
	for _, s := range []string{`{"reload":true}`, `{"reload":true,"dry_run":true}`, `{}`, `[1]`, `{"reload":1}`, "\x00"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := parseControlRequest(b)
		if err == nil && req.Reload == req.Runtime {
			t.Fatalf("%q accepted as neither or both of reload and runtime", b)
		}
	})
}

// The control socket answers a request with the tunnel's plan, and a
// Reloader no tunnel listens on says so.
func TestControlSocketAndReloader(t *testing.T) {
	old := StatusDir
	StatusDir = t.TempDir()
	t.Cleanup(func() { StatusDir = old })
	r := NewReloader()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.Reload(ctx, false); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no tunnel: %v", err)
	}
	reqs, detach := r.attach()
	go func() {
		for req := range reqs {
			req.reply <- reloadReply{plan: &Plan{Lines: []string{"route: added 10.1.0.0/16"}, DryRun: req.dry}}
		}
	}()
	cs, err := openControl(controlPath(), r)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.close()
	if err := (&statusPublisher{path: filepath.Join(StatusDir, "ovpn-1.json"), snapshot: func() TunnelStatus {
		return TunnelStatus{Kind: KindServer, Interface: "tun7", Config: "/etc/wirelane/openvpn-server/office.ovpn", Control: cs.path}
	}}).write(); err != nil {
		t.Fatal(err)
	}
	// The status file (this process, alive) is found by the file name.
	p, st, err := ReloadRunning(ctx, "office", true)
	if err != nil || !p.DryRun || strings.Join(p.Lines, "") != "route: added 10.1.0.0/16" || st.Interface != "tun7" {
		t.Fatalf("ReloadRunning: %+v %+v %v", p, st, err)
	}
	// The runtime gauges of this process (the socket's).
	if rt, err := RuntimeOf(ctx, st.Control); err != nil || rt.Goroutines == 0 || rt.Stacks == 0 { // no collection yet: HeapLive may be 0
		t.Errorf("RuntimeOf: %+v, %v", rt, err)
	}
	if _, _, err := ReloadRunning(ctx, "nosuch", false); !errors.Is(err, ErrNotRunning) {
		t.Errorf("an unknown tunnel: %v", err)
	}
	detach()
	if _, err := r.Reload(ctx, false); !errors.Is(err, ErrNotRunning) {
		t.Errorf("after detach: %v", err)
	}
}
