package ovpntunnel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/ovpn/config"
)

// lockedProfile is a client profile whose key (a fixture of ovpn/config)
// is encrypted and has no askpass.
func lockedProfile(t *testing.T) (string, *config.Config) {
	t.Helper()
	fix, _ := filepath.Abs("../../../ovpn/config/testdata")
	file := filepath.Join(t.TempDir(), "p.ovpn")
	os.WriteFile(file, []byte("client\nremote 192.0.2.1\nca "+fix+"/ca.crt\ncert "+fix+"/client.crt\nkey "+fix+"/client-pkcs8-aes256.key\n"), 0o600)
	cfg, err := config.ParseFile(file)
	if err != nil || !cfg.KeyLocked() {
		t.Fatalf("%v locked=%v", err, cfg != nil && cfg.KeyLocked())
	}
	return file, cfg
}

// The passphrase of an encrypted key is asked on the terminal (echo
// off); without a terminal the command says to use askpass (status 2).
func TestUnlockKeyOnATerminal(t *testing.T) {
	file, cfg := lockedProfile(t)
	master, slave := openPTY(t)
	go func() {
		b := make([]byte, 256)
		for {
			if _, err := master.Read(b); err != nil {
				return
			}
		}
	}()
	old := stdin
	stdin = slave
	t.Cleanup(func() { stdin = old })
	errOut := new(syncBuffer) // written by the prompt's goroutine
	oldErr := stderr
	stderr = errOut
	t.Cleanup(func() { stderr = oldErr })
	done := make(chan int, 1)
	go func() { done <- unlockKey("connect", file, &cfg.Common) }()
	waitUntil(t, "the passphrase prompt", func() bool { return strings.Contains(errOut.String(), "Enter Private Key Password: ") })
	waitUntil(t, "echo off", func() bool { return !echoOn(t, slave) })
	master.WriteString("s3cret\n")
	select {
	case code := <-done:
		if code != 0 || cfg.KeyLocked() {
			t.Fatalf("exit %d, locked %v:\n%s", code, cfg.KeyLocked(), errOut)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
}

func TestUnlockKeyWithoutATerminal(t *testing.T) {
	file, cfg := lockedProfile(t)
	noTerminal(t)
	errOut := capture(t)
	if code := unlockKey("connect", file, &cfg.Common); code != 2 || !strings.Contains(errOut.String(), "the private key is encrypted: add `askpass FILE`") {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
}

// With ConnectOptions.Credentials (the service), the passphrase is asked
// through it, as a challenge whose response is the passphrase.
func TestUnlockKeyThroughTheCredentialsHook(t *testing.T) {
	file, cfg := lockedProfile(t)
	errOut := capture(t)
	var asked string
	ask := func(r CredentialRequest) (string, string, string, error) {
		asked = r.Challenge
		return "", "", "s3cret", nil
	}
	if code := unlockKeyWith("connect", file, &cfg.Common, ask); code != 0 || cfg.KeyLocked() || asked != "Enter Private Key Password:" {
		t.Fatalf("exit %d, locked %v, asked %q:\n%s", code, cfg.KeyLocked(), asked, errOut)
	}
	_, cfg = lockedProfile(t)
	wrong := func(CredentialRequest) (string, string, string, error) { return "", "", "nope", nil }
	if code := unlockKeyWith("connect", file, &cfg.Common, wrong); code != 1 || !strings.Contains(errOut.String(), "wrong passphrase") {
		t.Fatalf("wrong passphrase: exit %d:\n%s", code, errOut)
	}
}
