package e2e

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// TestReloadOpenVPNServeCLI drives the binaries: `wirelane reload` finds
// a foreground `wirelane ovpn serve` by its interface and by its file,
// prints the plan (--dry-run: nothing applied) and applies a new route;
// SIGHUP to the foreground server stops it (a closed terminal), and its
// route goes with it.
func TestReloadOpenVPNServeCLI(t *testing.T) {
	need(t, implCLI)
	ns := netns.New(t, "wlro")
	pki := testpki.New(t, "wirelane-reload-cli-ca")
	cert, key := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	dir := t.TempDir()
	dev := netns.Unique("wo")
	base := "port 11941\nproto udp\ndev " + dev + "\ntopology subnet\nserver 10.94.0.0 255.255.255.0\nca ca.crt\ncert s.crt\nkey s.key\nkeepalive 10 60\n"
	file := filepath.Join(dir, "srv.conf")
	for name, body := range map[string]string{"ca.crt": string(pki.CAPEM), "s.crt": string(cert), "s.key": string(key), "srv.conf": base} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srv := netns.Start(t, ns, filepath.Join(binDir, "wirelane"), "ovpn", "serve", file)
	netns.Eventually(t, 10*time.Second, "the server's control socket", func() error {
		out, err := cli(ns, "reload", "--dry-run", dev)
		if err != nil || !strings.Contains(out, "no change") {
			return os.ErrNotExist
		}
		return nil
	})
	if err := os.WriteFile(file, []byte(base+"route 10.95.0.0 255.255.0.0\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := cli(ns, "reload", "--dry-run", file)
	if err != nil || !strings.Contains(out, "reload would make 1 change(s)") || !strings.Contains(out, "route: added 10.95.0.0/16") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if r := netns.Run(t, ns, "ip", "route", "show", "10.95.0.0/16"); r != "" {
		t.Fatalf("the dry run added the route: %s", r)
	}
	if out, err = cli(ns, "reload", "srv"); err != nil || !strings.Contains(out, "reloaded from "+file+", 1 change(s)") {
		t.Fatalf("reload: %v\n%s", err, out)
	}
	if r := netns.Run(t, ns, "ip", "route", "show", "10.95.0.0/16"); !strings.Contains(r, "dev "+dev) {
		t.Fatalf("route after the reload: %q", r)
	}
	if err := os.WriteFile(file, []byte(base+"tun-mtu 100\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err = cli(ns, "reload", dev); err == nil || !strings.Contains(out, file+":10: tun-mtu") {
		t.Errorf("broken file: %v\n%s", err, out)
	}
	srv.Cmd.Process.Signal(syscall.SIGHUP)
	if _, err := srv.Wait(t, 10*time.Second); err != nil {
		t.Logf("serve after SIGHUP: %v\n%s", err, srv.Output())
	}
	if r, _ := netns.Try(ns, nil, "ip", "route", "show", "10.95.0.0/16"); strings.TrimSpace(r) != "" {
		t.Errorf("the route outlived the server: %q", r)
	}
}
