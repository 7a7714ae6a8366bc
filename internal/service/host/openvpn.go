package host

// OpenVPN tunnels run in the service's process: ovpntunnel.Connect or
// Serve in a goroutine, stopped by cancelling its context, exactly as
// Ctrl-C stops `wirelane ovpn connect|serve` (the library then tells the
// server and removes what it added). The tunnel is up once it publishes
// its status file, which the library writes when the device, its
// addresses, routes and DNS are in place.
//
// TODO(#15): ConnectOptions has no progress hook in this tree, so the
// reconnecting state (RECONNECTING) is not reported and a failure's text
// is only in the service's log: Connect returns an exit status. Map
// OnEvent's phases once it lands.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/server"
)

// ovpnRun is one running OpenVPN tunnel.
type ovpnRun struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when Connect or Serve has returned
	status int           // the exit status; read after done
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
	run := &ovpnRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		if e.kind == service.KindOpenVPNClient {
			run.status = ovpntunnel.Connect(ovpntunnel.ConnectOptions{File: e.path, Dev: e.iface, MTU: 1500, DNS: ovpntunnel.DNSAuto, Context: rctx})
		} else {
			run.status = ovpntunnel.Serve(ovpntunnel.ServeOptions{File: e.path, Dev: e.iface, Context: rctx})
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
			return nil, fmt.Errorf("the OpenVPN tunnel ended with status %d before it was up (the service's log says why)", run.status)
		case <-ctx.Done():
			run.stop()
			return nil, ctx.Err()
		case <-limit.C:
			run.stop()
			return nil, fmt.Errorf("the OpenVPN tunnel was not up within %v", h.cfg.OVPNStartTimeout)
		case <-tk.C:
		}
		if _, ok := ovpnStatus(e.path); ok {
			return run, nil
		}
	}
}

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
	if e == nil || e.ovpn != run || e.state != service.StateUp {
		h.mu.Unlock()
		return // stopped through Down, or gone
	}
	e.ovpn, e.state = nil, service.StateFailed
	e.err = fmt.Sprintf("the OpenVPN tunnel ended with status %d (the service's log says why)", run.status)
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
