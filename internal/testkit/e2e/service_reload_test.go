package e2e

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// TestServiceReload reloads tunnels of the real service (wirelaned):
// POST /v1/tunnels/NAME/reload of a WireGuard tunnel, first as a dry run
// (the plan, nothing changed), then for real (the new address is there,
// the peer still answers); a broken file is a 400 with its line and
// changes nothing; SIGHUP to the service reloads it again from its file;
// an OpenVPN server tunnel of the service reloads a new route in place.
func TestServiceReload(t *testing.T) {
	sb := newServiceBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := sb.c.Up(ctx, sb.a); err != nil {
		t.Fatalf("up: %v", err)
	}
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.78.0.2")
	file := filepath.Join(sb.dir, "wireguard", sb.a+".conf")
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	addrs := func() string { return netns.Run(t, sb.nsA, "ip", "-4", "addr", "show", "dev", sb.a) }
	write(strings.Replace(string(orig), "Address = 10.78.0.1/24", "Address = 10.78.0.1/24, 10.79.5.1/24", 1))
	res, err := sb.c.Reload(ctx, sb.a, true)
	if err != nil || !res.DryRun || !strings.Contains(strings.Join(res.Changes, "\n"), "10.79.5.1/24") {
		t.Fatalf("dry run: %+v, %v", res, err)
	}
	if strings.Contains(addrs(), "10.79.5.1") {
		t.Fatal("the dry run added the address")
	}
	if res, err = sb.c.Reload(ctx, sb.a, false); err != nil || res.DryRun || len(res.Changes) == 0 {
		t.Fatalf("reload: %+v, %v", res, err)
	}
	if !strings.Contains(addrs(), "10.79.5.1/24") {
		t.Fatalf("after the reload:\n%s", addrs())
	}
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.78.0.2")
	if tn, _ := sb.c.Get(ctx, sb.a); tn.State != service.StateUp {
		t.Errorf("state after the reload: %s", tn.State)
	}

	// A broken file: 400 with the line, nothing changed.
	was := addrs()
	write(string(orig) + "Frobnicate = 1\n")
	var ce *client.Error
	if _, err := sb.c.Reload(ctx, sb.a, false); !errors.As(err, &ce) || ce.Status != 400 || ce.Line != strings.Count(string(orig), "\n")+1 {
		t.Errorf("broken file: %v", err)
	}
	if now := addrs(); now != was {
		t.Errorf("a broken file changed the addresses:\n%s\n->\n%s", was, now)
	}
	if _, err := sb.c.Reload(ctx, "nosuch", false); !errors.As(err, &ce) || ce.Status != 404 {
		t.Errorf("reload of an unknown tunnel: %v", err)
	}

	// SIGHUP reloads every tunnel that is up.
	write(strings.Replace(string(orig), "Address = 10.78.0.1/24", "Address = 10.78.0.1/24, 10.79.6.1/24", 1))
	sb.proc.Cmd.Process.Signal(syscall.SIGHUP)
	netns.Eventually(t, 10*time.Second, "the address of the SIGHUP reload", func() error {
		if a := addrs(); !strings.Contains(a, "10.79.6.1/24") || strings.Contains(a, "10.79.5.1") {
			return errors.New(a)
		}
		return nil
	})
	select {
	case <-sb.proc.Exited():
		t.Fatalf("SIGHUP stopped the service:\n%s", sb.proc.Output())
	default:
	}

	// An OpenVPN server run by the service: a new route in place.
	pki := testpki.New(t, "wirelane-svc-reload-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	name := netns.Unique("wr")
	conf := "port 11940\nproto udp\ndev " + name + "\ntopology subnet\nserver 10.93.0.0 255.255.255.0\n<ca>\n" + string(pki.CAPEM) +
		"</ca>\n<cert>\n" + string(srvCert) + "</cert>\n<key>\n" + string(srvKey) + "</key>\nkeepalive 10 60\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNServer, Config: conf}); err != nil {
		t.Fatalf("import: %v", err)
	}
	if _, err := sb.c.Up(ctx, name); err != nil {
		t.Fatalf("up: %v", err)
	}
	stored := filepath.Join(sb.dir, "wirelane", "openvpn-server", name+".ovpn")
	if err := os.WriteFile(stored, []byte(conf+"route 10.66.0.0 255.255.0.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err = sb.c.Reload(ctx, name, false)
	if err != nil || !strings.Contains(strings.Join(res.Changes, "\n"), "route: added 10.66.0.0/16") {
		t.Fatalf("OpenVPN server reload: %+v, %v", res, err)
	}
	if r := netns.Run(t, sb.nsA, "ip", "route", "show", "10.66.0.0/16"); !strings.Contains(r, "dev "+name) {
		t.Errorf("the route is not on %s: %q", name, r)
	}
	if err := os.WriteFile(stored, []byte(conf+"proto tcp\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.c.Reload(ctx, name, false); err == nil || !strings.Contains(err.Error(), "needs a restart") {
		t.Errorf("a proto change: %v", err)
	}
	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Errorf("down: %v", err)
	}
	if _, err := sb.c.Reload(ctx, name, false); !errors.As(err, &ce) || ce.Status != 409 {
		t.Errorf("reload of a tunnel that is down: %v", err)
	}
}
