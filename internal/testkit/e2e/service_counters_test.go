package e2e

// The OpenVPN engines' error counters in the service's /metrics, provoked
// for real: a client tunnel's TUN writes refused by the kernel (the
// device set down under it), and a server's handshakes refused for a
// certificate from another CA and a wrong tls-crypt key, each presented
// by a real OpenVPN 2.6 client.

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// checkExposition runs promtool check metrics on an exposition, when
// promtool is installed.
func checkExposition(t *testing.T, m []byte) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		return
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(string(m))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestServiceOpenVPNClientTUNErrors: an OpenVPN client tunnel of the
// service, up against a real OpenVPN 2.6 server, counts no TUN error
// while it works; once its device is set down, the packets the server
// sends it (pings from the server's side) are refused by the kernel
// (EIO), and wirelane_tun_errors_total of the tunnel counts them; with
// `wirelane show` prints them ("tun errors: N"); with
// the route to the server removed, its sends fail (ENETUNREACH) and
// wirelane_socket_errors_total{op="send"} counts them.
func TestServiceOpenVPNClientTUNErrors(t *testing.T) {
	netns.Need(t, "openvpn")
	sb := newServiceBed(t)
	pki := testpki.New(t, "wirelane-svc-tunerr-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "svc-tunerr", x509.ExtKeyUsageClientAuth)
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
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := netns.Unique("wt")
	cfg := "client\ndev tun\nremote 10.77.0.2 1194 udp\nnobind\nremote-cert-tls server\n<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNClient, Config: cfg}); err != nil {
		t.Fatalf("import: %v", err)
	}
	tn, err := sb.c.Up(ctx, name)
	if err != nil {
		select {
		case <-srv.Exited():
			t.Logf("openvpn:\n%s", srv.Output())
		default:
		}
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), name)
	if len(tn.Addresses) == 0 {
		t.Fatalf("no address: %+v", tn)
	}
	addr := tn.Addresses[0].Addr().String()
	series := `wirelane_tun_errors_total{tunnel="` + name + `"}`
	netns.Run(t, sb.nsB, "ping", "-c", "3", "-i", "0.3", "-W", "2", addr)
	m, err := sb.c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := sample(string(m), series); v != 0 {
		t.Fatalf("while the tunnel works: %s = %v, want 0\n%s", series, v, m)
	}

	netns.Run(t, sb.nsA, "ip", "link", "set", name, "down")
	// The replies cannot come back: only the requests matter, each one
	// a write the kernel refuses.
	netns.Try(sb.nsB, nil, "ping", "-c", "5", "-i", "0.2", "-W", "1", addr)
	netns.Eventually(t, 10*time.Second, "the refused writes counted", func() error {
		m, err = sb.c.Metrics(ctx)
		if err != nil {
			return err
		}
		if v := sample(string(m), series); v < 1 {
			return fmt.Errorf("%s = %v", series, v)
		}
		return nil
	})
	checkExposition(t, m)
	cs, err := sb.c.Counters(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if v := counterValue(cs, "wirelane_tun_errors_total", ""); v < 1 {
		t.Errorf("GET .../counters: wirelane_tun_errors_total = %v, want >= 1: %+v", v, cs)
	}
	if tn, _ := sb.c.Get(ctx, name); tn.State != service.StateUp {
		t.Errorf("the tunnel is %s after the refused writes: they are not fatal", tn.State)
	}
	// `wirelane show` through the service prints them.
	if out := netns.RunEnv(t, nil, []string{"WIRELANE_SOCKET=" + sb.socket}, filepath.Join(binDir, "wirelane"), "show", name); !strings.Contains(out, "\n  tun errors: ") {
		t.Errorf("wirelane show %s through the service has no tun errors line:\n%s", name, out)
	}
	netns.Run(t, sb.nsA, "ip", "link", "set", name, "up")

	// Without a route to the server, the tunnel's sends fail (ENETUNREACH).
	sendSeries := `wirelane_socket_errors_total{op="send",tunnel="` + name + `"}`
	if v := sample(string(m), sendSeries); v != 0 {
		t.Fatalf("%s = %v before any failed send", sendSeries, v)
	}
	netns.Run(t, sb.nsA, "ip", "route", "del", "10.77.0.0/24", "dev", "eth0")
	netns.Try(sb.nsA, nil, "ping", "-c", "3", "-i", "0.2", "-W", "1", "10.9.0.1")
	netns.Eventually(t, 10*time.Second, "the failed sends counted", func() error {
		m, err = sb.c.Metrics(ctx)
		if err != nil {
			return err
		}
		if v := sample(string(m), sendSeries); v < 1 {
			return fmt.Errorf("%s = %v", sendSeries, v)
		}
		return nil
	})
	netns.Run(t, sb.nsA, "ip", "route", "add", "10.77.0.0/24", "dev", "eth0")
	checkExposition(t, m)
	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Fatalf("down: %v", err)
	}
}

// TestServiceOpenVPNServerRejectedHandshakes: an OpenVPN server of the
// service with tls-crypt refuses a real OpenVPN 2.6 client presenting a
// certificate from another CA (reason verify) and one with a wrong
// tls-crypt key (reason tls_wrap); /metrics shows both under
// wirelane_openvpn_handshakes_rejected_total, their sum as the failed
// handshakes, and the exposition passes promtool; `wirelane show NAME`
// through the service prints them with the server's drops.
func TestServiceOpenVPNServerRejectedHandshakes(t *testing.T) {
	netns.Need(t, "openvpn")
	sb := newServiceBed(t)
	pki := testpki.New(t, "wirelane-svc-rej-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	other := testpki.New(t, "wirelane-svc-other-ca")
	strCert, strKey := other.Valid(t, "svc-stranger", x509.ExtKeyUsageClientAuth)
	cliCert, cliKey := pki.Valid(t, "svc-wrongkey", x509.ExtKeyUsageClientAuth)
	var good, wrong wrap.StaticKey
	for i := range good {
		good[i], wrong[i] = byte(i*13+7), byte(i*5+2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	name := netns.Unique("wr")
	cfg := "port 1195\nproto udp\ndev tun\ntopology subnet\nserver 10.12.0.0 255.255.255.0\ndh none\nkeepalive 1 5\n" +
		"<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(srvCert) + "</cert>\n<key>\n" + string(srvKey) + "</key>\n" +
		"<tls-crypt>\n" + string(good.Format()) + "</tls-crypt>\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNServer, Config: cfg}); err != nil {
		t.Fatalf("import: %v", err)
	}
	if _, err := sb.c.Up(ctx, name); err != nil {
		t.Fatalf("up: %v", err)
	}
	defer sb.c.Down(context.Background(), name)

	cliDir := t.TempDir()
	files := map[string]string{"ca.crt": string(pki.CAPEM), "good.tc": string(good.Format()), "wrong.tc": string(wrong.Format()),
		"stranger.crt": string(strCert), "stranger.key": string(strKey), "wrongkey.crt": string(cliCert), "wrongkey.key": string(cliKey)}
	for _, c := range []struct{ who, key string }{{"stranger", "good.tc"}, {"wrongkey", "wrong.tc"}} {
		files[c.who+".conf"] = "client\ndev null\nproto udp\nremote 10.77.0.1 1195\nnobind\nremote-cert-tls server\nca ca.crt\n" +
			"cert " + c.who + ".crt\nkey " + c.who + ".key\ntls-crypt " + c.key + "\nconnect-retry 1\ndisable-dco\nverb 3\n"
	}
	for n, body := range files {
		if err := os.WriteFile(filepath.Join(cliDir, n), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	metric := func(reason string) string {
		return `wirelane_openvpn_handshakes_rejected_total{reason="` + reason + `",tunnel="` + name + `"}`
	}
	var m []byte
	for _, c := range []struct{ who, reason string }{{"stranger", "verify"}, {"wrongkey", "tls_wrap"}} {
		logFile := filepath.Join(cliDir, c.who+".log")
		cli := netns.Start(t, sb.nsB, "openvpn", "--cd", cliDir, "--config", c.who+".conf", "--log", logFile)
		netns.Eventually(t, 30*time.Second, c.who+" refused as "+c.reason, func() error {
			var err error
			if m, err = sb.c.Metrics(ctx); err != nil {
				return err
			}
			if v := sample(string(m), metric(c.reason)); v < 1 {
				return fmt.Errorf("%s = %v", metric(c.reason), v)
			}
			return nil
		})
		log, _ := os.ReadFile(logFile)
		if strings.Contains(string(log), "Initialization Sequence Completed") {
			t.Fatalf("%s connected:\n%s", c.who, log)
		}
		cli.Cmd.Process.Kill()
	}
	for _, r := range []string{"auth", "max_clients", "timeout"} {
		if v := sample(string(m), metric(r)); v != 0 {
			t.Errorf("%s = %v, want 0", metric(r), v)
		}
	}
	failed := sample(string(m), `wirelane_openvpn_handshakes_total{outcome="failed",tunnel="`+name+`"}`)
	if sum := sample(string(m), metric("verify")) + sample(string(m), metric("tls_wrap")); failed < sum || failed < 2 {
		t.Errorf("failed handshakes %v, rejected verify+tls_wrap %v", failed, sum)
	}
	checkExposition(t, m)
	cs, err := sb.c.Counters(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"verify", "tls_wrap"} {
		if v := counterValue(cs, "wirelane_openvpn_handshakes_rejected_total", r); v < 1 {
			t.Errorf("GET .../counters: rejected %s = %v, want >= 1: %+v", r, v, cs)
		}
	}
	// `wirelane show` through the service prints them, and the server's
	// drops, which its status file does not hold (the resets that failed
	// tls-crypt are bad_control).
	out := netns.RunEnv(t, nil, []string{"WIRELANE_SOCKET=" + sb.socket}, filepath.Join(binDir, "wirelane"), "show", name)
	if !strings.Contains(out, "\n  failed handshakes: ") || !strings.Contains(out, " tls_wrap ") || !strings.Contains(out, " verify ") ||
		!strings.Contains(out, "\n  dropped: bad_control ") {
		t.Errorf("wirelane show %s through the service:\n%s", name, out)
	}
}

// counterValue is the value of the counter of that name (and reason
// label, when not "") in a GET .../counters answer, -1 when absent.
func counterValue(cs []service.Counter, name, reason string) float64 {
	for _, c := range cs {
		if c.Name == name && (reason == "" || c.Labels["reason"] == reason) {
			return c.Value
		}
	}
	return -1
}
