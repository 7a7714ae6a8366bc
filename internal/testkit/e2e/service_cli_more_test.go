package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// TestServiceCLIGatewayAndOVPNServe: with the service running, `wirelane
// gateway up|down NAME` (run in another namespace than the service's) go
// through it, and `wirelane ovpn serve NAME` has the service bring the
// server up and takes it down on Ctrl-C; with WIRELANE_SOCKET=off the
// CLI does not ask the service (it looks for /etc/wirelane/NAME.toml).
func TestServiceCLIGatewayAndOVPNServe(t *testing.T) {
	sb := newServiceBed(t)
	cli := filepath.Join(binDir, "wirelane")
	env := []string{"WIRELANE_SOCKET=" + sb.socket}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	k, _ := wgtypes.GeneratePrivateKey()
	peer, _ := wgtypes.GeneratePrivateKey()
	gw := netns.Unique("wg")
	conf := fmt.Sprintf("[interface]\nprivate_key = %q\nlisten_port = 10414\naddresses = [\"10.82.0.1/24\"]\n\n[[site]]\nname = \"branch\"\npublic_key = %q\nnetworks = [\"10.83.0.0/16\"]\n", k.String(), peer.PublicKey().String())
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: gw, Kind: service.KindGateway, Config: conf}); err != nil {
		t.Fatalf("import: %v", err)
	}
	if out := netns.RunEnv(t, nil, env, cli, "gateway", "up", gw); !strings.Contains(out, "through the Wirelane service") {
		t.Errorf("gateway up did not go through the service:\n%s", out)
	}
	if tn, err := sb.c.Get(ctx, gw); err != nil || tn.State != service.StateUp {
		t.Fatalf("after gateway up: %+v, %v", tn, err)
	}
	netns.Run(t, sb.nsA, "ip", "link", "show", gw) // in the service's namespace
	if out, err := netns.Try(nil, []string{"WIRELANE_SOCKET=off"}, cli, "gateway", "down", gw); err == nil || !strings.Contains(out, "/etc/wirelane/"+gw+".toml") {
		t.Errorf("gateway down with WIRELANE_SOCKET=off: %v\n%s", err, out)
	}
	if out := netns.RunEnv(t, nil, env, cli, "gateway", "down", gw); !strings.Contains(out, "through the Wirelane service") {
		t.Errorf("gateway down did not go through the service:\n%s", out)
	}
	if tn, _ := sb.c.Get(ctx, gw); tn.State != service.StateDown {
		t.Errorf("after gateway down: %s", tn.State)
	}

	// An OpenVPN server tunnel held by `wirelane ovpn serve NAME`.
	pki := testpki.New(t, "wirelane-cli-srv-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	ovs := netns.Unique("wv")
	cfg := "port 1196\nproto udp\ndev tun\ntopology subnet\nserver 10.12.0.0 255.255.255.0\ndh none\n" +
		"<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(srvCert) + "</cert>\n<key>\n" + string(srvKey) + "</key>\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: ovs, Kind: service.KindOpenVPNServer, Config: cfg}); err != nil {
		t.Fatalf("import: %v", err)
	}
	if out, err := netns.Try(nil, env, cli, "ovpn", "serve", "--dev", "x", ovs); err == nil || !strings.Contains(out, "drop the flags") {
		t.Errorf("ovpn serve with flags for a service tunnel: %v\n%s", err, out)
	}
	p := netns.StartEnv(t, nil, env, cli, "ovpn", "serve", ovs)
	netns.Eventually(t, 20*time.Second, "the server up through the service", func() error {
		tn, err := sb.c.Get(ctx, ovs)
		if err != nil {
			return err
		}
		if tn.State != service.StateUp {
			return fmt.Errorf("%s", tn.State)
		}
		return nil
	})
	netns.Run(t, sb.nsA, "ip", "link", "show", ovs)
	p.Cmd.Process.Signal(syscall.SIGINT)
	out, err := p.Wait(t, 15*time.Second)
	if err != nil || !strings.Contains(out, "through the Wirelane service") || !strings.Contains(out, ovs+": up") {
		t.Errorf("ovpn serve through the service: %v\n%s", err, out)
	}
	if tn, _ := sb.c.Get(ctx, ovs); tn.State != service.StateDown {
		t.Errorf("after Ctrl-C: %s, want down", tn.State)
	}
	if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", ovs); err == nil {
		t.Errorf("the device is still there:\n%s", out)
	}
}

// TestServiceCLIOVPNConnect: `wirelane ovpn connect NAME` with the service
// running has the service bring its OpenVPN client tunnel up against a
// real OpenVPN 2.6 server, holds it (traffic flows, the metrics count the
// completed handshake) and takes it down on Ctrl-C.
func TestServiceCLIOVPNConnect(t *testing.T) {
	netns.Need(t, "openvpn")
	sb := newServiceBed(t)
	pki := testpki.New(t, "wirelane-cli-cli-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "cli-client", x509.ExtKeyUsageClientAuth)
	srvDir := t.TempDir()
	for name, body := range map[string]string{
		"ca.crt": string(pki.CAPEM), "server.crt": string(srvCert), "server.key": string(srvKey),
		"server.conf": "port 1197\nproto udp\ndev tun\ntopology subnet\nserver 10.13.0.0 255.255.255.0\nca ca.crt\ncert server.crt\nkey server.key\ndh none\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 1 3\nexplicit-exit-notify 1\nverb 3\n",
	} {
		if err := os.WriteFile(filepath.Join(srvDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	netns.Start(t, sb.nsB, "openvpn", "--cd", srvDir, "--config", "server.conf")
	netns.Eventually(t, 20*time.Second, "openvpn listening", func() error {
		if out, err := netns.Try(sb.nsB, nil, "ss", "-uln", "sport", "=", ":1197"); err != nil || !strings.Contains(out, "1197") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := netns.Unique("wc")
	cfg := "client\ndev tun\nremote 10.77.0.2 1197 udp\nnobind\nremote-cert-tls server\n<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNClient, Config: cfg}); err != nil {
		t.Fatalf("import: %v", err)
	}
	env := []string{"WIRELANE_SOCKET=" + sb.socket}
	p := netns.StartEnv(t, nil, env, filepath.Join(binDir, "wirelane"), "ovpn", "connect", name)
	netns.Eventually(t, 30*time.Second, "the client up through the service", func() error {
		tn, err := sb.c.Get(ctx, name)
		if err != nil {
			return err
		}
		if tn.State != service.StateUp {
			return fmt.Errorf("%s %s", tn.State, tn.Error)
		}
		return nil
	})
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.13.0.1")
	m, err := sb.c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := sample(string(m), `wirelane_openvpn_handshakes_total{outcome="completed",tunnel="`+name+`"}`); v < 1 {
		t.Errorf("completed OpenVPN handshakes = %v, want >= 1", v)
	}
	// The client's session's drop counters, from its status: present, and
	// nothing dropped on a clean link.
	for _, reason := range []string{"bad_control", "bad_data"} {
		if v := sample(string(m), `wirelane_openvpn_dropped_packets_total{reason="`+reason+`",tunnel="`+name+`"}`); v != 0 {
			t.Errorf("the client's %s drops = %v, want 0 (-1: not exported)", reason, v)
		}
	}
	p.Cmd.Process.Signal(syscall.SIGINT)
	out, err := p.Wait(t, 20*time.Second)
	if err != nil || !strings.Contains(out, "through the Wirelane service") || !strings.Contains(out, name+": up") {
		t.Errorf("ovpn connect through the service: %v\n%s", err, out)
	}
	if tn, _ := sb.c.Get(ctx, name); tn.State != service.StateDown {
		t.Errorf("after Ctrl-C: %s, want down", tn.State)
	}
	if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", name); err == nil {
		t.Errorf("the device is still there:\n%s", out)
	}
}
