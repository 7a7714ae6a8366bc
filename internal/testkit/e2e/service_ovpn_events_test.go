package e2e

import (
	"context"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// TestServiceOpenVPNClientEvents: the event stream of an OpenVPN client
// tunnel of the service, against a real OpenVPN 2.6 server, shows in
// order the snapshot (down), starting, up, the server's handshake, two
// transfer events a second or more apart while iperf3 runs through the
// tunnel, then stopping and down.
func TestServiceOpenVPNClientEvents(t *testing.T) {
	netns.Need(t, "openvpn", "iperf3")
	sb := newServiceBed(t)
	pki := testpki.New(t, "wirelane-svc-ev-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "svc-events", x509.ExtKeyUsageClientAuth)
	srvDir := t.TempDir()
	for name, body := range map[string]string{
		"ca.crt": string(pki.CAPEM), "server.crt": string(srvCert), "server.key": string(srvKey),
		"server.conf": "port 1194\nproto udp\ndev tun\ntopology subnet\nserver 10.9.0.0 255.255.255.0\nca ca.crt\ncert server.crt\nkey server.key\ndh none\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 1 30\nverb 3\n",
	} {
		if err := os.WriteFile(filepath.Join(srvDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := netns.Start(t, sb.nsB, "openvpn", "--cd", srvDir, "--config", "server.conf")
	netns.Eventually(t, 20*time.Second, "openvpn listening", func() error {
		if out, err := netns.Try(sb.nsB, nil, "ss", "-uln", "sport", "=", ":1194"); err != nil || !strings.Contains(out, "1194") {
			return os.ErrNotExist
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	name := netns.Unique("we")
	cfg := "client\ndev tun\nremote 10.77.0.2 1194 udp\nnobind\nremote-cert-tls server\n<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNClient, Config: cfg}); err != nil {
		t.Fatalf("import: %v", err)
	}

	evs, err := sb.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	got := make(chan service.Event, 256)
	go func() {
		defer close(got)
		for evs.Next() {
			if e := evs.Event(); e.Tunnel == name {
				got <- e
			}
		}
	}()
	// next returns the next event of the tunnel that is not a transfer
	// event (unless transfer is asked for), and fails unless ok says it
	// is the one expected: the order is the test.
	var seen []string
	next := func(what string, transfer bool, ok func(service.Event) bool) service.Event {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case e, open := <-got:
				if !open {
					t.Fatalf("the stream ended waiting for %s; seen: %s", what, strings.Join(seen, ", "))
				}
				seen = append(seen, e.Type+":"+string(e.State)+e.Change)
				if e.Type == service.EventTransfer && !transfer {
					continue
				}
				if !ok(e) {
					t.Fatalf("got %s:%s%s, want %s; seen: %s", e.Type, e.State, e.Change, what, strings.Join(seen, ", "))
				}
				return e
			case <-timeout:
				t.Fatalf("no %s; seen: %s", what, strings.Join(seen, ", "))
			}
		}
	}
	state := func(s service.State) func(service.Event) bool {
		return func(e service.Event) bool { return e.Type == service.EventTunnel && e.State == s && !e.Initial }
	}
	if snap := next("the snapshot", false, func(e service.Event) bool { return e.Type == service.EventTunnel && e.Initial }); snap.State != service.StateDown {
		t.Errorf("snapshot: %s, want down", snap.State)
	}
	if _, err := sb.c.Up(ctx, name); err != nil {
		select {
		case <-srv.Exited():
			t.Logf("openvpn:\n%s", srv.Output())
		default:
		}
		t.Fatalf("up: %v", err)
	}
	next("starting", false, state(service.StateStarting))
	next("up", false, state(service.StateUp))
	hs := next("the server's handshake", false, func(e service.Event) bool { return e.Type == service.EventPeer && e.Change == service.ChangeHandshake })
	if hs.Peer == nil || hs.Peer.CommonName == "" || hs.Peer.Endpoint == nil || hs.Peer.Endpoint.Addr().String() != "10.77.0.2" {
		t.Errorf("the handshake event's peer: %+v", hs.Peer)
	}

	netns.Start(t, sb.nsB, "iperf3", "-s", "-1", "-B", "10.9.0.1", "-p", "5292")
	iperfDone := make(chan string, 1)
	go func() {
		var out string
		for range 20 { // until the server listens
			var err error
			out, err = netns.Try(sb.nsA, nil, "iperf3", "-c", "10.9.0.1", "-p", "5292", "-t", "4")
			if err == nil || !strings.Contains(out, "unable to connect") {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		iperfDone <- out
	}()
	isTransfer := func(e service.Event) bool { return e.Type == service.EventTransfer }
	tr1 := next("transfer while iperf3 runs", true, isTransfer)
	tr2 := next("a second transfer while iperf3 runs", true, isTransfer)
	if tr1.TxBytes == nil || tr2.TxBytes == nil || *tr2.TxBytes <= *tr1.TxBytes {
		t.Errorf("transfer events do not grow: %+v then %+v", tr1, tr2)
	}
	if tr2.Time.Sub(tr1.Time) < 900*time.Millisecond {
		t.Errorf("two transfer events %v apart, want at most one a second", tr2.Time.Sub(tr1.Time))
	}
	if out := <-iperfDone; !strings.Contains(out, "receiver") {
		t.Errorf("iperf3 through the tunnel:\n%s", out)
	}

	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Fatalf("down: %v", err)
	}
	next("stopping", false, state(service.StateStopping))
	// The server's session may be reported expired as the tunnel goes.
	for {
		e := next("down", false, func(e service.Event) bool {
			return state(service.StateDown)(e) || (e.Type == service.EventPeer && e.Change == service.ChangeHandshakeExpired)
		})
		if e.Type == service.EventTunnel {
			break
		}
	}
	if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", name); err == nil {
		t.Errorf("the interface is still there after down:\n%s", out)
	}
}
