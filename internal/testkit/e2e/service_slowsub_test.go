package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// TestServiceDropsASubscriberThatNeverReads: against the real service and
// its real Host, with a WireGuard tunnel up, one /v1/events subscriber
// never reads a byte while the Host publishes hundreds of events (a
// tunnel imported and deleted, again and again: real tunnels events).
// The service drops that subscriber (wirelane_event_subscribers_dropped_total
// 1, its connection closed after what was queued) and nothing else:
// every API call answers meanwhile, the subscriber that reads gets every
// event in order, and the tunnel carries traffic throughout (40 pings
// across the whole run, none lost) and after.
func TestServiceDropsASubscriberThatNeverReads(t *testing.T) {
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), sb.a)

	// The reader: every tunnels event of the test's names, in order.
	evs, err := sb.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	got := make(chan service.Event, 4096)
	go func() {
		defer close(got)
		for evs.Next() {
			if e := evs.Event(); e.Type == service.EventTunnels {
				got <- e
			}
		}
	}()
	// The subscriber that never reads.
	stuck, err := net.Dial("unix", sb.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuck.(*net.UnixConn).SetReadBuffer(4096)
	fmt.Fprintf(stuck, "GET /v1/events HTTP/1.1\r\nHost: wirelane\r\n\r\n")

	metric := func(name string) float64 {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		m, err := sb.c.Metrics(cctx)
		if err != nil {
			t.Fatalf("metrics: %v (the service must stay responsive)", err)
		}
		return sample(string(m), name)
	}
	deadline := time.Now().Add(10 * time.Second)
	for metric("wirelane_event_subscribers") != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%v subscribers, want 2", metric("wirelane_event_subscribers"))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Traffic through the tunnel all along: not one ping lost while the
	// stuck subscriber fills its queue and is dropped.
	ping := netns.Start(t, sb.nsA, "ping", "-c", "40", "-i", "0.05", "-W", "2", "10.78.0.2")

	key, _ := wgtypes.GeneratePrivateKey()
	conf := fmt.Sprintf("[Interface]\nPrivateKey = %s\nAddress = 10.79.0.1/24\n", key)
	// Each call has its own short deadline: a service slowed by the
	// stuck subscriber fails the test here.
	call := func(what string, f func(context.Context) error) {
		t.Helper()
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		defer ccancel()
		if err := f(cctx); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	const maxRounds = 2000
	rounds := 0
	for ; rounds < maxRounds; rounds++ {
		name := fmt.Sprintf("sl%d", rounds)
		call("import "+name, func(c context.Context) error {
			_, err := sb.c.Import(c, service.ImportRequest{Name: name, Kind: service.KindWireGuard, Config: conf})
			return err
		})
		call("delete "+name, func(c context.Context) error { return sb.c.Delete(c, name) })
		if rounds%25 == 24 {
			call("list", func(c context.Context) error { _, err := sb.c.List(c); return err })
			if metric("wirelane_event_subscribers_dropped_total") >= 1 {
				rounds++
				break
			}
		}
	}
	if rounds == maxRounds {
		t.Fatalf("the subscriber that never reads was not dropped after %d events", 2*maxRounds)
	}
	t.Logf("dropped after %d imported and deleted tunnels", rounds)
	if v := metric("wirelane_event_subscribers_dropped_total"); v != 1 {
		t.Errorf("%v subscribers dropped, want 1 (only the one that never reads)", v)
	}
	if v := metric("wirelane_event_subscribers"); v != 1 {
		t.Errorf("%v subscribers left, want 1 (the reader)", v)
	}

	// The reader got every event, in order, none lost.
	for i := range rounds {
		for _, change := range []string{service.ChangeAdded, service.ChangeRemoved} {
			want := fmt.Sprintf("sl%d", i)
			select {
			case e, ok := <-got:
				if !ok {
					t.Fatalf("the reader's stream ended before %s %s", want, change)
				}
				if e.Tunnel != want || e.Change != change {
					t.Fatalf("the reader got %s %s, want %s %s", e.Tunnel, e.Change, want, change)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("the reader never got %s %s", want, change)
			}
		}
	}

	out, err := ping.Wait(t, 30*time.Second)
	if err != nil || !strings.Contains(out, " 0% packet loss") {
		t.Errorf("pings through the tunnel while the subscriber was stuck and dropped: %v\n%s", err, out)
	}

	// The dropped subscriber finds what was queued, then the end.
	stuck.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, bufio.NewReader(stuck))
	if err != nil {
		t.Fatalf("the dropped subscriber's connection after %d bytes: %v, want it closed", n, err)
	}
	sb.alive(t, "a subscriber that never read")
}
