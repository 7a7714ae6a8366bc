package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// TestServiceOpenVPNServer imports an OpenVPN server configuration (inline
// blocks) through the API and brings it up in the service; a real OpenVPN
// 2.6 client in the other namespace connects and pings through it. Its
// session shows in the API (a peer with its common name, endpoint and
// counters), in the event stream (a peer handshake event) and in the
// metrics (connected clients, the completed handshake); down removes the
// device.
func TestServiceOpenVPNServer(t *testing.T) {
	netns.Need(t, "openvpn")
	sb := newServiceBed(t)
	pki := testpki.New(t, "wirelane-svc-srv-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "svc-road", x509.ExtKeyUsageClientAuth)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	evs, err := sb.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	name := netns.Unique("ws")
	sawPeer := make(chan service.Event, 1)
	go func() {
		for evs.Next() {
			if e := evs.Event(); e.Tunnel == name && e.Type == service.EventPeer && e.Peer != nil && e.Peer.CommonName == "svc-road" {
				sawPeer <- e
				return
			}
		}
	}()

	cfg := "port 1195\nproto udp\ndev tun\ntopology subnet\nserver 10.11.0.0 255.255.255.0\ndh none\nkeepalive 1 5\n" +
		"<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(srvCert) + "</cert>\n<key>\n" + string(srvKey) + "</key>\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNServer, Config: cfg}); err != nil {
		t.Fatalf("import: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(sb.dir, "wirelane", "openvpn-server", name+".ovpn")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the stored file: %v, %v", fi, err)
	}
	tn, err := sb.c.Up(ctx, name)
	if err != nil {
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), name)
	if tn.State != service.StateUp || tn.Kind != service.KindOpenVPNServer {
		t.Errorf("after up: %+v", tn)
	}

	cliDir := t.TempDir()
	for n, body := range map[string]string{
		"ca.crt": string(pki.CAPEM), "client.crt": string(cliCert), "client.key": string(cliKey),
		"client.conf": "client\ndev tun\nproto udp\nremote 10.77.0.1 1195\nnobind\nremote-cert-tls server\nca ca.crt\ncert client.crt\nkey client.key\n" +
			"disable-dco\nverb 3\n",
	} {
		if err := os.WriteFile(filepath.Join(cliDir, n), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	logFile := filepath.Join(cliDir, "client.log")
	cli := netns.Start(t, sb.nsB, "openvpn", "--cd", cliDir, "--config", "client.conf", "--log", logFile)
	netns.Eventually(t, 30*time.Second, "the OpenVPN client connected", func() error {
		log, _ := os.ReadFile(logFile)
		select {
		case <-cli.Exited():
			t.Fatalf("openvpn exited:\n%s", log)
		default:
		}
		if !strings.Contains(string(log), "Initialization Sequence Completed") {
			return fmt.Errorf("not yet:\n%s", log)
		}
		return nil
	})
	netns.Run(t, sb.nsB, "ping", "-c", "3", "-i", "0.3", "-W", "2", "10.11.0.1")

	var peer service.Peer
	netns.Eventually(t, 5*time.Second, "the session in the API", func() error {
		tn, err := sb.c.Get(ctx, name)
		if err != nil {
			return err
		}
		for _, p := range tn.Peers {
			if p.CommonName == "svc-road" && p.RxBytes > 0 && p.TxBytes > 0 {
				peer = p
				return nil
			}
		}
		return fmt.Errorf("peers: %+v", tn.Peers)
	})
	if peer.Endpoint == nil || peer.Endpoint.Addr().String() != "10.77.0.2" || len(peer.AllowedIPs) == 0 || !strings.HasPrefix(peer.AllowedIPs[0].String(), "10.11.0.") || peer.LatestHandshake == nil {
		t.Errorf("the session: %+v", peer)
	}
	select {
	case e := <-sawPeer:
		if e.Change != service.ChangeHandshake {
			t.Errorf("the session's peer event: %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Error("no peer event for the session")
	}
	m, err := sb.c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := sample(string(m), `openvpn_server_connected_clients{tunnel="`+name+`"}`); v != 1 {
		t.Errorf("openvpn_server_connected_clients = %v, want 1", v)
	}
	if v := sample(string(m), `openvpn_server_client_received_bytes_total{common_name="svc-road",tunnel="`+name+`"}`); v <= 0 {
		t.Errorf("the client's received bytes = %v", v)
	}
	if v := sample(string(m), `wirelane_openvpn_handshakes_total{outcome="completed",tunnel="`+name+`"}`); v < 1 {
		t.Errorf("completed OpenVPN handshakes = %v, want >= 1", v)
	}

	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Fatalf("down: %v", err)
	}
	if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", name); err == nil {
		t.Errorf("the device is still there after down:\n%s", out)
	}
}
