package e2e

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
)

// TestServiceOpenVPNClient imports an OpenVPN client configuration
// through the API, brings it up against a real OpenVPN 2.6 server in the
// other namespace, pings through it, reads its status, sees it
// reconnecting (and up again) when the server restarts, and takes it down:
// the interface goes with it.
func TestServiceOpenVPNClient(t *testing.T) {
	netns.Need(t, "openvpn")
	sb := newServiceBed(t)
	pki := testpki.New(t, "wirelane-svc-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "svc-client", x509.ExtKeyUsageClientAuth)
	srvDir := t.TempDir()
	for name, body := range map[string]string{
		"ca.crt": string(pki.CAPEM), "server.crt": string(srvCert), "server.key": string(srvKey),
		"server.conf": "port 1194\nproto udp\ndev tun\ntopology subnet\nserver 10.9.0.0 255.255.255.0\nca ca.crt\ncert server.crt\nkey server.key\ndh none\n" +
			"data-ciphers AES-256-GCM\ndisable-dco\nkeepalive 1 3\nexplicit-exit-notify 1\nverb 3\n",
	} {
		if err := os.WriteFile(filepath.Join(srvDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	startServer := func() *netns.Proc {
		srv := netns.Start(t, sb.nsB, "openvpn", "--cd", srvDir, "--config", "server.conf")
		netns.Eventually(t, 20*time.Second, "openvpn listening", func() error {
			if out, err := netns.Try(sb.nsB, nil, "ss", "-uln", "sport", "=", ":1194"); err != nil || !strings.Contains(out, "1194") {
				return os.ErrNotExist
			}
			return nil
		})
		return srv
	}
	srv := startServer()

	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	name := netns.Unique("wo")
	cfg := "client\ndev tun\nremote 10.77.0.2 1194 udp\nnobind\nremote-cert-tls server\n<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNClient, Config: cfg}); err != nil {
		t.Fatalf("import: %v", err)
	}
	stored := filepath.Join(sb.dir, "wirelane", "openvpn-client", name+".ovpn")
	if fi, err := os.Stat(stored); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the stored file: %v, %v", fi, err)
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
	if tn.State != service.StateUp || len(tn.Addresses) == 0 || !strings.HasPrefix(tn.Addresses[0].String(), "10.9.0.") {
		t.Errorf("after up: %+v", tn)
	}
	netns.Run(t, sb.nsA, "ping", "-c", "3", "-i", "0.3", "-W", "2", "10.9.0.1")
	netns.Eventually(t, 5*time.Second, "the tunnel's counters", func() error {
		tn, err := sb.c.Get(ctx, name)
		if err != nil {
			return err
		}
		if len(tn.Peers) != 1 || tn.RxBytes == 0 {
			return os.ErrNotExist
		}
		return nil
	})

	// The server restarts: SIGTERM sends its clients RESTART.
	evs, err := sb.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	states := make(chan service.Event, 64)
	go func() {
		for evs.Next() {
			if e := evs.Event(); e.Type == service.EventTunnel && e.Tunnel == name && !e.Initial {
				states <- e
			}
		}
		close(states)
	}()
	srv.Cmd.Process.Signal(syscall.SIGTERM)
	srv.Wait(t, 10*time.Second)
	next := func(want service.State) {
		t.Helper()
		select {
		case e := <-states:
			if e.State != want {
				t.Fatalf("state %s (%s), want %s", e.State, e.Reason, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s event", want)
		}
	}
	next(service.StateReconnecting)
	startServer()
	next(service.StateUp)
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.9.0.1")

	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Fatalf("down: %v", err)
	}
	if tn, _ := sb.c.Get(ctx, name); tn.State != service.StateDown {
		t.Errorf("after down: %s", tn.State)
	}
	if out, err := netns.Try(sb.nsA, nil, "ip", "link", "show", name); err == nil {
		t.Errorf("the interface is still there after down:\n%s", out)
	}
	if err := sb.c.Delete(ctx, name); err != nil {
		t.Errorf("delete: %v", err)
	}
}

// TestServiceOpenVPNAsksForCredentials: a client file with auth-user-pass
// and a static challenge but no credentials starts, publishes an auth
// event, and comes up once a client answers it; OpenVPN's own check (its
// auth-user-pass-verify script) accepts what was answered.
func TestServiceOpenVPNAsksForCredentials(t *testing.T) {
	sb, name := newAuthBed(t)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	auth, upErr := upUntilAsked(ctx, t, sb, name)
	if auth.Kind != "password" || auth.Prompt != "Enter OTP" || !auth.Echo || auth.Username != "" {
		t.Fatalf("auth event: %+v", auth)
	}
	if err := sb.c.Answer(ctx, name, service.AuthAnswer{Username: "alice", Password: "s3cret", Response: "424242"}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	if err := <-upErr; err != nil {
		t.Fatalf("up: %v", err)
	}
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.9.0.1")
	if err := sb.c.Answer(ctx, name, service.AuthAnswer{Password: "x"}); err == nil {
		t.Error("an answer nobody asked for was accepted")
	}
	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Fatalf("down: %v", err)
	}
	sb.stop(t)
	if out := sb.proc.Output(); strings.Contains(out, "s3cret") || strings.Contains(out, "424242") {
		t.Errorf("the service logged the credentials:\n%s", out)
	}
}

// TestServiceOpenVPNAsksForThePasswordOnly: a client file whose inline
// <auth-user-pass> holds the username only (#18) does not send an empty
// password: its auth event names the file's username and asks for the
// password (and the static challenge's response), as OpenVPN 2.6
// prompts for it; the answer's username is not used (OpenVPN's check
// accepts alice only), and the tunnel comes up.
func TestServiceOpenVPNAsksForThePasswordOnly(t *testing.T) {
	sb, name := newAuthBedWith(t, "<auth-user-pass>\nalice\n</auth-user-pass>\nstatic-challenge \"Enter OTP\" 1\n")
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	auth, upErr := upUntilAsked(ctx, t, sb, name)
	if auth.Kind != "password" || auth.Username != "alice" || auth.Prompt != "Enter OTP" {
		t.Fatalf("auth event: %+v", auth)
	}
	if err := sb.c.Answer(ctx, name, service.AuthAnswer{Username: "mallory", Password: "s3cret", Response: "424242"}); err != nil {
		t.Fatalf("answer: %v", err)
	}
	if err := <-upErr; err != nil {
		t.Fatalf("up: %v", err)
	}
	netns.Run(t, sb.nsA, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.9.0.1")
	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Fatalf("down: %v", err)
	}
}

// upUntilAsked asks for the tunnel's up (its error on the channel
// returned) and returns the auth event's prompt the up waits on.
func upUntilAsked(ctx context.Context, t *testing.T, sb *serviceBed, name string) (*service.AuthPrompt, <-chan error) {
	t.Helper()
	evs, err := sb.c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer evs.Close()
	upErr := make(chan error, 1)
	go func() {
		_, err := sb.c.Up(ctx, name)
		upErr <- err
	}()
	for evs.Next() {
		if e := evs.Event(); e.Type == service.EventAuth && e.Tunnel == name {
			if e.Auth == nil {
				t.Fatalf("auth event without its prompt: %s", evs.Raw())
			}
			return e.Auth, upErr
		}
	}
	t.Fatalf("no auth event; up: %v", <-upErr)
	return nil, nil
}

// newAuthBed is the service bed with an OpenVPN 2.6 server in nsB that
// checks alice's password and static-challenge response, and the
// service's client tunnel to it, whose file holds neither.
func newAuthBed(t *testing.T) (*serviceBed, string) {
	t.Helper()
	return newAuthBedWith(t, "auth-user-pass\nstatic-challenge \"Enter OTP\" 1\n")
}

// newAuthBedWith is newAuthBed with the client file's credential lines.
func newAuthBedWith(t *testing.T, auth string) (*serviceBed, string) {
	t.Helper()
	netns.Need(t, "openvpn")
	sb := newServiceBed(t)
	pki := testpki.New(t, "wirelane-svc-auth-ca")
	srvCert, srvKey := pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := pki.Valid(t, "svc-client", x509.ExtKeyUsageClientAuth)
	srvDir := t.TempDir()
	// The script gets the username line and SCRV1:b64(password):b64(response).
	check := filepath.Join(srvDir, "check.sh")
	for name, body := range map[string]string{
		"ca.crt": string(pki.CAPEM), "server.crt": string(srvCert), "server.key": string(srvKey),
		"check.sh": "#!/bin/sh\n[ \"$(sed -n 1p \"$1\")\" = alice ] && [ \"$(sed -n 2p \"$1\")\" = SCRV1:czNjcmV0:NDI0MjQy ]\n",
		"server.conf": "port 1194\nproto udp\ndev tun\ntopology subnet\nserver 10.9.0.0 255.255.255.0\nca ca.crt\ncert server.crt\nkey server.key\ndh none\n" +
			"script-security 2\nauth-user-pass-verify " + check + " via-file\ndata-ciphers AES-256-GCM\ndisable-dco\nkeepalive 10 60\nverb 3\n",
	} {
		if err := os.WriteFile(filepath.Join(srvDir, name), []byte(body), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	netns.Start(t, sb.nsB, "openvpn", "--cd", srvDir, "--config", "server.conf")
	netns.Eventually(t, 20*time.Second, "openvpn listening", func() error {
		if out, err := netns.Try(sb.nsB, nil, "ss", "-uln", "sport", "=", ":1194"); err != nil || !strings.Contains(out, "1194") {
			return os.ErrNotExist
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	name := netns.Unique("wo")
	cfg := "client\ndev tun\nremote 10.77.0.2 1194 udp\nnobind\nremote-cert-tls server\n" + auth + "<ca>\n" + string(pki.CAPEM) + "</ca>\n<cert>\n" + string(cliCert) + "</cert>\n<key>\n" + string(cliKey) + "</key>\n"
	if _, err := sb.c.Import(ctx, service.ImportRequest{Name: name, Kind: service.KindOpenVPNClient, Config: cfg}); err != nil {
		t.Fatalf("import: %v", err)
	}
	return sb, name
}

// TestServiceCLIAnswersCredentials: `wirelane up NAME` through the service
// types the credentials the tunnel asks for on its terminal.
func TestServiceCLIAnswersCredentials(t *testing.T) {
	sb, name := newAuthBed(t)
	master, slave := openPTY(t)
	var typed strings.Builder
	var mu sync.Mutex
	go func() { // what the terminal shows
		b := make([]byte, 256)
		for {
			n, err := master.Read(b)
			mu.Lock()
			typed.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	shown := func(what string) {
		t.Helper()
		netns.Eventually(t, 15*time.Second, "the terminal shows "+what, func() error {
			mu.Lock()
			defer mu.Unlock()
			if !strings.Contains(typed.String(), what) {
				return os.ErrNotExist
			}
			return nil
		})
	}
	cmd := netns.Command(nil, filepath.Join(binDir, "wirelane"), "up", name)
	cmd.Env = append(os.Environ(), "WIRELANE_SOCKET="+sb.socket)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	shown("Enter Auth Username: ")
	master.WriteString("alice\n")
	shown("Enter Auth Password: ")
	master.WriteString("s3cret\n")
	shown("CHALLENGE: Enter OTP ")
	master.WriteString("424242\n")
	select {
	case err := <-done:
		if err != nil {
			mu.Lock()
			t.Fatalf("wirelane up: %v\n%s", err, typed.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("wirelane up did not return")
	}
	if out, err := netns.Try(sb.nsA, nil, "ping", "-c", "2", "-i", "0.3", "-W", "2", "10.9.0.1"); err != nil {
		tn, _ := sb.c.Get(context.Background(), name)
		mu.Lock()
		t.Fatalf("ping: %v\n%s\ntunnel: %+v\nterminal:\n%s\n%s", err, out, tn, typed.String(), netns.Run(t, sb.nsA, "ip", "addr"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := sb.c.Down(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// openPTY returns a pseudo-terminal's two ends.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}
