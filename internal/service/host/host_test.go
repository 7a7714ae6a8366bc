package host

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
)

// noEngine is an Engine with no device running (tests that never bring a
// tunnel up).
type noEngine struct{}

func (noEngine) Start(ctx context.Context, name string) error { return errors.New("no engine") }
func (noEngine) Device(name string) (*wgtypes.Device, error) {
	return nil, fs.ErrNotExist
}
func (noEngine) Devices() ([]*wgtypes.Device, error)             { return nil, nil }
func (noEngine) Configure(name string, cfg wgtypes.Config) error { return errors.New("no engine") }
func (noEngine) Stopped(name string, d time.Duration)            {}
func (noEngine) InUse(name string) bool                          { return false }
func (noEngine) Close() error                                    { return nil }

const (
	testPriv = "yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk="
	testPub  = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
)

const goodConf = `[Interface]
PrivateKey = ` + testPriv + `
Address = 10.0.0.1/24

[Peer]
# Name = laptop
PublicKey = ` + testPub + `
AllowedIPs = 10.0.0.2/32
`

const goodGateway = `[interface]
private_key = "` + testPriv + `"
addresses = ["10.90.0.1/24"]

[[site]]
name = "branch"
public_key = "` + testPub + `"
networks = ["10.20.0.0/16"]
`

// testHost returns a Host over fresh directories and the events it
// publishes.
func testHost(t *testing.T) (*Host, Dirs, *events) {
	t.Helper()
	root := t.TempDir()
	d := Dirs{
		WireGuard:      filepath.Join(root, "wireguard"),
		Gateways:       filepath.Join(root, "wirelane"),
		OpenVPNClients: filepath.Join(root, "wirelane", "openvpn-client"),
		OpenVPNServers: filepath.Join(root, "wirelane", "openvpn-server"),
	}
	os.MkdirAll(d.WireGuard, 0o700)
	h := New(Config{Dirs: d, Engine: noEngine{}, UAPIDir: filepath.Join(root, "uapi"), Interval: 20 * time.Millisecond})
	ev := &events{}
	stop := h.Watch(ev.add)
	t.Cleanup(stop)
	return h, d, ev
}

type events struct {
	mu  sync.Mutex
	evs []service.Event
}

func (e *events) add(ev service.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}

// wait returns the first event matching ok, waiting up to 2 s for it.
func (e *events) wait(t *testing.T, what string, ok func(service.Event) bool) service.Event {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		e.mu.Lock()
		for _, ev := range e.evs {
			if ok(ev) {
				e.mu.Unlock()
				return ev
			}
		}
		e.mu.Unlock()
	}
	t.Fatalf("no event: %s", what)
	return service.Event{}
}

func TestImportStoresAValidFileWithMode0600(t *testing.T) {
	h, d, ev := testHost(t)
	for _, req := range []service.ImportRequest{
		{Name: "wg1", Kind: service.KindWireGuard, Config: goodConf},
		{Name: "gw1", Kind: service.KindGateway, Config: goodGateway},
	} {
		if err := h.Import(context.Background(), req); err != nil {
			t.Fatalf("%s: %v", req.Name, err)
		}
		ev.wait(t, "tunnels added "+req.Name, func(e service.Event) bool {
			return e.Type == service.EventTunnels && e.Change == service.ChangeAdded && e.Tunnel == req.Name && e.Status != nil && e.Status.State == service.StateDown
		})
	}
	for _, p := range []string{filepath.Join(d.WireGuard, "wg1.conf"), filepath.Join(d.Gateways, "gw1.toml")} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", p, fi.Mode().Perm())
		}
	}
	des, _ := os.ReadDir(d.WireGuard)
	if len(des) != 1 {
		t.Errorf("the directory holds %d files (a temporary file left behind?)", len(des))
	}
	ts := h.List()
	if len(ts) != 2 || ts[0].Name != "gw1" || ts[0].Kind != service.KindGateway || ts[1].Name != "wg1" || ts[1].State != service.StateDown {
		t.Errorf("List = %+v", ts)
	}
	if err := h.Import(context.Background(), service.ImportRequest{Name: "wg1", Kind: service.KindWireGuard, Config: goodConf}); !errors.Is(err, service.ErrExists) {
		t.Errorf("importing wg1 again: %v, want ErrExists", err)
	}
}

func TestImportRejectsABadFileWithItsLine(t *testing.T) {
	h, d, _ := testHost(t)
	for _, c := range []struct {
		kind service.Kind
		src  string
		line int
	}{
		{service.KindWireGuard, "[Interface]\nPrivateKey = " + testPriv + "\nListenPort = banana\n", 3},
		{service.KindGateway, "[interface]\nprivate_key = \"" + testPriv + "\"\naddresses = [\"nope\"]\n", 3},
		{service.KindOpenVPNClient, "client\nremote vpn.example 1194\nproto banana\n", 3},
	} {
		err := h.Import(context.Background(), service.ImportRequest{Name: "bad", Kind: c.kind, Config: c.src})
		var ce *service.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a ConfigError", c.kind, err)
			continue
		}
		if ce.Line != c.line || !strings.Contains(ce.Error(), "bad") {
			t.Errorf("%s: %q at line %d, want line %d", c.kind, ce.Error(), ce.Line, c.line)
		}
	}
	if ts := h.List(); len(ts) != 0 {
		t.Errorf("a rejected import is listed: %+v", ts)
	}
	if des, _ := os.ReadDir(d.WireGuard); len(des) != 0 {
		t.Errorf("a rejected import left %d file(s)", len(des))
	}
}

func TestDeleteRemovesADownTunnel(t *testing.T) {
	h, d, ev := testHost(t)
	if err := h.Import(context.Background(), service.ImportRequest{Name: "wg1", Kind: service.KindWireGuard, Config: goodConf}); err != nil {
		t.Fatal(err)
	}
	if err := h.Delete(context.Background(), "wg1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.WireGuard, "wg1.conf")); err == nil {
		t.Error("the file is still there")
	}
	ev.wait(t, "tunnels removed", func(e service.Event) bool {
		return e.Type == service.EventTunnels && e.Change == service.ChangeRemoved && e.Tunnel == "wg1"
	})
	if err := h.Delete(context.Background(), "wg1"); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("deleting it again: %v, want ErrNotFound", err)
	}
}

func TestFilesThatComeAndGoAreTunnelsThatComeAndGo(t *testing.T) {
	h, d, ev := testHost(t)
	p := filepath.Join(d.WireGuard, "wg7.conf")
	if err := os.WriteFile(p, []byte(goodConf), 0o600); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, "tunnels added", func(e service.Event) bool {
		return e.Type == service.EventTunnels && e.Change == service.ChangeAdded && e.Tunnel == "wg7"
	})
	if tn, ok := h.Get("wg7"); !ok || tn.State != service.StateDown || tn.Kind != service.KindWireGuard {
		t.Errorf("Get = %+v, %v", tn, ok)
	}
	os.Remove(p)
	ev.wait(t, "tunnels removed", func(e service.Event) bool {
		return e.Type == service.EventTunnels && e.Change == service.ChangeRemoved && e.Tunnel == "wg7"
	})
}

func TestUpOfABadFileFails(t *testing.T) {
	h, d, ev := testHost(t)
	os.WriteFile(filepath.Join(d.WireGuard, "wg2.conf"), []byte("[Interface]\nListenPort = x\n"), 0o600)
	h.look()
	err := h.Up(context.Background(), "wg2")
	var ce *service.ConfigError
	if !errors.As(err, &ce) || ce.Line != 2 {
		t.Fatalf("Up: %v, want a ConfigError at line 2", err)
	}
	tn, _ := h.Get("wg2")
	if tn.State != service.StateFailed || !strings.Contains(tn.Error, ":2:") {
		t.Errorf("after the failed up: %+v", tn)
	}
	ev.wait(t, "starting", func(e service.Event) bool { return e.Type == service.EventTunnel && e.State == service.StateStarting })
	ev.wait(t, "failed", func(e service.Event) bool {
		return e.Type == service.EventTunnel && e.State == service.StateFailed && e.Error != ""
	})
	// Down of a failed tunnel is not an error, and Delete may remove it.
	if err := h.Down(context.Background(), "wg2"); err != nil {
		t.Errorf("Down: %v", err)
	}
	if err := h.Delete(context.Background(), "wg2"); err != nil {
		t.Errorf("Delete: %v", err)
	}
	if err := h.Up(context.Background(), "nosuch"); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("Up of an unknown tunnel: %v", err)
	}
}

func TestANameInTwoDirectoriesIsTheFirstOnes(t *testing.T) {
	h, d, _ := testHost(t)
	os.WriteFile(filepath.Join(d.WireGuard, "x1.conf"), []byte(goodConf), 0o600)
	os.MkdirAll(d.Gateways, 0o700)
	os.WriteFile(filepath.Join(d.Gateways, "x1.toml"), []byte(goodGateway), 0o600)
	h.look()
	ts := h.List()
	if len(ts) != 1 || ts[0].Kind != service.KindWireGuard {
		t.Errorf("List = %+v", ts)
	}
}
