package e2e

// The service (wirelaned without an interface name) over its real Host,
// in a namespace, driven through its socket by the API client:
//
//	nsA: the service, tunnel A (its daemon started by the service)
//	  veth 10.77.0.1 <-> 10.77.0.2
//	nsB: tunnel B, brought up with `wirelane up`
//	tunnel: 10.78.0.1 <-> 10.78.0.2

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// serviceBed is the topology above with the service's files in dir.
type serviceBed struct {
	nsA, nsB *netns.NS
	dir      string // the service's --wireguard-dir and --wirelane-dir parent
	socket   string
	a, b     string // interface (= tunnel) names
	portA    int
	c        *client.Client
	proc     *netns.Proc
}

func newServiceBed(t *testing.T) *serviceBed {
	t.Helper()
	need(t, implWirelane)
	if err := buildErr["wirelane"]; err != nil {
		t.Skipf("the wirelane CLI did not build: %v", err)
	}
	sb := &serviceBed{nsA: netns.New(t, "wlsa"), nsB: netns.New(t, "wlsb"), dir: t.TempDir(), a: netns.Unique("wa"), b: netns.Unique("wb"), portA: 10411}
	sb.socket = filepath.Join(sb.dir, "wirelane.sock")
	os.MkdirAll(filepath.Join(sb.dir, "wireguard"), 0o700)
	os.MkdirAll(filepath.Join(sb.dir, "wirelane"), 0o700)
	netns.Veth(t, sb.nsA, "eth0", sb.nsB, "eth0")
	netns.Run(t, sb.nsA, "ip", "addr", "add", "10.77.0.1/24", "dev", "eth0")
	netns.Run(t, sb.nsB, "ip", "addr", "add", "10.77.0.2/24", "dev", "eth0")
	ka, _ := wgtypes.GeneratePrivateKey()
	kb, _ := wgtypes.GeneratePrivateKey()
	confA := fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = %d\nAddress = 10.78.0.1/24\n\n[Peer]\n# Name = site-b\nPublicKey = %s\nAllowedIPs = 10.78.0.2/32\nEndpoint = 10.77.0.2:10412\n", ka, sb.portA, kb.PublicKey())
	confB := fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = 10412\nAddress = 10.78.0.2/24\n\n[Peer]\nPublicKey = %s\nAllowedIPs = 10.78.0.1/32\nEndpoint = 10.77.0.1:%d\n", kb, ka.PublicKey(), sb.portA)
	if err := os.WriteFile(filepath.Join(sb.dir, "wireguard", sb.a+".conf"), []byte(confA), 0o600); err != nil {
		t.Fatal(err)
	}
	fileB := filepath.Join(sb.dir, sb.b+".conf")
	if err := os.WriteFile(fileB, []byte(confB), 0o600); err != nil {
		t.Fatal(err)
	}
	netns.Run(t, sb.nsB, filepath.Join(binDir, "wirelane"), "up", fileB)
	t.Cleanup(func() {
		netns.Try(sb.nsB, nil, filepath.Join(binDir, "wirelane"), "down", fileB)
		// A daemon killed with its namespace leaves its socket.
		for _, n := range []string{sb.a, sb.b} {
			os.Remove(uapi.SocketPath(n))
		}
	})
	sb.c = client.New(sb.socket)
	sb.start(t)
	return sb
}

// start runs the service in nsA and waits for its socket to answer.
func (sb *serviceBed) start(t *testing.T) {
	t.Helper()
	sb.proc = netns.StartEnv(t, sb.nsA, []string{"WIRELANE_FIREWALL=off"}, filepath.Join(binDir, "wirelaned"),
		"--socket", sb.socket, "--wireguard-dir", filepath.Join(sb.dir, "wireguard"), "--wirelane-dir", filepath.Join(sb.dir, "wirelane"))
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

// stop ends the service with SIGTERM.
func (sb *serviceBed) stop(t *testing.T) {
	t.Helper()
	sb.proc.Cmd.Process.Signal(syscall.SIGTERM)
	if _, err := sb.proc.Wait(t, 10*time.Second); err != nil {
		t.Logf("the service: %v\n%s", err, sb.proc.Output())
	}
}

// TestServiceTunnelLife brings a WireGuard tunnel up and down through the
// service while a client watches: the stream shows the snapshot, starting,
// up, the peer's handshake, transfer events while an iperf3 stream runs
// (at least two, their totals growing, before it ends), stopping and
// down, in that order. Then the service restarts with the tunnel up and finds it
// up, without a second daemon.
func TestServiceTunnelLife(t *testing.T) {
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	evs, err := sb.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	got := make(chan service.Event, 256)
	go func() {
		defer close(got)
		for evs.Next() {
			if e := evs.Event(); e.Tunnel == sb.a {
				got <- e
			}
		}
	}()
	// want reads events until one matches, failing on a deadline.
	var seen []string
	want := func(what string, ok func(service.Event) bool) service.Event {
		t.Helper()
		timeout := time.After(15 * time.Second)
		for {
			select {
			case e, open := <-got:
				if !open {
					t.Fatalf("the stream ended waiting for %s; seen: %s", what, strings.Join(seen, ", "))
				}
				seen = append(seen, e.Type+":"+string(e.State)+e.Change)
				if ok(e) {
					return e
				}
			case <-timeout:
				t.Fatalf("no %s; seen: %s", what, strings.Join(seen, ", "))
			}
		}
	}
	state := func(s service.State) func(service.Event) bool {
		return func(e service.Event) bool { return e.Type == service.EventTunnel && e.State == s && !e.Initial }
	}
	snap := want("the snapshot", func(e service.Event) bool { return e.Type == service.EventTunnel && e.Initial })
	if snap.State != service.StateDown {
		t.Errorf("snapshot: %s, want down", snap.State)
	}

	tn, err := sb.c.Up(ctx, sb.a)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if tn.State != service.StateUp || len(tn.Peers) != 1 || tn.Peers[0].Name != "site-b" || len(tn.Addresses) == 0 || tn.Addresses[0].String() != "10.78.0.1/24" {
		t.Errorf("after up: %+v", tn)
	}
	want("starting", state(service.StateStarting))
	want("up", state(service.StateUp))
	// A 4-second iperf3 TCP stream from A to B through the tunnel.
	netns.Start(t, sb.nsB, "iperf3", "-s", "-1", "-B", "10.78.0.2", "-p", "5291")
	iperfDone := make(chan string, 1)
	go func() {
		var out string
		for range 20 { // until the server listens
			var err error
			out, err = netns.Try(sb.nsA, nil, "iperf3", "-c", "10.78.0.2", "-p", "5291", "-t", "4")
			if err == nil || !strings.Contains(out, "unable to connect") {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		iperfDone <- out
	}()
	hs := want("the peer's handshake", func(e service.Event) bool { return e.Type == service.EventPeer && e.Change == service.ChangeHandshake })
	if hs.Peer == nil || hs.Peer.Name != "site-b" {
		t.Errorf("handshake event's peer: %+v", hs.Peer)
	}
	isTransfer := func(e service.Event) bool { return e.Type == service.EventTransfer }
	tr1 := want("transfer while iperf3 runs", isTransfer)
	tr2 := want("a second transfer while iperf3 runs", isTransfer)
	select {
	case out := <-iperfDone:
		t.Errorf("iperf3 ended before two transfer events:\n%s", out)
	default:
	}
	if tr1.TxBytes == nil || tr2.TxBytes == nil || *tr2.TxBytes <= *tr1.TxBytes || *tr1.TxBytes == 0 {
		t.Errorf("transfer events do not grow: %+v then %+v", tr1, tr2)
	}
	if tr2.Time.Sub(tr1.Time) < 900*time.Millisecond {
		t.Errorf("two transfer events %v apart, want at most one a second", tr2.Time.Sub(tr1.Time))
	}
	if out := <-iperfDone; !strings.Contains(out, "receiver") {
		t.Errorf("iperf3 through the tunnel:\n%s", out)
	}

	// A restart finds the tunnel up and leaves its daemon alone.
	pid := daemonPid(sb.nsA, sb.a)
	sb.stop(t)
	sb.start(t)
	tn, err = sb.c.Get(ctx, sb.a)
	if err != nil || tn.State != service.StateUp || len(tn.Peers) != 1 || tn.Peers[0].Name != "site-b" {
		t.Fatalf("after the restart: %+v, %v", tn, err)
	}
	if again, err := sb.c.Up(ctx, sb.a); err != nil || again.State != service.StateUp {
		t.Errorf("up of the tunnel found up: %+v, %v", again, err)
	}
	if p := daemonPid(sb.nsA, sb.a); p != pid || pid == 0 {
		t.Errorf("the daemon was %d before the restart, %d after", pid, p)
	}

	// Down, watched on a new stream (the first ended with the service).
	evs2, err := sb.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs2.Close()
	got2 := make(chan service.Event, 256)
	go func() {
		defer close(got2)
		for evs2.Next() {
			if e := evs2.Event(); e.Tunnel == sb.a {
				got2 <- e
			}
		}
	}()
	for range got { // the first stream's end
	}
	got = got2
	if e := want("the new snapshot", func(e service.Event) bool { return e.Initial }); e.State != service.StateUp {
		t.Errorf("the new snapshot: %s, want up", e.State)
	}
	if tn, err := sb.c.Down(ctx, sb.a); err != nil || tn.State != service.StateDown {
		t.Fatalf("down: %+v, %v", tn, err)
	}
	want("stopping", state(service.StateStopping))
	want("down", state(service.StateDown))
	if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", sb.a); err == nil {
		t.Errorf("the interface is still there after down:\n%s", out)
	}
}

// TestServiceFailedUp: a tunnel whose file does not parse, and one whose
// bring-up fails half way (its port is taken), are failed with their error
// and leave no interface behind.
func TestServiceFailedUp(t *testing.T) {
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, _ := wgtypes.GeneratePrivateKey()
	bad, busy := netns.Unique("wx"), netns.Unique("wy")
	os.WriteFile(filepath.Join(sb.dir, "wireguard", bad+".conf"), []byte("[Interface]\nPrivateKey = "+k.String()+"\nListenPort = banana\n"), 0o600)
	// Takes tunnel A's port while A is up.
	os.WriteFile(filepath.Join(sb.dir, "wireguard", busy+".conf"), []byte(fmt.Sprintf("[Interface]\nPrivateKey = %s\nListenPort = %d\nAddress = 10.79.0.1/24\n", k, sb.portA)), 0o600)
	netns.Eventually(t, 5*time.Second, "the new files are tunnels", func() error {
		ts, err := sb.c.List(ctx)
		if err != nil {
			return err
		}
		if len(ts) != 3 {
			return fmt.Errorf("%d tunnels", len(ts))
		}
		return nil
	})
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatal(err)
	}
	defer sb.c.Down(ctx, sb.a)

	_, err := sb.c.Up(ctx, bad)
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Status != 400 || ce.Line != 3 {
		t.Errorf("up of a bad file: %v, want 400 at line 3", err)
	}
	_, err = sb.c.Up(ctx, busy)
	if !errors.As(err, &ce) || !strings.Contains(ce.Msg, "in use") {
		t.Errorf("up with a taken port: %v", err)
	}
	for _, n := range []string{bad, busy} {
		tn, err := sb.c.Get(ctx, n)
		if err != nil || tn.State != service.StateFailed || tn.Error == "" {
			t.Errorf("%s: %+v, %v; want failed with its error", n, tn, err)
		}
		if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", n); err == nil {
			t.Errorf("%s: the interface was left behind:\n%s", n, out)
		}
		if _, err := os.Stat(uapi.SocketPath(n)); err == nil {
			t.Errorf("%s: its socket was left behind", n)
		}
	}
}

// TestServiceCLI: with the service running, the CLI (run in another
// namespace than the tunnel's) lists the service's tunnels, brings one up
// and down through it, shows it with its peer's friendly name, and
// `wirelane events` prints the changes readably.
func TestServiceCLI(t *testing.T) {
	sb := newServiceBed(t)
	cli := filepath.Join(binDir, "wirelane")
	env := []string{"WIRELANE_SOCKET=" + sb.socket}
	out := netns.RunEnv(t, nil, env, cli, "list", "--json")
	if !strings.Contains(out, `"name": "`+sb.a+`"`) || !strings.Contains(out, `"state": "down"`) {
		t.Fatalf("list --json:\n%s", out)
	}
	watch := netns.StartEnv(t, nil, env, cli, "events")
	time.Sleep(300 * time.Millisecond) // the stream is open
	out = netns.RunEnv(t, nil, env, cli, "up", sb.a)
	if !strings.Contains(out, "through the Wirelane service") {
		t.Errorf("up did not go through the service:\n%s", out)
	}
	// The interface is in the service's namespace, not the CLI's.
	netns.Run(t, sb.nsA, "ip", "link", "show", sb.a)
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.78.0.2")
	if out := netns.RunEnv(t, nil, env, cli, "show", sb.a); !strings.Contains(out, "name: site-b") || !strings.Contains(out, "latest handshake") {
		t.Errorf("show:\n%s", out)
	}
	if out := netns.RunEnv(t, nil, env, cli, "show", "--json"); !strings.Contains(out, `"name": "site-b"`) {
		t.Errorf("show --json:\n%s", out)
	}
	if out := netns.RunEnv(t, nil, env, cli, "list"); !strings.Contains(out, sb.a) || !strings.Contains(out, " up ") {
		t.Errorf("list:\n%s", out)
	}
	netns.RunEnv(t, nil, env, cli, "down", sb.a)
	if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", sb.a); err == nil {
		t.Errorf("the interface is still there after down:\n%s", out)
	}
	time.Sleep(300 * time.Millisecond)
	watch.Cmd.Process.Signal(syscall.SIGINT)
	out, _ = watch.Wait(t, 5*time.Second)
	for _, want := range []string{sb.a + ": down (now)", sb.a + ": starting (requested)", sb.a + ": up (requested)", sb.a + ": stopping (requested)", sb.a + ": down (requested)"} {
		if !strings.Contains(out, want) {
			t.Errorf("events: no %q in:\n%s", want, out)
		}
	}
}

// TestServiceGateway: a gateway file is a tunnel of kind gateway, brought
// up through the library as `wirelane gateway up` does, its site's name as
// its peer's friendly name, and taken down again.
func TestServiceGateway(t *testing.T) {
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, _ := wgtypes.GeneratePrivateKey()
	peer, _ := wgtypes.GeneratePrivateKey()
	name := netns.Unique("wg")
	gw := fmt.Sprintf("[interface]\nprivate_key = %q\nlisten_port = 10413\naddresses = [\"10.80.0.1/24\"]\n\n[[site]]\nname = \"branch\"\npublic_key = %q\nnetworks = [\"10.81.0.0/16\"]\n", k.String(), peer.PublicKey().String())
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindGateway, Config: gw}); err != nil {
		t.Fatalf("import: %v", err)
	}
	tn, err := sb.c.Up(ctx, name)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	if tn.Kind != service.KindGateway || tn.State != service.StateUp || len(tn.Peers) != 1 || tn.Peers[0].Name != "branch" {
		t.Errorf("after up: %+v", tn)
	}
	if out := netns.Run(t, sb.nsA, "ip", "route", "show", "10.81.0.0/16"); !strings.Contains(out, name) {
		t.Errorf("no route to the site's network through %s: %q", name, out)
	}
	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Fatalf("down: %v", err)
	}
	if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", name); err == nil {
		t.Errorf("the interface is still there after down:\n%s", out)
	}
}
