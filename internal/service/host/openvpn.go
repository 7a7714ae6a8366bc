package host

// OpenVPN tunnels run in the service's process: ovpntunnel.Connect or
// Serve in a goroutine, stopped by cancelling its context, exactly as
// Ctrl-C stops `wirelane ovpn connect|serve` (the library then tells the
// server and removes what it added).
//
// A client's phases (ConnectOptions.OnEvent) drive its states: CONNECTED
// is up (the device, its addresses, routes and DNS are in place), a
// RECONNECTING after that is reconnecting, and the next CONNECTED up again;
// the last phase that failed is the error of a tunnel that ends. A server
// is up once it publishes its status file.
//
// Credentials the file asks for and does not hold are asked of the
// service's clients: an auth event, answered through Answer (POST
// /v1/tunnels/NAME/auth), while the tunnel is starting.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/server"
)

// ovpnRun is one running OpenVPN tunnel.
type ovpnRun struct {
	cancel    context.CancelFunc
	done      chan struct{}        // closed when Connect or Serve has returned
	status    int                  // the exit status; read after done
	connected chan struct{}        // closed at the client's first CONNECTED
	once      sync.Once            // closes connected
	reloader  *ovpntunnel.Reloader // hands reloads to the running tunnel; immutable

	mu      sync.Mutex
	lastErr error // the last phase that failed; guarded by mu

	ctr ovpnCounters // counters.go
}

// failure says why the tunnel ended (after done); when, if not "", says
// when ("before it was up").
func (r *ovpnRun) failure(when string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	what := "the OpenVPN tunnel ended"
	if when != "" {
		what += " " + when
	}
	if r.lastErr != nil {
		return fmt.Errorf("%s: %w", what, r.lastErr)
	}
	return fmt.Errorf("%s with status %d (the service's log says why)", what, r.status)
}

// startOVPN starts the tunnel of e and returns once it is up, or has
// ended (failed), or ctx is done (it is then stopped).
func (h *Host) startOVPN(ctx context.Context, e *entry) (*ovpnRun, error) {
	// Parse first, for an error with its line.
	var err error
	if e.kind == service.KindOpenVPNClient {
		_, err = config.ParseFile(e.path)
	} else {
		_, err = server.ParseConfigFile(e.path)
	}
	if err != nil {
		return nil, ovpnConfigError(err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	run := &ovpnRun{cancel: cancel, done: make(chan struct{}), connected: make(chan struct{}), reloader: ovpntunnel.NewReloader()}
	name := e.name
	go func() {
		defer close(run.done)
		if e.kind == service.KindOpenVPNClient {
			run.status = ovpntunnel.Connect(ovpntunnel.ConnectOptions{File: e.path, Dev: e.iface, DNS: ovpntunnel.DNSAuto, Context: rctx, Reloader: run.reloader, Hosted: true,
				OnEvent: func(ev client.Event) { h.ovpnPhase(name, run, ev) },
				Credentials: func(r ovpntunnel.CredentialRequest) (string, string, string, error) {
					return h.askCredentials(rctx, name, r)
				}})
		} else {
			run.status = ovpntunnel.Serve(ovpntunnel.ServeOptions{File: e.path, Dev: e.iface, Context: rctx, Reloader: run.reloader, Hosted: true,
				OnServer: run.ctr.srv.Store, OnEvent: run.ctr.serverEvent})
		}
	}()
	tk := time.NewTicker(100 * time.Millisecond)
	defer tk.Stop()
	limit := time.NewTimer(h.cfg.OVPNStartTimeout)
	defer limit.Stop()
	for {
		select {
		case <-run.done:
			cancel()
			return nil, run.failure("before it was up")
		case <-run.connected:
			return run, nil
		case <-ctx.Done():
			run.stop()
			return nil, ctx.Err()
		case <-limit.C:
			run.stop()
			return nil, fmt.Errorf("the OpenVPN tunnel was not up within %v", h.cfg.OVPNStartTimeout)
		case <-tk.C:
		}
		if e.kind == service.KindOpenVPNServer {
			if _, ok := ovpnStatus(e.path); ok {
				return run, nil
			}
		}
	}
}

// ovpnPhase follows a client's phases: CONNECTED (up), RECONNECTING
// after it (reconnecting), and the errors of failed steps.
func (h *Host) ovpnPhase(name string, run *ovpnRun, ev client.Event) {
	run.ctr.clientPhase(ev)
	if ev.Err != nil {
		run.mu.Lock()
		run.lastErr = ev.Err
		run.mu.Unlock()
	}
	var reason string
	var to service.State
	switch ev.State {
	case client.StateConnected:
		run.once.Do(func() { close(run.connected) })
		to, reason = service.StateUp, "reconnected"
	case client.StateReconnect:
		to, reason = service.StateReconnecting, ev.Detail
		if ev.Err != nil {
			reason = ev.Err.Error()
		}
	default:
		return
	}
	h.mu.Lock()
	e := h.entries[name]
	// Only a tunnel that is up (its Up has returned) changes here.
	if e == nil || e.ovpn != run || e.state == to || (e.state != service.StateUp && e.state != service.StateReconnecting) {
		h.mu.Unlock()
		return
	}
	e.state = to
	snap := *e
	h.mu.Unlock()
	h.emit(&snap, reason)
}

// askCredentials publishes an auth event for the tunnel and waits for its
// answer (or for ctx: the tunnel is being stopped).
// A file that gives the username only asks for the password with that
// username in the event (the answer's username is then not used).
func (h *Host) askCredentials(ctx context.Context, name string, r ovpntunnel.CredentialRequest) (user, pass, response string, err error) {
	ch := make(chan service.AuthAnswer, 1)
	prompt := service.AuthPrompt{Kind: "password", Username: r.Username, Prompt: r.Challenge, Echo: r.Echo}
	if !r.Password {
		prompt.Kind, prompt.Username = "challenge", ""
	}
	h.mu.Lock()
	e := h.entries[name]
	if e == nil {
		h.mu.Unlock()
		return "", "", "", fmt.Errorf("%q: %w", name, service.ErrNotFound)
	}
	e.authWait = ch
	if h.publish != nil {
		h.publish(service.Event{Type: service.EventAuth, Tunnel: name, Auth: &prompt})
	}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		if e.authWait == ch {
			e.authWait = nil
		}
		h.mu.Unlock()
	}()
	select {
	case a := <-ch:
		return a.Username, a.Password, a.Response, nil
	case <-ctx.Done():
		return "", "", "", fmt.Errorf("no answer to the credential request: %w", ctx.Err())
	}
}

// Answer gives a starting OpenVPN client the credentials its auth event
// asked for. They are handed to the library only: never logged, stored or
// published.
func (h *Host) Answer(ctx context.Context, name string, a service.AuthAnswer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.entries[name]
	switch {
	case e == nil:
		return fmt.Errorf("%q: %w", name, service.ErrNotFound)
	case e.authWait == nil:
		return fmt.Errorf("%q is not asking for credentials: %w", name, service.ErrInvalid)
	}
	select {
	case e.authWait <- a:
	default:
	}
	e.authWait = nil
	return nil
}

var _ service.Authenticator = (*Host)(nil)

// stop ends the tunnel and waits until the library has removed what it
// added.
func (r *ovpnRun) stop() {
	r.cancel()
	<-r.done
}

// watchOVPN reports an OpenVPN tunnel that ends by itself (AUTH_FAILED,
// HALT, a fatal error) as failed.
func (h *Host) watchOVPN(name string, run *ovpnRun) {
	<-run.done
	h.mu.Lock()
	e := h.entries[name]
	// Stopped through Down (stopping), or gone: nothing to report.
	if e == nil || e.ovpn != run || (e.state != service.StateUp && e.state != service.StateReconnecting) {
		h.mu.Unlock()
		return
	}
	e.ovpn, e.state = nil, service.StateFailed
	e.err = run.failure("").Error()
	snap := *e
	h.mu.Unlock()
	h.emit(&snap, "the tunnel ended")
}

// ovpnConfigError turns an OpenVPN parser's located error into the
// service's ConfigError.
func ovpnConfigError(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		msg := ce.Err.Error()
		if ce.Directive != "" {
			msg = ce.Directive + ": " + msg
		}
		return &service.ConfigError{File: ce.File, Line: ce.Line, Msg: msg}
	}
	return err
}

// linkHere reports whether a network interface of that name exists in
// this network namespace.
func linkHere(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}
