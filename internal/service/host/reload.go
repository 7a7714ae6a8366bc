package host

// Reload (POST /v1/tunnels/NAME/reload, SIGHUP to the service): a running
// tunnel is changed in place into what its file says, by the library the
// command line uses: wgtunnel.Reload for WireGuard and gateways (sessions
// of unchanged peers kept), the running ovpntunnel.Serve or Connect's
// Reloader for OpenVPN. A failed reload has been undone by the library:
// the tunnel stays up as it was.

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

var _ service.Reloader = (*Host)(nil)

// Reload reloads the running tunnel name from its file (dry: returns the
// plan only). A tunnel that is not up is ErrBusy.
func (h *Host) Reload(ctx context.Context, name string, dry bool) (service.ReloadResult, error) {
	h.reloadMu.Lock()
	defer h.reloadMu.Unlock()
	res := service.ReloadResult{Tunnel: name, DryRun: dry}
	h.mu.Lock()
	e, ok := h.entries[name]
	switch {
	case !ok:
		h.mu.Unlock()
		return res, fmt.Errorf("%q: %w", name, service.ErrNotFound)
	case e.state != service.StateUp && e.state != service.StateReconnecting:
		h.mu.Unlock()
		return res, fmt.Errorf("%q is %s (reload changes a running tunnel; bring it up instead): %w", name, e.state, service.ErrBusy)
	case e.path == "":
		h.mu.Unlock()
		return res, fmt.Errorf("%q has no file of the service's to reload from: %w", name, service.ErrInvalid)
	}
	snap := *e
	h.mu.Unlock()

	if snap.kind == service.KindGateway {
		if r, handled, err := h.reloadFleet(ctx, &snap, dry); handled {
			if err != nil || dry || len(r.Changes) == 0 {
				if r.Changes == nil {
					r.Changes = []string{}
				}
				return r, err
			}
			res = r
			h.log.Info("tunnel reloaded", "tunnel", name, "changes", len(res.Changes))
			names := peerNames(snap.kind, snap.path)
			h.mu.Lock()
			if e := h.entries[name]; e != nil {
				e.names = names
				snap = *e
			}
			h.mu.Unlock()
			h.emit(&snap, "reloaded")
			return res, nil
		}
	}
	switch snap.kind {
	case service.KindWireGuard, service.KindGateway:
		cfg, err := h.wgConfig(&snap, true)
		if err != nil {
			return res, err
		}
		p, err := wgtunnel.Reload(ctx, cfg, wgtunnel.ReloadOptions{Options: h.options(name), DryRun: dry})
		if err != nil {
			return res, configError(err)
		}
		res.Changes = p.Lines()
		if p.PrivateKey {
			res.Notes = append(res.Notes, "a new private key: every peer's session restarts")
		}
	default:
		if snap.ovpn == nil || snap.ovpn.reloader == nil {
			return res, fmt.Errorf("%q: the OpenVPN tunnel is not running here: %w", name, service.ErrBusy)
		}
		p, err := snap.ovpn.reloader.Reload(ctx, dry)
		if err != nil {
			if errors.Is(err, ovpntunnel.ErrNotRunning) {
				return res, fmt.Errorf("%q: %v: %w", name, err, service.ErrBusy)
			}
			return res, ovpnConfigError(err)
		}
		res.Changes, res.Notes = p.Lines, p.Notes
	}
	if res.Changes == nil {
		res.Changes = []string{}
	}
	if !dry && len(res.Changes) > 0 {
		h.log.Info("tunnel reloaded", "tunnel", name, "changes", len(res.Changes))
		names := peerNames(snap.kind, snap.path)
		h.mu.Lock()
		if e := h.entries[name]; e != nil && e.ovpn == snap.ovpn {
			e.names = names
			snap = *e
		}
		h.mu.Unlock()
		h.emit(&snap, "reloaded")
	}
	return res, nil
}

// ReloadAll reloads every tunnel that is up (SIGHUP to the service) and
// returns the results by tunnel, and the errors of those that failed
// (each left as it was).
func (h *Host) ReloadAll(ctx context.Context) ([]service.ReloadResult, error) {
	h.mu.Lock()
	var names []string
	for n, e := range h.entries {
		if (e.state == service.StateUp || e.state == service.StateReconnecting) && e.path != "" {
			names = append(names, n)
		}
	}
	h.mu.Unlock()
	sort.Strings(names)
	var out []service.ReloadResult
	var errs []error
	for _, n := range names {
		res, err := h.Reload(ctx, n, false)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
			continue
		}
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}
