package ovpntunnel

import (
	"fmt"
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// openPTY returns the two ends of a new pseudo-terminal.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		m.Close()
		t.Fatal(err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN) // ptsname
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

func waitUntil(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !f(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func echoOn(t *testing.T, f *os.File) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&unix.ECHO != 0
}

// On a terminal the username is echoed, the password and a
// static-challenge response with echo 0 are not, and the echo is back on
// afterwards.
func TestPromptOnATerminal(t *testing.T) {
	master, slave := openPTY(t)
	var echoed syncBuffer // what the terminal shows (the line discipline's echo)
	go func() {
		b := make([]byte, 256)
		for {
			n, err := master.Read(b)
			if err != nil {
				return
			}
			echoed.Write(b[:n])
		}
	}()
	var prompts syncBuffer
	type answers struct {
		user, pass, resp string
		err              error
	}
	done := make(chan answers, 1)
	go func() {
		u, p, r, err := promptCredentials(slave, &prompts, true, "Enter OTP", false)
		done <- answers{u, p, r, err}
	}()
	waitUntil(t, "the username prompt", func() bool { return strings.Contains(prompts.String(), "Enter Auth Username: ") })
	master.WriteString("alice\n")
	waitUntil(t, "the password prompt", func() bool { return strings.Contains(prompts.String(), "Enter Auth Password: ") })
	waitUntil(t, "echo off", func() bool { return !echoOn(t, slave) })
	master.WriteString("s3cret\n")
	waitUntil(t, "the challenge prompt", func() bool { return strings.Contains(prompts.String(), "CHALLENGE: Enter OTP ") })
	master.WriteString("424242\n")
	var a answers
	select {
	case a = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("prompt did not return")
	}
	if a.err != nil || a.user != "alice" || a.pass != "s3cret" || a.resp != "424242" {
		t.Fatalf("got %+v", a)
	}
	if !echoOn(t, slave) {
		t.Fatal("echo left off")
	}
	time.Sleep(50 * time.Millisecond) // the last echo reaches the master
	if e := echoed.String(); !strings.Contains(e, "alice") || strings.Contains(e, "s3cret") || strings.Contains(e, "424242") {
		t.Fatalf("terminal showed %q", e)
	}
}

// Without a terminal and without --auth-file, Connect says how to give
// the credentials and exits with status 2.
func TestCredentialsWithoutATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	old := stdin
	stdin = r
	t.Cleanup(func() { stdin = old })
	file := filepath.Join(t.TempDir(), "p.ovpn")
	os.WriteFile(file, []byte("client\nremote 192.0.2.1\nauth-user-pass\n<ca>\n"+testpki.FixtureCA+"</ca>\n"), 0o600)
	errOut := capture(t)
	code := Connect(ConnectOptions{File: file, MTU: 1500})
	if want := "uses auth-user-pass without credentials; pass --auth-file FILE (username line, password line) or run on a terminal"; code != 2 ||
		!strings.Contains(errOut.String(), want) {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	os.WriteFile(file, []byte("client\nremote 192.0.2.1\n<auth-user-pass>\nbob\npw\n</auth-user-pass>\nstatic-challenge \"PIN\" 1\n<ca>\n"+testpki.FixtureCA+"</ca>\n"), 0o600)
	errOut.Reset()
	if code := Connect(ConnectOptions{File: file, MTU: 1500}); code != 2 || !strings.Contains(errOut.String(), `static-challenge "PIN": the response must be typed`) {
		t.Fatalf("static-challenge: exit %d, stderr:\n%s", code, errOut)
	}
}
