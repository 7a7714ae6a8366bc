package ovpntunnel

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
)

func TestRestartable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{client.ErrPingRestart, true},
		{fmt.Errorf("%w: RESTART", client.ErrRestart), true},
		{client.ErrServerExit, true},
		{fmt.Errorf("client: transport: %w", net.ErrClosed), true},
		{fmt.Errorf("%w: bad password", client.ErrAuthFailed), false},
		{fmt.Errorf("%w: HALT", client.ErrHalt), false},
		{client.ErrClosed, false},
	} {
		if got := restartable(c.err); got != c.want {
			t.Errorf("restartable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// closedPort returns a loopback TCP port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return p
}

// Reconnect attempts try the remotes in order, wait retryWait between
// attempts, double the wait after the fifth failure, and stop when
// interrupted.
func TestRedialBacksOffAndTriesRemotesInOrder(t *testing.T) {
	out := &syncBuffer{}
	oldOut, oldWait := stdout, retryWait
	stdout, retryWait = out, 5*time.Millisecond
	t.Cleanup(func() { stdout, retryWait = oldOut, oldWait })
	pki := testpki.New(t, "Wirelane Retry CA")
	cert, key := pki.Valid(t, "cli1", x509.ExtKeyUsageClientAuth)
	p1, p2 := closedPort(t), closedPort(t)
	file := filepath.Join(t.TempDir(), "c.ovpn")
	body := fmt.Sprintf("client\ndev tun\nremote 127.0.0.1 %d tcp\nremote 127.0.0.1 %d tcp\n<ca>\n%s</ca>\n<cert>\n%s</cert>\n<key>\n%s</key>\n",
		p1, p2, pki.CAPEM, cert, key)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil && !strings.Contains(out.String(), "attempt 7 failed") {
			time.Sleep(2 * time.Millisecond)
		}
		cancel()
	}()
	r := &reconnector{ctx: ctx, cfg: cfg}
	done := make(chan *client.Session, 1)
	go func() { done <- r.redial() }()
	select {
	case s := <-done:
		if s != nil {
			t.Fatal("a session with no server")
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("redial did not stop after the interrupt:\n%s", out.String())
	}
	text := out.String()
	for _, want := range []string{"attempt 4 failed", "; next in 5ms", "attempt 5 failed", "; next in 10ms", "attempt 6 failed", "; next in 20ms"} {
		if !strings.Contains(text, want) {
			t.Fatalf("output lacks %q:\n%s", want, text)
		}
	}
	line := text[strings.Index(text, "attempt 1 failed"):]
	line = line[:strings.Index(line, "; next in")] // the joined errors of one attempt
	i1, i2 := strings.Index(line, fmt.Sprint(p1)), strings.Index(line, fmt.Sprint(p2))
	if i1 < 0 || i2 < 0 || i1 > i2 {
		t.Fatalf("the remotes were not tried in order: %s", line)
	}
	if ctx.Err() == nil {
		t.Fatal("redial returned without the interrupt")
	}
}
