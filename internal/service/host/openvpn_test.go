package host

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/ovpn/client"
)

// TestOpenVPNPhasesDriveTheStates: RECONNECTING of a tunnel that is up is
// reconnecting, CONNECTED up again; phases of a tunnel that is not up yet
// change nothing; an end on its own is failed with the last phase's error.
func TestOpenVPNPhasesDriveTheStates(t *testing.T) {
	h, _, ev := testHost(t)
	run := &ovpnRun{cancel: func() {}, done: make(chan struct{}), connected: make(chan struct{})}
	h.mu.Lock()
	h.entries["office"] = &entry{name: "office", kind: service.KindOpenVPNClient, iface: "office", path: "/nonexistent/office.ovpn", state: service.StateStarting}
	h.mu.Unlock()
	state := func() service.State {
		tn, _ := h.Get("office")
		return tn.State
	}
	h.ovpnPhase("office", run, client.Event{State: client.StateReconnect, Err: errors.New("first remote: timeout")})
	if s := state(); s != service.StateStarting {
		t.Fatalf("a starting tunnel's RECONNECTING made it %s", s)
	}
	h.ovpnPhase("office", run, client.Event{State: client.StateConnected})
	select {
	case <-run.connected:
	default:
		t.Fatal("CONNECTED did not tell the start")
	}
	h.mu.Lock()
	h.entries["office"].state, h.entries["office"].ovpn = service.StateUp, run
	h.mu.Unlock()
	h.ovpnPhase("office", run, client.Event{State: client.StateReconnect, Detail: "server asked for a restart"})
	if s := state(); s != service.StateReconnecting {
		t.Fatalf("after RECONNECTING: %s", s)
	}
	ev.wait(t, "reconnecting", func(e service.Event) bool {
		return e.Type == service.EventTunnel && e.State == service.StateReconnecting && e.Reason == "server asked for a restart"
	})
	h.ovpnPhase("office", run, client.Event{State: client.StateConnected})
	if s := state(); s != service.StateUp {
		t.Fatalf("after CONNECTED again: %s", s)
	}
	ev.wait(t, "up again", func(e service.Event) bool {
		return e.Type == service.EventTunnel && e.State == service.StateUp && e.Reason == "reconnected"
	})
	h.ovpnPhase("office", run, client.Event{State: client.StateAuth, Err: errors.New("AUTH_FAILED")})
	go h.watchOVPN("office", run)
	close(run.done)
	ev.wait(t, "failed", func(e service.Event) bool {
		return e.Type == service.EventTunnel && e.State == service.StateFailed && e.Error == "the OpenVPN tunnel ended: AUTH_FAILED"
	})
}

// TestCredentialsAreAskedOfTheClients: the library's request becomes an
// auth event; the answer comes back to it; an answer nobody asked for is
// refused.
func TestCredentialsAreAskedOfTheClients(t *testing.T) {
	h, _, ev := testHost(t)
	h.mu.Lock()
	h.entries["office"] = &entry{name: "office", kind: service.KindOpenVPNClient, iface: "office", state: service.StateStarting}
	h.mu.Unlock()
	if err := h.Answer(context.Background(), "office", service.AuthAnswer{Password: "x"}); !errors.Is(err, service.ErrInvalid) {
		t.Errorf("an answer before the question: %v", err)
	}
	if err := h.Answer(context.Background(), "nosuch", service.AuthAnswer{}); !errors.Is(err, service.ErrNotFound) {
		t.Errorf("an answer for no tunnel: %v", err)
	}
	type creds struct {
		user, pass, resp string
		err              error
	}
	got := make(chan creds, 1)
	go func() {
		u, p, r, err := h.askCredentials(context.Background(), "office", ovpntunnel.CredentialRequest{Password: true, Challenge: "Enter OTP"})
		got <- creds{u, p, r, err}
	}()
	e := ev.wait(t, "auth", func(e service.Event) bool { return e.Type == service.EventAuth && e.Tunnel == "office" })
	if e.Auth == nil || e.Auth.Kind != "password" || e.Auth.Prompt != "Enter OTP" || e.Auth.Username != "" {
		t.Fatalf("auth event: %+v", e.Auth)
	}
	if err := h.Answer(context.Background(), "office", service.AuthAnswer{Username: "alice", Password: "s3cret", Response: "42"}); err != nil {
		t.Fatal(err)
	}
	c := <-got
	if c.err != nil || c.user != "alice" || c.pass != "s3cret" || c.resp != "42" {
		t.Errorf("the library got %+v", c)
	}
	// A file with the username only: the event names it, and asks the
	// password alone.
	go func() {
		u, p, r, err := h.askCredentials(context.Background(), "office", ovpntunnel.CredentialRequest{Password: true, Username: "bob"})
		got <- creds{u, p, r, err}
	}()
	e = ev.wait(t, "auth for the password only", func(e service.Event) bool {
		return e.Type == service.EventAuth && e.Tunnel == "office" && e.Auth != nil && e.Auth.Username != ""
	})
	if e.Auth.Kind != "password" || e.Auth.Username != "bob" || e.Auth.Prompt != "" {
		t.Fatalf("auth event for the password only: %+v", e.Auth)
	}
	if err := h.Answer(context.Background(), "office", service.AuthAnswer{Password: "hunter2"}); err != nil {
		t.Fatal(err)
	}
	if c := <-got; c.err != nil || c.pass != "hunter2" {
		t.Errorf("the library got %+v", c)
	}
	// A stopped tunnel's question ends with its context.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, _, _, err := h.askCredentials(ctx, "office", ovpntunnel.CredentialRequest{Challenge: "PIN", Echo: true}); err == nil {
		t.Error("an unanswered question did not end with its context")
	}
}
