package ovpntunnel

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
)

func TestWarningsSummary(t *testing.T) {
	ws := []config.Diagnostic{{Line: 3, Directive: "persist-key"}, {Line: 4, Directive: "up", Message: "scripts are not run"},
		{Line: 5, Directive: "down", Message: "scripts are not run"}, {Line: 6, Directive: "script-security"}, {Line: 7, Directive: "up"}}
	got := warningsSummary("p.ovpn", ws, DNSAuto)
	want := []string{"p.ovpn: ignored or not fully honoured: 4 directives (persist-key, up, down, script-security); run with -v for details",
		"up/down scripts are not run; such scripts usually set the pushed DNS servers, which wirelane applies itself (--dns)"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := warningsSummary("p.ovpn", ws[:1], DNSOff); len(got) != 1 || !strings.Contains(got[0], "1 directive (persist-key)") {
		t.Fatalf("one directive: %q", got)
	}
	if got := warningsSummary("p.ovpn", ws[1:2], DNSOff); len(got) != 2 || !strings.Contains(got[1], "--dns=off leaves them unapplied") {
		t.Fatalf("--dns=off: %q", got)
	}
	var many []config.Diagnostic
	for _, d := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"} {
		many = append(many, config.Diagnostic{Directive: d})
	}
	if got := warningsSummary("p.ovpn", many, DNSAuto); len(got) != 1 || !strings.Contains(got[0], "10 directives (a, b, c, d, e, f, g, h, and 2 more)") {
		t.Fatalf("many: %q", got)
	}
	if warningsSummary("p.ovpn", nil, DNSAuto) != nil {
		t.Fatal("a summary without warnings")
	}
}

// Connect prints the summary without -v, and every warning with its line
// with -v; each exactly once.
func TestConnectShowsIgnoredDirectives(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.ovpn")
	// No credentials and no terminal: Connect stops right after the
	// warnings, before any network.
	os.WriteFile(file, []byte("client\nremote 192.0.2.1\nscript-security 2\nup /etc/openvpn/update-resolv-conf\ndown /etc/openvpn/update-resolv-conf\nauth-user-pass\n<ca>\n"+testpki.FixtureCA+"</ca>\n"), 0o600)
	noTerminal(t)
	errOut := capture(t)
	Connect(ConnectOptions{File: file, MTU: 1500})
	out := errOut.String()
	if strings.Count(out, "ignored or not fully honoured: 3 directives (script-security, up, down); run with -v for details") != 1 ||
		strings.Count(out, "up/down scripts are not run") != 1 {
		t.Fatalf("stderr:\n%s", out)
	}
	errOut.Reset()
	Connect(ConnectOptions{File: file, MTU: 1500, Verbose: true})
	out = errOut.String()
	if !strings.Contains(out, "p.ovpn:4: up: scripts are not run") || strings.Contains(out, "run with -v") {
		t.Fatalf("-v stderr:\n%s", out)
	}
}

func TestPhaseLines(t *testing.T) {
	fail := errors.New("nosuch.invalid: no such host")
	for _, c := range []struct {
		e    client.Event
		want string
	}{
		{client.Event{State: client.StateResolve, Detail: "resolving nosuch.invalid"}, "resolving nosuch.invalid"},
		{client.Event{State: client.StateResolve, Detail: "resolving nosuch.invalid failed", Err: fail},
			"resolving nosuch.invalid failed: nosuch.invalid: no such host"},
		{client.Event{State: client.StateConnecting, Remote: "192.0.2.1:1194", Detail: "connection failed", Err: client.ErrTimeout},
			"192.0.2.1:1194: connection failed: client: handshake timed out"},
		{client.Event{State: client.StateWait, Detail: "waiting for the server's reply"}, ""},
		{client.Event{State: client.StateWait, Detail: "no reply from the server yet (10 s; giving up after 1m0s)"}, "no reply from the server yet (10 s; giving up after 1m0s)"},
		{client.Event{State: client.StateGetConfig, Detail: "requesting options"}, ""},
		{client.Event{State: client.StateGetConfig, Detail: "pushed options: address 10.8.0.2/24"}, "pushed options: address 10.8.0.2/24"},
		{client.Event{State: client.StateExiting, Detail: "no remote resolved", Err: fmt.Errorf("%w: no remote resolved", client.ErrGaveUp)}, "giving up: no remote resolved"},
		{client.Event{State: client.StateExiting, Detail: "connection failed", Err: client.ErrAuthFailed}, ""},
	} {
		if got := phaseLine(c.e); got != c.want {
			t.Errorf("%s %q: got %q, want %q", c.e.State, c.e.Detail, got, c.want)
		}
	}
}

// Every event reaches OnEvent with the time since the attempt began, and
// the progress line carries it.
func TestPhasesTimesAndHook(t *testing.T) {
	errOut := capture(t)
	var got []client.Event
	ph := newPhases(func(e client.Event) { got = append(got, e) })
	ph.start = time.Now().Add(-1500 * time.Millisecond)
	ph.event(client.Event{State: client.StateResolve, Time: time.Now(), Detail: "resolving vpn.example"})
	ph.report(client.StateConnected, "connected", nil)
	if len(got) != 2 || got[0].Elapsed < 1500*time.Millisecond || got[1].State != client.StateConnected {
		t.Fatalf("%+v", got)
	}
	if !strings.Contains(errOut.String(), "ovpn: [ 1.50s] resolving vpn.example\n") {
		t.Fatalf("stderr %q", errOut)
	}
}

func TestRoutesLine(t *testing.T) {
	gw, gw6 := netip.MustParseAddr("10.8.0.1"), netip.MustParseAddr("fd42::1")
	p := routePlan{routes: []routeSpec{{netip.MustParsePrefix("10.98.0.0/24"), gw}, {redirect4[0], gw}, {redirect4[1], gw},
		{redirect6[0], gw6}, {netip.MustParsePrefix("2001:db8::/48"), netip.Addr{}}}}
	want := "routes added (5): 10.98.0.0/24, 0.0.0.0/1, 128.0.0.0/1 via 10.8.0.1; 2000::/4 via fd42::1; 2001:db8::/48 on-link; default route through the tunnel (redirect-gateway def1)"
	if got := routesLine(p, redirect{v4: true, line: "redirect-gateway def1"}); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	for i := 0; i < 5; i++ {
		p.routes = append(p.routes, routeSpec{netip.MustParsePrefix("10.99.0.0/24"), gw})
	}
	if got := routesLine(p, redirect{}); !strings.HasSuffix(got, "and 4 more") || !strings.HasPrefix(got, "routes added (10): ") {
		t.Errorf("many: %s", got)
	}
	if got := routesLine(routePlan{}, redirect{}); got != "no routes pushed" {
		t.Errorf("none: %s", got)
	}
}

// ConnectOptions.Context stops Connect as Ctrl-C does, here while it
// waits for a server that never answers; the events end with EXITING.
func TestConnectStopsWithItsContext(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.ovpn")
	os.WriteFile(file, []byte("client\nremote 127.0.0.1 9 udp\n<auth-user-pass>\nu\np\n</auth-user-pass>\n<ca>\n"+testCA(t)+"</ca>\n"), 0o600)
	errOut := capture(t)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var states []client.State
	done := make(chan int, 1)
	go func() {
		done <- Connect(ConnectOptions{File: file, MTU: 1500, Context: ctx, OnEvent: func(e client.Event) {
			mu.Lock()
			states = append(states, e.State)
			mu.Unlock()
			if e.State == client.StateWait {
				cancel()
			}
		}})
	}()
	select {
	case code := <-done:
		if code != 1 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("Connect did not stop:\n%s", errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) < 3 || states[0] != client.StateConnecting || states[len(states)-1] != client.StateExiting {
		t.Fatalf("states %v", states)
	}
}

// testCA is a throw-away CA certificate (PEM).
func testCA(t *testing.T) string {
	return string(testpki.New(t, "Wirelane Context CA").CAPEM)
}
