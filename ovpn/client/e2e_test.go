package client

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/internal/testlog"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// The end-to-end tests run Debian's openvpn 2.6 as a server inside a fresh
// network namespace (so its tun device and routes stay there) and connect
// this package's client to it from a socket created in that namespace.

var nsCounter atomic.Int32

type testEnv struct {
	pki        *testpki.PKI
	dir        string
	clientCert []byte
	clientKey  []byte
	tlsKey     *wrap.StaticKey
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("end-to-end test needs root (network namespace and tun device for the openvpn server)")
	}
	if _, err := exec.LookPath("openvpn"); err != nil {
		t.Skip("end-to-end test needs the openvpn binary (apt-get install openvpn)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("end-to-end test needs iproute2 (ip netns)")
	}
}

func newEnv(t *testing.T) *testEnv {
	needRoot(t)
	e := &testEnv{pki: testpki.New(t, "Wirelane Test CA"), dir: t.TempDir()}
	e.clientCert, e.clientKey = e.pki.Valid(t, "client1", x509.ExtKeyUsageClientAuth)
	srvCert, srvKey := e.pki.Valid(t, "server", x509.ExtKeyUsageServerAuth)
	var k wrap.StaticKey
	for i := range k {
		k[i] = byte(i*13 + 7)
	}
	e.tlsKey = &k
	for name, b := range map[string][]byte{"ca.crt": e.pki.CAPEM, "server.crt": srvCert, "server.key": srvKey, "static.key": k.Format()} {
		if err := os.WriteFile(filepath.Join(e.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// server is a running openvpn server in its own network namespace.
type server struct {
	ns     string
	port   int
	tcp    bool
	mu     sync.Mutex
	log    bytes.Buffer // guarded by mu
	cmd    *exec.Cmd
	exited chan struct{}
}

func (s *server) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.Write(b)
}

func (s *server) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// waitLog waits until the server log contains want.
func (s *server) waitLog(t *testing.T, want string, d time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if strings.Contains(s.logText(), want) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// startServer runs openvpn with the base configuration plus extra lines.
func (e *testEnv) startServer(t *testing.T, tcp bool, extra ...string) *server {
	t.Helper()
	proto := "udp4"
	if tcp {
		proto = "tcp4-server"
	}
	conf := strings.Join(append([]string{
		"port 11940", "proto " + proto, "local 127.0.0.1", "dev tun", "topology subnet",
		"server 10.199.0.0 255.255.255.0", "ca ca.crt", "cert server.crt", "key server.key", "dh none",
		"keepalive 10 60", "verb 4", "data-ciphers AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305",
	}, extra...), "\n") + "\n"
	return e.startServerConf(t, tcp, conf)
}

// startServerConf runs openvpn with configuration conf (port 11940 on
// 127.0.0.1) in a fresh namespace.
func (e *testEnv) startServerConf(t *testing.T, tcp bool, conf string) *server {
	t.Helper()
	n := nsCounter.Add(1)
	s := &server{ns: fmt.Sprintf("wlovpn%d-%d", os.Getpid(), n), port: 11940, tcp: tcp, exited: make(chan struct{})}
	if out, err := exec.Command("ip", "netns", "add", s.ns).CombinedOutput(); err != nil {
		t.Skipf("end-to-end test needs network namespaces; ip netns add failed: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", s.ns).Run() })
	if out, err := exec.Command("ip", "-n", s.ns, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up: %v: %s", err, out)
	}
	cfgName := fmt.Sprintf("server%d.conf", n)
	if err := os.WriteFile(filepath.Join(e.dir, cfgName), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd = exec.Command("ip", "netns", "exec", s.ns, "openvpn", "--cd", e.dir, "--config", cfgName)
	s.cmd.Stdout, s.cmd.Stderr = s, s
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
		case <-time.After(3 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() || os.Getenv("WIRELANE_OVPN_LOG") != "" {
			t.Logf("openvpn server log:\n%s", s.logText())
		}
	})
	if !s.waitLog(t, "Initialization Sequence Completed", 10*time.Second) {
		t.Fatalf("openvpn server did not start:\n%s", s.logText())
	}
	return s
}

// options places the client's socket in the server's namespace.
func (s *server) options(t *testing.T) Options {
	return Options{
		Logger:           testlog.Logger(t),
		HandshakeTimeout: 8 * time.Second,
		WrapSocket:       func(fn func()) error { return testnet.InNamespace(s.ns, fn) },
	}
}

// clientConfig builds a client configuration for s.
func (e *testEnv) clientConfig(t *testing.T, s *server, extra string) *config.Config {
	t.Helper()
	proto := "udp"
	if s.tcp {
		proto = "tcp-client"
	}
	text := fmt.Sprintf("client\ndev tun\nremote 127.0.0.1 %d %s\nnobind\nremote-cert-tls server\n<ca>\n%s</ca>\n<cert>\n%s</cert>\n<key>\n%s</key>\n%s",
		s.port, proto, e.pki.CAPEM, e.clientCert, e.clientKey, extra)
	c, err := config.Parse([]byte(text), "client.ovpn", e.dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func dial(t *testing.T, cfg *config.Config, opts Options) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	s, err := Dial(ctx, cfg, opts)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	return s
}

// ping sends an echo request to the server's tunnel address and waits for
// the matching reply.
func ping(t *testing.T, s *Session, seq uint16) {
	t.Helper()
	push := s.Pushed()
	payload := []byte(fmt.Sprintf("wirelane ping %d", seq))
	send := func() {
		if err := s.WritePacket(testnet.ICMPEcho(8, push.Local.Addr(), push.Remote, 0x77, seq, payload)); err != nil {
			t.Fatalf("WritePacket: %v", err)
		}
	}
	send()
	got := make(chan error, 1)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, err := s.ReadPacket(buf)
			if err != nil {
				got <- err
				return
			}
			p := buf[:n]
			if n >= 28 && p[9] == 1 && p[20] == 0 && binary.BigEndian.Uint16(p[26:]) == seq &&
				netip.AddrFrom4([4]byte(p[12:16])) == push.Remote && bytes.Equal(p[28:], payload) {
				got <- nil
				return
			}
		}
	}()
	// Resend once a second, as ping(8) does: a packet may race a key
	// change, which real OpenVPN tolerates too.
	retry := time.NewTicker(time.Second)
	defer retry.Stop()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("ReadPacket: %v", err)
			}
			return
		case <-retry.C:
			t.Logf("no echo reply for seq %d yet, resending", seq)
			send()
		case <-timeout:
			t.Fatalf("no echo reply for seq %d", seq)
		}
	}
}

func TestE2EUDPAES256GCM(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false)
	s := dial(t, e.clientConfig(t, srv, ""), srv.options(t))
	if s.Cipher().String() != "AES-256-GCM" {
		t.Fatalf("cipher %v", s.Cipher())
	}
	if p := s.Pushed(); p.Local.Addr() != netip.MustParseAddr("10.199.0.2") || p.Remote != netip.MustParseAddr("10.199.0.1") || !p.TLSEKM {
		t.Fatalf("pushed %+v", p)
	}
	for i := uint16(1); i <= 3; i++ {
		ping(t, s, i)
	}
	// Our subject formatting (used for verify-x509-name) is OpenVPN's.
	if want := "VERIFY OK: depth=0, " + control.SubjectString(testpki.LeafSubject("client1")); !strings.Contains(srv.logText(), want) {
		t.Errorf("server log lacks %q", want)
	}
	s.Close()
	if !srv.waitLog(t, "exit message received", 5*time.Second) {
		t.Fatalf("server did not log the client's exit")
	}
}

func TestE2EUDPTLSCryptChaCha(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false, "tls-crypt static.key")
	s := dial(t, e.clientConfig(t, srv, "data-ciphers CHACHA20-POLY1305\n<tls-crypt>\n"+string(e.tlsKey.Format())+"</tls-crypt>\n"), srv.options(t))
	defer s.Close()
	if s.Cipher().String() != "CHACHA20-POLY1305" {
		t.Fatalf("cipher %v", s.Cipher())
	}
	ping(t, s, 1)
	ping(t, s, 2)
}

// tls-auth with SHA256 and key directions, AES-128-GCM, and the PRF key
// derivation (no TLS_KEY_EXPORT in IV_PROTO) checked against the server.
func TestE2EUDPTLSAuthPRF(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false, "tls-auth static.key 0", "auth SHA256", "data-ciphers AES-128-GCM")
	opts := srv.options(t)
	opts.DisableEKM = true
	s := dial(t, e.clientConfig(t, srv, "auth SHA256\nkey-direction 1\n<tls-auth>\n"+string(e.tlsKey.Format())+"</tls-auth>\n"), opts)
	defer s.Close()
	if s.Cipher().String() != "AES-128-GCM" || s.Pushed().TLSEKM {
		t.Fatalf("cipher %v ekm %v", s.Cipher(), s.Pushed().TLSEKM)
	}
	ping(t, s, 1)
}

func TestE2ETCP(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, true)
	s := dial(t, e.clientConfig(t, srv, ""), srv.options(t))
	ping(t, s, 1)
	ping(t, s, 2)
	s.Close()
	if !srv.waitLog(t, "exit message received", 5*time.Second) {
		t.Fatalf("server did not log the client's exit")
	}
}

// The server renegotiates every few seconds while pings flow; then the
// client starts one itself.
func TestE2ERenegotiation(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false, "reneg-sec 2")
	s := dial(t, e.clientConfig(t, srv, ""), srv.options(t))
	defer s.Close()
	seen := map[uint8]bool{}
	deadline := time.Now().Add(6 * time.Second)
	seq := uint16(0)
	for time.Now().Before(deadline) && len(seen) < 3 {
		seq++
		ping(t, s, seq)
		seen[s.KeyID()] = true
		time.Sleep(100 * time.Millisecond)
	}
	if len(seen) < 3 || seen[0] == false {
		t.Fatalf("key ids used: %v (want 0 and at least two renegotiated ones)", seen)
	}
	// Client-initiated renegotiations, enough to wrap the key id past 7
	// (to 1, never back to 0).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ids []uint8
	for i := 0; i < 8; i++ {
		before := s.KeyID()
		if err := s.Renegotiate(ctx); err != nil {
			t.Fatalf("client renegotiation %d: %v", i, err)
		}
		id := s.KeyID()
		if id == before || id == 0 || id != control.NextKeyID(before) {
			t.Fatalf("key id went from %d to %d", before, id)
		}
		ids = append(ids, id)
		seq++
		ping(t, s, seq)
	}
	t.Logf("client renegotiations used key ids %v", ids)
}

func TestE2EBadCertificates(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false, "tls-crypt static.key")
	withCrypt := func(extra string) string {
		return extra + "<tls-crypt>\n" + string(e.tlsKey.Format()) + "</tls-crypt>\n"
	}
	other := testpki.New(t, "Other CA")
	try := func(name string, cfg *config.Config, opts Options, want string) {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			s, err := Dial(context.Background(), cfg, opts)
			if err == nil {
				s.Close()
				t.Fatal("connected")
			}
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not mention %q", err, want)
			}
			t.Logf("%s: %v (after %v)", name, err, time.Since(start).Round(time.Millisecond))
		})
	}

	// Our side rejects a server whose certificate is not from our CA.
	cfg := e.clientConfig(t, srv, withCrypt(""))
	cfg.CA = other.CAPEM
	try("wrong CA", cfg, srv.options(t), "peer certificate rejected")

	// The server rejects a client certificate from another CA or expired.
	cfg = e.clientConfig(t, srv, withCrypt(""))
	cfg.Cert, cfg.Key = other.Valid(t, "client1", x509.ExtKeyUsageClientAuth)
	opts := srv.options(t)
	opts.HandshakeTimeout = 3 * time.Second
	try("client cert from another CA", cfg, opts, "client certificate")

	cfg = e.clientConfig(t, srv, withCrypt(""))
	cfg.Cert, cfg.Key = e.pki.Issue(t, "client1", x509.ExtKeyUsageClientAuth, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	try("expired client cert", cfg, opts, "client certificate")

	// A server certificate without the serverAuth usage fails remote-cert-tls.
	cfg = e.clientConfig(t, srv, withCrypt("verify-x509-name not-the-server name\n"))
	try("verify-x509-name mismatch", cfg, srv.options(t), "verify-x509-name")

	// The full-subject form, as OpenVPN prints it, matches.
	cfg = e.clientConfig(t, srv, withCrypt("verify-x509-name \"C=DE, O=Wirelane Test, CN=server\" subject\n"))
	s, err := Dial(context.Background(), cfg, srv.options(t))
	if err != nil {
		t.Fatalf("verify-x509-name subject: %v", err)
	}
	s.Close()

	// Wrong tls-crypt key: the server stays silent.
	var k wrap.StaticKey
	k[0] = 1
	cfg = e.clientConfig(t, srv, "<tls-crypt>\n"+string(k.Format())+"</tls-crypt>\n")
	opts.HandshakeTimeout = 2 * time.Second
	try("wrong tls-crypt key", cfg, opts, "no reply from the server")
}

// With `keepalive 1 2` pushed, an idle session stays up (both sides ping),
// and once the server stops answering the client gives up after
// ping-restart.
func TestE2EKeepaliveAndPingRestart(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false, "keepalive 1 2")
	s := dial(t, e.clientConfig(t, srv, ""), srv.options(t))
	defer s.Close()
	if p := s.Pushed(); p.Ping != 1 || p.PingRestart != 2 {
		t.Fatalf("pushed ping %d ping-restart %d", p.Ping, p.PingRestart)
	}
	time.Sleep(4500 * time.Millisecond) // past the server's doubled 4 s timeout
	if err := s.Err(); err != nil {
		t.Fatalf("idle session ended: %v", err)
	}
	if strings.Contains(srv.logText(), "Inactivity timeout") {
		t.Fatal("server timed the client out: keepalive pings not received")
	}
	ping(t, s, 1)
	srv.cmd.Process.Signal(unix.SIGSTOP)
	defer srv.cmd.Process.Signal(unix.SIGCONT)
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), ErrPingRestart) {
			t.Fatalf("session ended with %v, want ping-restart", s.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("session survived a silent server")
	}
}

// The first remote refuses the connection; Dial falls back to the next.
func TestE2ERemoteFallback(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false)
	cfg := e.clientConfig(t, srv, "")
	cfg.Remotes = append([]config.Remote{{Host: "127.0.0.1", Port: 1, Proto: config.TCP}}, cfg.Remotes...)
	s := dial(t, cfg, srv.options(t))
	defer s.Close()
	ping(t, s, 1)
}

// A long push reply is split by the server with push-continuation; the
// client must merge the parts.
func TestE2ESplitPushReply(t *testing.T) {
	e := newEnv(t)
	var extra []string
	for i := 0; i < 120; i++ {
		extra = append(extra, fmt.Sprintf("push \"route 172.16.%d.0 255.255.255.0\"", i))
	}
	srv := e.startServer(t, false, extra...)
	s := dial(t, e.clientConfig(t, srv, ""), srv.options(t))
	defer s.Close()
	if n := len(s.Pushed().Routes); n != 120 {
		t.Fatalf("got %d pushed routes, want 120", n)
	}
	// The server may log the reply after the client has it.
	if !srv.waitLog(t, "push-continuation 2", 3*time.Second) {
		t.Fatal("server did not split the reply; the test proves nothing")
	}
	ping(t, s, 1)
}

// Username/password checked by a server script; a wrong password gives
// AUTH_FAILED.
func TestE2EUserPass(t *testing.T) {
	e := newEnv(t)
	script := filepath.Join(e.dir, "check.sh")
	os.WriteFile(script, []byte("#!/bin/sh\n[ \"$(sed -n 1p \"$1\")\" = alice ] && [ \"$(sed -n 2p \"$1\")\" = 's3cret' ]\n"), 0o700)
	srv := e.startServer(t, false, "script-security 2", "auth-user-pass-verify "+script+" via-file")
	cfg := e.clientConfig(t, srv, "auth-user-pass\n")
	opts := srv.options(t)
	opts.Username, opts.Password = "alice", "s3cret"
	s := dial(t, cfg, opts)
	ping(t, s, 1)
	s.Close()

	opts.Password = "wrong"
	_, err := Dial(context.Background(), cfg, opts)
	if !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	t.Logf("wrong password: %v", err)
}

// The client's own reneg-sec starts a renegotiation.
func TestE2EClientRenegSec(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false)
	s := dial(t, e.clientConfig(t, srv, "reneg-sec 2\n"), srv.options(t))
	defer s.Close()
	deadline := time.Now().Add(6 * time.Second)
	for s.KeyID() == 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if s.KeyID() != 1 {
		t.Fatalf("key id %d after reneg-sec", s.KeyID())
	}
	ping(t, s, 1)
}

// A server shutting down with explicit-exit-notify tells the client, which
// ends the session with ErrRestart.
func TestE2EServerShutdown(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false, "explicit-exit-notify 1")
	s := dial(t, e.clientConfig(t, srv, ""), srv.options(t))
	defer s.Close()
	ping(t, s, 1)
	srv.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), ErrRestart) && !errors.Is(s.Err(), ErrServerExit) {
			t.Fatalf("session ended with %v", s.Err())
		}
		t.Logf("session ended: %v", s.Err())
	case <-time.After(5 * time.Second):
		t.Fatal("client not told about the server's shutdown")
	}
}

// An openvpn server with explicit-exit-notify 2 sends RESTART,[N] at
// shutdown: the session ends with ErrRestartNext.
func TestE2EServerShutdownToNextServer(t *testing.T) {
	e := newEnv(t)
	srv := e.startServer(t, false, "explicit-exit-notify 2")
	s := dial(t, e.clientConfig(t, srv, ""), srv.options(t))
	defer s.Close()
	ping(t, s, 1)
	srv.cmd.Process.Signal(unix.SIGTERM)
	select {
	case <-s.Done():
		if !errors.Is(s.Err(), ErrRestartNext) {
			t.Fatalf("session ended with %v, want the next server", s.Err())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("client not told about the server's shutdown")
	}
}
