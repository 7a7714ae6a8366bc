package ovpncli

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/netns"
	"github.com/wirelane/wirelane/ovpn/internal/testpki"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// syncBuffer is a bytes.Buffer safe for a writing process and a reading
// test.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// helper is this test binary re-executed as `wirelane ovpn connect|serve`
// inside a namespace.
type helper struct {
	cmd  *exec.Cmd
	out  syncBuffer
	done chan struct{}
	err  error // set before done closes
}

func startHelper(t *testing.T, ns *netns.NS, which string, args ...string) *helper {
	t.Helper()
	h := &helper{done: make(chan struct{})}
	h.cmd = netns.Command(ns, append([]string{os.Args[0]}, args...)...)
	h.cmd.Env = append(os.Environ(), "WIRELANE_OVPNCLI_HELPER="+which, "WIRELANE_OVPNCLI_STATUS_DIR="+StatusDir)
	h.cmd.Stdout, h.cmd.Stderr = &h.out, &h.out
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.err = h.cmd.Wait(); close(h.done) }()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			h.cmd.Process.Kill()
			<-h.done
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", which, h.out.String())
		}
	})
	return h
}

func (h *helper) waitFor(t *testing.T, what string, d time.Duration) {
	t.Helper()
	netns.Eventually(t, d, fmt.Sprintf("output %q", what), func() error {
		if strings.Contains(h.out.String(), what) {
			return nil
		}
		select {
		case <-h.done:
			return fmt.Errorf("exited (%v):\n%s", h.err, h.out.String())
		default:
			return fmt.Errorf("not yet")
		}
	})
}

// interrupt sends SIGINT and waits for a clean exit.
func (h *helper) interrupt(t *testing.T) {
	t.Helper()
	h.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-h.done:
		if h.err != nil {
			t.Fatalf("exit after SIGINT: %v\n%s", h.err, h.out.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10s after SIGINT:\n%s", h.out.String())
	}
}

// Serve and Connect against each other: the client's namespace gets the
// pushed address and route, pings cross the tunnel, and Ctrl-C on either
// side removes what it added.
func TestE2EConnectServe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test needs root (network namespaces and TUN devices)")
	}
	netns.Need(t, "ping")
	pki := testpki.New(t, "Wirelane CLI Test CA")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "cli1", x509.ExtKeyUsageClientAuth)
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i*7 + 1)
	}
	dir := t.TempDir()
	oldDir := StatusDir
	StatusDir = filepath.Join(dir, "run")
	t.Cleanup(func() { StatusDir = oldDir })
	files := map[string]string{
		"ca.crt": string(pki.CAPEM), "server.crt": string(srvCert), "server.key": string(srvKey), "ta.key": string(k.Format()),
		"server.conf": "port 1194\nproto udp\ndev wlsrv0\ntopology subnet\nserver 10.9.0.0 255.255.255.0\n" +
			"ca ca.crt\ncert server.crt\nkey server.key\ndh none\ntls-crypt ta.key\n" +
			"data-ciphers CHACHA20-POLY1305:AES-256-GCM\npush \"route 10.98.0.0 255.255.255.0\"\n" +
			"push \"redirect-gateway def1\"\nkeepalive 10 60\nverb 3\n",
		"cli1.ovpn": "client\ndev tun\nremote 192.168.81.1 1194 udp\nremote 192.168.81.77 1194 udp\nnobind\nremote-cert-tls server\n" +
			"<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n" +
			"<tls-crypt>\n" + string(k.Format()) + "</tls-crypt>\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	srvNS, cliNS := netns.New(t, "ocs"), netns.New(t, "occ")
	netns.Veth(t, srvNS, "s1", cliNS, "c1")
	netns.Run(t, srvNS, "ip", "addr", "add", "192.168.81.1/24", "dev", "s1")
	netns.Run(t, cliNS, "ip", "addr", "add", "192.168.81.2/24", "dev", "c1")
	netns.Run(t, srvNS, "ip", "addr", "add", "10.98.0.1/32", "dev", "lo")

	srv := startHelper(t, srvNS, "serve", filepath.Join(dir, "server.conf"))
	srv.waitFor(t, "listening on udp", 10*time.Second)
	cli := startHelper(t, cliNS, "connect", "--dev", "wlc0", filepath.Join(dir, "cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	for _, want := range []string{"connected: address 10.9.0.2/24, gateway 10.9.0.1, cipher CHACHA20-POLY1305, peer-id 0",
		"device wlc0: 10.9.0.2/24", "route 10.98.0.0/24 via 10.9.0.1"} {
		if !strings.Contains(cli.out.String(), want) {
			t.Fatalf("connect output lacks %q:\n%s", want, cli.out.String())
		}
	}
	srv.waitFor(t, `client "cli1" connected from 192.168.81.2`, 5*time.Second)
	if a := netns.Run(t, cliNS, "ip", "-4", "addr", "show", "dev", "wlc0"); !strings.Contains(a, "10.9.0.2/24") {
		t.Fatalf("wlc0 addresses:\n%s", a)
	}
	if r := netns.Run(t, cliNS, "ip", "-4", "route", "show", "dev", "wlc0"); !strings.Contains(r, "10.98.0.0/24 via 10.9.0.1") {
		t.Fatalf("wlc0 routes:\n%s", r)
	}
	// redirect-gateway: the two halves through the tunnel and a host route
	// for the server that answered, none for the remote never tried.
	all := netns.Run(t, cliNS, "ip", "-4", "route", "show")
	for _, want := range []string{"0.0.0.0/1 via 10.9.0.1 dev wlc0", "128.0.0.0/1 via 10.9.0.1 dev wlc0", "192.168.81.1 dev c1"} {
		if !strings.Contains(all, want) {
			t.Fatalf("routes lack %q:\n%s", want, all)
		}
	}
	if strings.Contains(all, "192.168.81.77") {
		t.Fatalf("a host route for the remote that was not used:\n%s", all)
	}
	netns.Run(t, cliNS, "ping", "-c", "3", "-i", "0.2", "-W", "2", "10.9.0.1")
	netns.Run(t, cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.98.0.1")
	netns.Run(t, srvNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.9.0.2")

	// Both tunnels appear in the status files.
	var tunnels []TunnelStatus
	netns.Eventually(t, 5*time.Second, "status of both tunnels with traffic", func() error {
		var err error
		if tunnels, err = Status(); err != nil {
			return err
		}
		if len(tunnels) != 2 || len(tunnels[1].Clients) != 1 || tunnels[0].RxBytes == 0 || tunnels[1].RxBytes == 0 {
			return fmt.Errorf("got %+v", tunnels)
		}
		return nil
	})
	c, sv := tunnels[0], tunnels[1] // ordered by interface: wlc0, wlsrv0
	if c.Kind != KindClient || c.Interface != "wlc0" || c.Remote != "192.168.81.1:1194" || c.Address != "10.9.0.2/24" ||
		c.Cipher != "CHACHA20-POLY1305" || c.Proto != "UDPv4" || c.Since.IsZero() {
		t.Fatalf("client status %+v", c)
	}
	if sv.Kind != KindServer || sv.Interface != "wlsrv0" || sv.Address != "10.9.0.1/24" || sv.Clients[0].CommonName != "cli1" ||
		sv.Clients[0].Address != "10.9.0.2" || sv.Clients[0].RxBytes == 0 {
		t.Fatalf("server status %+v", sv)
	}
	var text strings.Builder
	FormatStatus(&text, tunnels)
	t.Logf("status:\n%s", text.String())

	cli.interrupt(t)
	if tunnels, err := Status(); err != nil || len(tunnels) != 1 || tunnels[0].Kind != KindServer {
		t.Fatalf("status after the client left: %+v, %v", tunnels, err)
	}
	if !strings.Contains(cli.out.String(), "removed routes and wlc0") {
		t.Fatalf("connect output after SIGINT:\n%s", cli.out.String())
	}
	if out, err := netns.Try(cliNS, nil, "ip", "link", "show", "wlc0"); err == nil {
		t.Fatalf("wlc0 still exists after disconnect:\n%s", out)
	}
	srv.waitFor(t, `client "cli1" (10.9.0.2) left: the client sent an exit notification`, 5*time.Second)
	srv.interrupt(t)
	if names, _ := filepath.Glob(filepath.Join(StatusDir, "*")); len(names) != 0 {
		t.Fatalf("status files left after exit: %v", names)
	}
	if out, err := netns.Try(srvNS, nil, "ip", "link", "show", "wlsrv0"); err == nil {
		t.Fatalf("wlsrv0 still exists after the server stopped:\n%s", out)
	}
	t.Logf("connect output:\n%s\nserve output:\n%s", cli.out.String(), srv.out.String())
}
