package e2e

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// TestServiceReloadOpenVPNOnSIGHUP: SIGHUP to the service (wirelaned)
// reloads an OpenVPN server tunnel it runs, in place, under a real
// OpenVPN 2.6 client: a new `route` line and the client's
// client-config-dir file moving its iroute apply (the service's side
// reaches the client's new network behind it, no longer the old one);
// the client, pinging the server every 10 ms across the signal, loses no
// ping and does not reconnect.
func TestServiceReloadOpenVPNOnSIGHUP(t *testing.T) {
	netns.Need(t, "openvpn", "ping")
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	pki := testpki.New(t, "wirelane-svc-sighup-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "desk", x509.ExtKeyUsageClientAuth)
	work := t.TempDir()
	ccd := filepath.Join(work, "ccd")
	write := func(path, body string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(ccd, 0o700); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(ccd, "desk"), "iroute 10.95.0.0 255.255.255.0\n")
	name := netns.Unique("wh")
	conf := "port 11941\nproto udp\ndev " + name + "\ntopology subnet\nserver 10.94.0.0 255.255.255.0\n<ca>\n" + string(pki.CAPEM) +
		"</ca>\n<cert>\n" + string(srvCert) + "</cert>\n<key>\n" + string(srvKey) + "</key>\nkeepalive 10 60\ndata-ciphers AES-256-GCM\n" +
		"client-config-dir " + ccd + "\nroute 10.95.0.0 255.255.255.0\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNServer, Config: conf}); err != nil {
		t.Fatalf("import: %v", err)
	}
	if _, err := sb.c.Up(ctx, name); err != nil {
		t.Fatalf("up: %v", err)
	}
	for _, a := range []string{"10.95.0.1/32", "10.96.0.1/32"} {
		netns.Run(t, sb.nsB, "ip", "addr", "add", a, "dev", "lo")
	}
	log := filepath.Join(work, "desk.log")
	write(filepath.Join(work, "desk.conf"), "client\ndev tun\nproto udp\nremote 10.77.0.1 11941\nnobind\nremote-cert-tls server\n<ca>\n"+string(pki.CAPEM)+
		"</ca>\n<cert>\n"+string(cliCert)+"</cert>\n<key>\n"+string(cliKey)+"</key>\ndata-ciphers AES-256-GCM\ndisable-dco\nverb 3\nlog "+log+"\n")
	netns.Start(t, sb.nsB, "openvpn", "--config", filepath.Join(work, "desk.conf"))
	deskLog := func() string { b, _ := os.ReadFile(log); return string(b) }
	netns.Eventually(t, 20*time.Second, "the OpenVPN client connected", func() error {
		if !strings.Contains(deskLog(), "Initialization Sequence Completed") {
			return errors.New("not yet")
		}
		return nil
	})
	reaches := func(dst string) error {
		_, err := netns.Try(sb.nsA, nil, "ping", "-c", "1", "-W", "1", dst)
		return err
	}
	netns.Eventually(t, 5*time.Second, "the network behind the client", func() error { return reaches("10.95.0.1") })
	if reaches("10.96.0.1") == nil {
		t.Fatal("10.96.0.1 reached before the reload")
	}

	pings := make(chan string, 1)
	// -w: ping waits for every reply (a slow last one on a loaded
	// machine is not a loss) and sends more for each one lost, which
	// then shows as transmitted > received.
	go func() {
		out, _ := netns.Command(sb.nsB, "ping", "-n", "-q", "-i", "0.01", "-W", "1", "-w", "15", "-c", "200", "10.94.0.1").CombinedOutput()
		pings <- string(out)
	}()
	time.Sleep(500 * time.Millisecond)
	stored := filepath.Join(sb.dir, "wirelane", "openvpn-server", name+".ovpn")
	write(stored, conf+"route 10.96.0.0 255.255.255.0\n")
	write(filepath.Join(ccd, "desk"), "iroute 10.96.0.0 255.255.255.0\n")
	sb.proc.Cmd.Process.Signal(syscall.SIGHUP)
	netns.Eventually(t, 10*time.Second, "the SIGHUP reload: route and iroute", func() error {
		if r := netns.Run(t, sb.nsA, "ip", "route", "show", "10.96.0.0/24"); !strings.Contains(r, "dev "+name) {
			return fmt.Errorf("no route on %s: %q", name, r)
		}
		return reaches("10.96.0.1")
	})
	if reaches("10.95.0.1") == nil {
		t.Error("the client's old iroute 10.95.0.0/24 is still routed")
	}
	out := <-pings
	if m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) received`).FindStringSubmatch(out); m == nil || m[1] != m[2] {
		t.Errorf("the client lost pings across SIGHUP:\n%s", out)
	}
	if l := deskLog(); strings.Count(l, "Initialization Sequence Completed") != 1 || strings.Contains(l, "soft reset") {
		t.Errorf("the client reconnected or renegotiated:\n%s", l)
	}
	if tn, err := sb.c.Get(ctx, name); err != nil || tn.State != service.StateUp {
		t.Errorf("after SIGHUP: %+v, %v", tn, err)
	}
	select {
	case <-sb.proc.Exited():
		t.Fatalf("SIGHUP stopped the service:\n%s", sb.proc.Output())
	default:
	}
}
