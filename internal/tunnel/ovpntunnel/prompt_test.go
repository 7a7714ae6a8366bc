package ovpntunnel

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
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
		u, p, r, err := promptCredentials(slave, &prompts, CredentialRequest{Password: true, Challenge: "Enter OTP"})
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

// noTerminal makes standard input a pipe (no terminal) for the test.
func noTerminal(t *testing.T) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := stdin
	stdin = r
	t.Cleanup(func() {
		stdin = old
		r.Close()
		w.Close()
	})
}

// Without a terminal and without --auth-file, Connect says how to give
// the credentials and exits with status 2.
func TestCredentialsWithoutATerminal(t *testing.T) {
	noTerminal(t)
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

// A file whose auth-user-pass gives the username only (an inline block
// or a file of one line) has its password asked for, as OpenVPN 2.6
// prompts for it, and never an empty one sent: without a terminal,
// Connect says so; on a terminal only "Enter Auth Password:" is asked;
// through the Credentials hook (the service's auth event) the request
// names the file's username, which an answer cannot change. A one-line
// --auth-file asks the same way.
func TestUsernameOnlyAsksForThePassword(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "up.txt"), []byte("carol\n"), 0o600)
	inline := filepath.Join(dir, "inline.ovpn")
	os.WriteFile(inline, []byte("client\nremote 192.0.2.1\n<auth-user-pass>\nbob\n</auth-user-pass>\n<ca>\n"+testpki.FixtureCA+"</ca>\n"), 0o600)
	fromFile := filepath.Join(dir, "file.ovpn")
	os.WriteFile(fromFile, []byte("client\nremote 192.0.2.1\nauth-user-pass up.txt\n<ca>\n"+testpki.FixtureCA+"</ca>\n"), 0o600)
	both := filepath.Join(dir, "both.ovpn")
	os.WriteFile(both, []byte("client\nremote 192.0.2.1\n<auth-user-pass>\nbob\npw\n</auth-user-pass>\n<ca>\n"+testpki.FixtureCA+"</ca>\n"), 0o600)
	noUser := filepath.Join(dir, "nouser.ovpn")
	os.WriteFile(noUser, []byte("client\nremote 192.0.2.1\nauth-user-pass\n<ca>\n"+testpki.FixtureCA+"</ca>\n"), 0o600)

	for _, tc := range []struct {
		name, file, authFile string
		wantReq              CredentialRequest // zero: nothing asked
		wantUser, wantPass   string
	}{
		{"an inline block with the username only", inline, "", CredentialRequest{Password: true, Username: "bob"}, "bob", "typed"},
		{"a file of one line", fromFile, "", CredentialRequest{Password: true, Username: "carol"}, "carol", "typed"},
		{"a one-line --auth-file", noUser, filepath.Join(dir, "up.txt"), CredentialRequest{Password: true, Username: "carol"}, "carol", "typed"},
		{"no credentials at all", noUser, "", CredentialRequest{Password: true}, "answered", "typed"},
		{"both in the file", both, "", CredentialRequest{}, "", ""},
	} {
		cfg, err := config.ParseFile(tc.file)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var asked *CredentialRequest
		o := ConnectOptions{File: tc.file, AuthFile: tc.authFile, Credentials: func(r CredentialRequest) (string, string, string, error) {
			asked = &r
			return "answered", "typed", "", nil
		}}
		var opts client.Options
		if code := credentials(o, cfg, &opts); code != 0 {
			t.Fatalf("%s: exit %d", tc.name, code)
		}
		switch {
		case tc.wantReq == (CredentialRequest{}):
			if asked != nil {
				t.Errorf("%s: asked %+v, want nothing asked", tc.name, *asked)
			}
		case asked == nil || *asked != tc.wantReq:
			t.Errorf("%s: asked %v, want %+v", tc.name, asked, tc.wantReq)
		}
		if opts.Username != tc.wantUser || opts.Password != tc.wantPass {
			t.Errorf("%s: options carry %q/%q, want %q/%q", tc.name, opts.Username, opts.Password, tc.wantUser, tc.wantPass)
		}
	}

	// Without a terminal: a clear error, status 2.
	noTerminal(t)
	errOut := capture(t)
	if code := Connect(ConnectOptions{File: inline, MTU: 1500}); code != 2 ||
		!strings.Contains(errOut.String(), `uses auth-user-pass with the username "bob" and no password; pass --auth-file FILE`) {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

// On a terminal, a request that gives the username asks the password
// only.
func TestPromptForThePasswordOnly(t *testing.T) {
	master, slave := openPTY(t)
	go io.Copy(io.Discard, master)
	var prompts syncBuffer
	type answers struct {
		user, pass string
		err        error
	}
	done := make(chan answers, 1)
	go func() {
		u, p, _, err := promptCredentials(slave, &prompts, CredentialRequest{Password: true, Username: "bob"})
		done <- answers{u, p, err}
	}()
	waitUntil(t, "the password prompt", func() bool { return strings.Contains(prompts.String(), "Enter Auth Password: ") })
	master.WriteString("s3cret\n")
	var a answers
	select {
	case a = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("prompt did not return")
	}
	if a.err != nil || a.user != "bob" || a.pass != "s3cret" || strings.Contains(prompts.String(), "Username") {
		t.Fatalf("got %+v, prompts %q", a, prompts.String())
	}
}
