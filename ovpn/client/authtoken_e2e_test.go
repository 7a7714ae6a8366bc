package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// auth-token against a real openvpn 2.6 server with auth-gen-token and a
// via-file password script that logs every call: the first session
// authenticates with the password and gets a token; renegotiations
// (reneg-sec 2) and a second session dialled with a wrong password but
// the same AuthToken (a reconnect after auth-nocache forgot the
// password) authenticate with the token, and the script is never run
// again. A server restart invalidates the token: the next Dial falls back
// to the password.
func TestE2EAuthTokenSurvivesRenegotiationAndReconnect(t *testing.T) {
	e := newEnv(t)
	calls := filepath.Join(e.dir, "calls.log")
	script := filepath.Join(e.dir, "check.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$(sed -n 1p \"$1\")\" >>"+calls+"\n"+
		"[ \"$(sed -n 1p \"$1\")\" = alice ] && [ \"$(sed -n 2p \"$1\")\" = 's3cret' ]\n"), 0o700)
	srvLines := []string{"script-security 2", "auth-user-pass-verify " + script + " via-file", "auth-gen-token 0 120", "reneg-sec 2"}
	srv := e.startServer(t, false, srvLines...)
	scriptRuns := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "\n")
	}
	cfg := e.clientConfig(t, srv, "auth-user-pass\nauth-nocache\n")
	if !cfg.AuthNoCache {
		t.Fatal("auth-nocache not parsed")
	}
	tok := new(AuthToken)
	opts := srv.options(t)
	opts.Username, opts.Password, opts.AuthToken = "alice", "s3cret", tok
	var authLines []string
	opts.OnEvent = func(ev Event) {
		if ev.State == StateAuth && strings.Contains(ev.Detail, "authenticating as") {
			authLines = append(authLines, ev.Detail)
		}
	}
	s := dial(t, cfg, opts)
	if !tok.Held() {
		t.Fatalf("no auth-token kept; pushed %q", s.Pushed().Options)
	}
	ping(t, s, 1)
	// Renegotiations authenticate with the token (the server checks it
	// itself; a password would run the script again).
	deadline := time.Now().Add(8 * time.Second)
	for s.KeyID() < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if s.KeyID() < 2 {
		t.Fatalf("key id %d: the server did not renegotiate", s.KeyID())
	}
	ping(t, s, 2)
	if err := s.Err(); err != nil {
		t.Fatalf("session ended: %v", err)
	}
	s.Close()

	// The reconnect: no password any more (auth-nocache), only the token.
	opts.Password = "not the password"
	s = dial(t, cfg, opts)
	ping(t, s, 3)
	s.Close()
	if n := scriptRuns(); n != 1 {
		t.Fatalf("the password script ran %d times, want once (the token must replace the password)", n)
	}
	if len(authLines) != 2 || strings.Contains(authLines[0], "auth-token") || !strings.Contains(authLines[1], "(auth-token)") {
		t.Fatalf("authentication events %q", authLines)
	}

	// A new server process does not know the token: the client falls
	// back to the password (and fails cleanly when it is wrong).
	srv2 := e.startServer(t, false, srvLines...)
	cfg2 := e.clientConfig(t, srv2, "auth-user-pass\n")
	opts2 := srv2.options(t)
	opts2.Username, opts2.Password, opts2.AuthToken = "alice", "s3cret", tok
	s = dial(t, cfg2, opts2)
	ping(t, s, 4)
	s.Close()
	if !tok.Held() {
		t.Fatal("no new token after the fallback")
	}
	tok.Forget()
	opts2.Password = "wrong"
	if _, err := Dial(context.Background(), cfg2, opts2); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong password without a token: %v", err)
	}
}
