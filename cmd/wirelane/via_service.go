package main

// `wirelane gateway up|down NAME` and `wirelane ovpn connect|serve NAME`
// through the Wirelane service, as `wirelane up|down NAME` do: when the
// service runs, answers this user and has a tunnel of that name and kind,
// the service brings it up (or down), so that every client sees it and a
// member of the group wirelane may do it without root. Otherwise the
// command runs in the foreground as before.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
)

// serviceTunnel is a tunnel of the service and the client that found it.
type serviceTunnel struct {
	c *client.Client
	t service.Tunnel
}

// serviceTunnelOf returns the service's tunnel called name when the
// service runs, answers this user and that tunnel is of one of kinds.
func serviceTunnelOf(name string, kinds ...service.Kind) (*serviceTunnel, bool) {
	if !isTunnelName(name) {
		return nil, false
	}
	c, ts := serviceClient()
	if c == nil {
		return nil, false
	}
	t, ok := findTunnel(ts, name)
	if !ok || !slices.Contains(kinds, t.Kind) {
		return nil, false
	}
	return &serviceTunnel{c: c, t: t}, true
}

// gatewayThroughService runs `gateway up|down NAME` through the service
// when it has a gateway of that name; done is false when the command is to
// run here instead.
func gatewayThroughService(verb, name string) (status int, done bool) {
	st, ok := serviceTunnelOf(name, service.KindGateway)
	if !ok {
		return 0, false
	}
	ctx, stop := signalContext()
	defer stop()
	logCmd(fmt.Sprintf("gateway %s %s through the Wirelane service (%s)", verb, name, serviceSocket()))
	op := st.c.Down
	if verb == "up" {
		op = st.c.Up
	}
	if _, err := op(ctx, name); err != nil {
		return fail(err), true
	}
	return 0, true
}

// ovpnThroughService runs `ovpn connect|serve NAME` through the service
// when it has an OpenVPN tunnel of that name and kind (withFlags: the
// command was given flags, which the service's tunnel cannot take). As in
// the foreground, the command holds the tunnel: it brings it up, prints
// its state changes, and on Ctrl-C (SIGINT, SIGTERM) takes it down; it
// ends with status 1 when the tunnel fails or is taken down by someone
// else. done is false when the command is to run here instead.
func ovpnThroughService(verb, name string, withFlags bool) (status int, done bool) {
	kind := service.KindOpenVPNClient
	if verb == "serve" {
		kind = service.KindOpenVPNServer
	}
	st, ok := serviceTunnelOf(name, kind)
	if !ok {
		return 0, false
	}
	if _, err := os.Stat(name); err == nil {
		return 0, false // a file of that name here: the foreground way
	}
	if withFlags {
		return fail(fmt.Errorf("ovpn %s: %s is a tunnel of the Wirelane service, which runs it with its own settings: drop the flags, or give the file's path to run it here", verb, name)), true
	}
	ctx, stop := signalContext()
	defer stop()
	logCmd(fmt.Sprintf("ovpn %s %s through the Wirelane service (%s); Ctrl-C takes it down", verb, name, serviceSocket()))
	c := st.c
	// Subscribed before the up: the auth prompts and the state changes.
	evs, err := c.Events(ctx)
	if err != nil {
		return fail(err), true
	}
	defer evs.Close()
	ended := make(chan string, 1)
	go func() {
		up := false
		for evs.Next() {
			e := evs.Event()
			if e.Tunnel != name {
				continue
			}
			switch {
			case e.Type == service.EventAuth && e.Auth != nil && kind == service.KindOpenVPNClient:
				go answerAuthOnce(ctx, c, name, e.Auth)
			case e.Type == service.EventTunnel && !e.Initial:
				fmt.Fprintf(os.Stderr, "%s: %s: %s (%s)\n", prog, name, e.State, e.Reason)
				switch e.State {
				case service.StateUp:
					up = true
				case service.StateFailed, service.StateDown:
					if up {
						msg := string(e.State)
						if e.Error != "" {
							msg += ": " + e.Error
						}
						ended <- msg
						return
					}
				}
			case e.Type == service.EventStopping:
				ended <- "the service is stopping"
				return
			}
		}
		if ctx.Err() == nil {
			ended <- "the service's event stream ended"
		}
	}()
	if _, err := c.Up(ctx, name); err != nil {
		return failCtx(ctx, "ovpn "+verb, err), true
	}
	select {
	case <-ctx.Done():
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		logCmd(fmt.Sprintf("taking %s down through the Wirelane service", name))
		if _, err := c.Down(dctx, name); err != nil {
			return fail(err), true
		}
		return 0, true
	case why := <-ended:
		return fail(fmt.Errorf("%s: %s", name, why)), true
	}
}

// answerAuthOnce answers one auth prompt from the terminal.
func answerAuthOnce(ctx context.Context, c *client.Client, name string, p *service.AuthPrompt) {
	user, pass, resp, err := ovpntunnel.PromptCredentials(authRequest(p))
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %s asks for credentials, which cannot be typed here (%v); a client of the service may answer\n", prog, name, err)
		return
	}
	if err := c.Answer(ctx, name, service.AuthAnswer{Username: user, Password: pass, Response: resp}); err != nil {
		fmt.Fprintf(os.Stderr, "%s: answering %s's credential request: %v\n", prog, name, err)
	}
}

// authRequest is what an auth event asks for, as the terminal prompt
// takes it.
func authRequest(p *service.AuthPrompt) ovpntunnel.CredentialRequest {
	return ovpntunnel.CredentialRequest{Password: p.Kind == "password", Username: p.Username, Challenge: p.Prompt, Echo: p.Echo}
}

// flagsSet reports whether any flag of fs was given.
func flagsSet(fs *flag.FlagSet) bool {
	n := 0
	fs.Visit(func(*flag.Flag) { n++ })
	return n > 0
}
