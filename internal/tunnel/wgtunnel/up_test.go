package wgtunnel

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"syscall"
	"testing"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// quiet returns a config for an interface no test host has, for tests
// that stop before anything changes.
func quiet(t *testing.T) *wgquick.Config {
	t.Helper()
	return &wgquick.Config{Name: "wlunittest0", Path: "/nonexistent/test.conf"}
}

func TestUpRefusesANameInUseBeforeChangingAnything(t *testing.T) {
	eng := &fakeEngine{inUse: true}
	err := Up(context.Background(), quiet(t), Options{Engine: eng})
	if err == nil || !strings.Contains(err.Error(), "in use by a running daemon") {
		t.Fatalf("err = %v, want the name reported in use", err)
	}
	if len(eng.calls) != 0 {
		t.Errorf("engine calls %q: nothing may start", eng.calls)
	}
}

func TestUpStopsAtAFailingPreUpHook(t *testing.T) {
	eng := &fakeEngine{}
	cfg := quiet(t)
	cfg.Interface.PreUp = []string{"exit 3"}
	var logged []string
	err := Up(context.Background(), cfg, Options{Engine: eng, Log: func(s string) { logged = append(logged, s) }})
	if err == nil || !strings.Contains(err.Error(), `hook "exit 3" failed`) {
		t.Fatalf("err = %v, want the hook's failure", err)
	}
	if len(eng.calls) != 0 {
		t.Errorf("engine calls %q after a failed PreUp", eng.calls)
	}
	if len(logged) != 1 || logged[0] != "exit 3" {
		t.Errorf("logged %q, want the hook", logged)
	}
}

func TestUpWithACancelledContextStartsNothing(t *testing.T) {
	eng := &fakeEngine{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Up(ctx, quiet(t), Options{Engine: eng}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if len(eng.calls) != 0 {
		t.Errorf("engine calls %q", eng.calls)
	}
}

func TestFirewallFromEnv(t *testing.T) {
	for v, want := range map[string]bool{"": false, "on": false, "off": true} {
		t.Setenv(FirewallEnv, v)
		if got, err := FirewallFromEnv(); err != nil || got != want {
			t.Errorf("%s=%q: NoFirewall %v, %v; want %v", FirewallEnv, v, got, err, want)
		}
	}
	t.Setenv(FirewallEnv, "of")
	if _, err := FirewallFromEnv(); err == nil {
		t.Errorf("a misspelt %s was accepted", FirewallEnv)
	}
}

func TestExplainUAPIError(t *testing.T) {
	port := uint16(51820)
	cfg := &wgquick.Config{}
	cfg.Interface.ListenPort = &port
	for _, tc := range []struct {
		err  string
		cfg  *wgquick.Config
		want string
	}{
		{"wgctrl: errno=-98", cfg, "ListenPort 51820 is already in use"},
		{"wgctrl: errno=-98", &wgquick.Config{}, "cannot bind the UDP socket or set FwMark"},
		{"wgctrl: errno=-22", cfg, "the daemon refused the configuration: " + syscall.EINVAL.Error()},
		{"something else", cfg, "something else"},
	} {
		if got := explainUAPIError(errors.New(tc.err), tc.cfg).Error(); !strings.Contains(got, tc.want) {
			t.Errorf("explainUAPIError(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestDeviceConfigResolvesEndpointsAndReportsTheLine(t *testing.T) {
	cfg, err := wgquick.Parse("t.conf", []byte("[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\nListenPort = 51000\n\n[Peer]\nPublicKey = xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=\nAllowedIPs = 10.0.0.2/32, fd00::2/128\nEndpoint = 192.0.2.1:51820\n"))
	if err != nil {
		t.Fatal(err)
	}
	wcfg, eps, err := DeviceConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if *wcfg.ListenPort != 51000 || len(wcfg.Peers) != 1 || len(wcfg.Peers[0].AllowedIPs) != 2 || !wcfg.ReplacePeers {
		t.Errorf("config = %+v", wcfg)
	}
	if len(eps) != 1 || eps[0] != netip.MustParseAddrPort("192.0.2.1:51820") {
		t.Errorf("endpoints = %v", eps)
	}
	cfg.Peers[0].Endpoint = "no-such-host.invalid:1"
	cfg.Peers[0].EndpointLine = 8
	_, _, err = DeviceConfig(context.Background(), cfg)
	var pe *wgquick.ParseError
	if !errors.As(err, &pe) || pe.Line != 8 {
		t.Errorf("err = %v, want a ParseError at line 8", err)
	}
}

// TestUpReportsAnUnknownTableAtItsLine checks that a Table name missing
// from /etc/iproute2/rt_tables, found only at up time, is reported as
// FILE:LINE before anything changes.
func TestUpReportsAnUnknownTableAtItsLine(t *testing.T) {
	cfg, err := wgquick.Parse("/nonexistent/wlunittest0.conf", []byte("[Interface]\nAddress = 10.0.0.1/24\nTable = nosuchtable\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Name = "wlunittest0"
	eng := &fakeEngine{}
	err = Up(context.Background(), cfg, Options{Engine: eng})
	want := `/nonexistent/wlunittest0.conf:3: Table: routing table "nosuchtable" is not a number and not named in /etc/iproute2/rt_tables`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Up = %v, want %q", err, want)
	}
	if len(eng.calls) != 0 {
		t.Errorf("engine calls %q: nothing may start", eng.calls)
	}
}
