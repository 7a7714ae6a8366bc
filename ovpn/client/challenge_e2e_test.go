package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A dynamic challenge from a real openvpn 2.6 server (a deferred
// auth-user-pass-verify script that fails the password with a CRV1
// reason, and accepts the CRV1 answer): Dial fails with the challenge,
// and a second Dial with its answer connects. The script gives its
// verdict a second after the client's first PUSH_REQUEST, as a plugin
// asking a remote service does: the server answers only a PUSH_REQUEST
// that comes after the verdict, so the client must repeat it.
func TestE2EDynamicChallenge(t *testing.T) {
	e := newEnv(t)
	script := filepath.Join(e.dir, "check.sh")
	// OpenVPN hands the script the file with username and password and,
	// for deferred authentication, the files for the verdict and the
	// failure reason.
	os.WriteFile(script, []byte(`#!/bin/sh
user=$(sed -n 1p "$1"); pass=$(sed -n 2p "$1")
verdict() { (sleep 1; echo "$1" >"$auth_control_file") </dev/null >/dev/null 2>&1 & }
if [ "$user" = alice ] && [ "$pass" = s3cret ]; then
	echo 'CRV1:R,E:state42:Ym9i:Enter the code from your token' >"$auth_failed_reason_file"
	verdict 0
	exit 2
fi
if [ "$user" = bob ] && [ "$pass" = 'CRV1::state42::424242' ]; then
	verdict 1
	exit 2
fi
verdict 0
exit 2
`), 0o700)
	srv := e.startServer(t, false, "script-security 2", "auth-user-pass-verify "+script+" via-file")
	cfg := e.clientConfig(t, srv, "auth-user-pass\n")
	opts := srv.options(t)
	opts.Username, opts.Password = "alice", "s3cret"
	_, err := Dial(context.Background(), cfg, opts)
	var ch *ChallengeError
	if !errors.As(err, &ch) || !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("first Dial: %v, want a CRV1 challenge", err)
	}
	if ch.Text != "Enter the code from your token" || !ch.Echo || !ch.Required || ch.Username != "bob" || ch.StateID != "state42" {
		t.Fatalf("challenge %+v", ch)
	}
	opts.Username, opts.Password = ch.Answer("424242")
	s := dial(t, cfg, opts)
	ping(t, s, 1)
	s.Close()
}
