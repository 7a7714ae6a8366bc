package service_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
)

// TestClientDrivesTheService uses the client package (what the CLI and a
// tray use) against a service whose Host is the in-memory FakeHost.
func TestClientDrivesTheService(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "wirelane.sock")
	s := service.New(service.NewFakeHost(), service.Config{PollInterval: 50 * time.Millisecond})
	l, err := service.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	defer s.Shutdown(context.Background())

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a missing event fails, not hangs
	defer cancel()
	c := client.New(socket)
	evs, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()

	ts, err := c.List(ctx)
	if err != nil || len(ts) != 2 {
		t.Fatalf("List: %v %v", ts, err)
	}
	if tun, err := c.Up(ctx, "wg0"); err != nil || tun.State != service.StateUp {
		t.Fatalf("Up: %+v %v", tun, err)
	}
	if _, err := c.Get(ctx, "nope"); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("Get of an unknown tunnel: %v", err)
	}
	_, err = c.Import(ctx, service.ImportRequest{Name: "x", Kind: service.KindWireGuard, Config: "[Interface]\nbad\n"})
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 || ce.Line != 2 {
		t.Fatalf("Import of a bad config: %#v", err)
	}
	if _, err := c.Import(ctx, service.ImportRequest{Name: "x", Kind: service.KindWireGuard, Config: "[Interface]\n"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.Answer(ctx, "wg0", service.AuthAnswer{Response: "123"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.Metrics(ctx)
	if err != nil || !strings.Contains(string(m), "wireguard_device_info") {
		t.Fatalf("Metrics: %v", err)
	}
	if _, err := c.Down(ctx, "wg0"); err != nil {
		t.Fatal(err)
	}

	var got []string
	for evs.Next() {
		e := evs.Event()
		got = append(got, e.Type+":"+e.Tunnel+":"+string(e.State)+e.Change)
		if len(got) == 8 {
			break
		}
	}
	want := "tunnel:ovs:down tunnel:wg0:down tunnel:wg0:starting tunnel:wg0:up tunnels:x:added tunnels:x:removed tunnel:wg0:stopping tunnel:wg0:down"
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("events:\n got %s\nwant %s", g, want)
	}
	s.Shutdown(context.Background())
	for evs.Next() {
		if evs.Event().Type == service.EventStopping {
			break
		}
	}
	if evs.Next() || evs.Err() != nil {
		t.Fatalf("the stream goes on after stopping (err %v)", evs.Err())
	}
}

func isStatus(err error, code int) bool {
	var ce *client.Error
	return errors.As(err, &ce) && ce.Status == code
}

// TestClientInterfaceCounters: the counters `wirelane show` prints for an
// interface are those of the running tunnel on it (the service's counters
// endpoint); none for a tunnel that is down or an interface it does not
// know.
func TestClientInterfaceCounters(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "wirelane.sock")
	h := service.NewFakeHost()
	h.SetCounters([]service.EngineCounter{{Tunnel: "wg0", Name: "wireguard_dropped_packets_total", Help: "h", Labels: [][2]string{{"reason", "malformed"}}, Value: 20}})
	s := service.New(h, service.Config{PollInterval: 50 * time.Millisecond})
	l, err := service.Listen(socket)
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(l)
	defer s.Shutdown(context.Background())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c := client.New(socket)
	ts, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cs, ok := c.InterfaceCounters(ctx, ts, "wg0"); ok || cs != nil {
		t.Errorf("a tunnel that is down: %v %v", cs, ok)
	}
	if _, err := c.Up(ctx, "wg0"); err != nil {
		t.Fatal(err)
	}
	if ts, err = c.List(ctx); err != nil {
		t.Fatal(err)
	}
	cs, ok := c.InterfaceCounters(ctx, ts, "wg0")
	if !ok || len(cs) != 1 || cs[0].Name != "wirelane_wireguard_dropped_packets_total" || cs[0].Value != 20 {
		t.Errorf("the running tunnel: %+v %v", cs, ok)
	}
	if got := service.CounterLines(cs); len(got) != 1 || got[0] != "dropped: malformed 20" {
		t.Errorf("lines: %q", got)
	}
	if _, ok := c.InterfaceCounters(ctx, ts, "nope0"); ok {
		t.Error("an interface the service does not know")
	}
}
