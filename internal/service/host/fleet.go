package host

// Gateways in a fleet (a [fleet] table in the file, docs/gateway.md#fleet):
// the service runs their fleet agent (internal/tunnel/fleet) in its own
// process, for as long as the gateway is up here:
//
//	Up:     wgtunnel.Up (static sites) -> etcd client -> fleet.Agent.Run
//	Down:   the agent stopped (its lease revoked: the others drop the site
//	        at once) -> wgtunnel.Down
//	look:   a fleet gateway found running when the service starts (it
//	        restarted) gets an agent; one whose daemon went loses it
//	Reload: the agent takes the new file (fleet.Agent.Update: static
//	        sites, addresses, fleet settings in place, the fleet's peers
//	        kept; new store endpoints or TLS files: a client of the new
//	        store handed over); a new prefix, site or key restarts it
//	Close:  the agents stop without revoking (the gateways stay up; a
//	        service back within lease_ttl takes the records over)
//
// A gateway whose agent runs elsewhere (`wirelane gateway up` in the
// foreground, the wirelane-fleet@ unit: its status file names a live
// process) is left to that agent; the service shows its state from the
// status file.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/fleet"
	"github.com/wirelane/wirelane/internal/tunnel/fleet/etcdstore"
	"github.com/wirelane/wirelane/internal/tunnel/fleet/store"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

// fleetRun is a fleet agent the service runs for a gateway tunnel.
type fleetRun struct {
	a      *fleet.Agent
	g      *gateway.Gateway
	store  *etcdstore.Store
	iface  string
	cancel context.CancelFunc
	done   chan struct{}
}

// stop ends the agent: revoke, its lease too (the others drop the site
// at once), else the record stays until the lease expires.
func (r *fleetRun) stop(revoke bool) {
	if !revoke {
		r.a.Detach()
	}
	r.cancel()
	<-r.done
	r.store.Close()
	if revoke {
		os.Remove(fleet.StatusPath(r.iface))
	}
}

// fleetRunOf returns the agent the service runs for tunnel name, or nil.
func (h *Host) fleetRunOf(name string) *fleetRun {
	h.fleetMu.Lock()
	defer h.fleetMu.Unlock()
	return h.fleets[name]
}

// loadFleetGateway reads a gateway file with its keys; nil when the file
// has no [fleet] table.
func (h *Host) loadFleetGateway(e *entry) (*gateway.Gateway, error) {
	g, err := gateway.LoadFile(e.path)
	if err != nil {
		return nil, configError(err)
	}
	if g.Fleet == nil {
		return nil, nil
	}
	warnings, err := g.LoadKeys()
	for _, w := range warnings {
		h.log.Warn(w, "tunnel", e.name)
	}
	if err != nil {
		return nil, configError(err)
	}
	return g, nil
}

// startFleet starts the agent of gateway g, tunnel name (which must be
// up). An agent already running for it is left as it is.
func (h *Host) startFleet(name string, g *gateway.Gateway) error {
	h.fleetMu.Lock()
	defer h.fleetMu.Unlock()
	if h.fleets[name] != nil {
		return nil
	}
	f := g.Fleet
	s, err := openStore(g)
	if err != nil {
		return err
	}
	a, err := fleet.New(fleet.Config{Gateway: g, Store: s, Options: h.options(name), StatusFile: fleet.StatusPath(g.Name),
		CacheFile: fleet.CachePath(g.Name), Log: h.log.With("tunnel", name)})
	if err != nil {
		s.Close()
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &fleetRun{a: a, g: g, store: s, iface: g.Name, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); a.Run(ctx) }()
	if h.fleets == nil {
		h.fleets = map[string]*fleetRun{}
	}
	h.fleets[name] = r
	h.log.Info("fleet agent started", "tunnel", name, "fleet", f.Prefix, "site", f.Site)
	return nil
}

// openStore opens a client of the store g's [fleet] table names.
func openStore(g *gateway.Gateway) (*etcdstore.Store, error) {
	f := g.Fleet
	s, err := etcdstore.New(etcdstore.Config{Endpoints: f.Endpoints, CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile})
	if err != nil {
		return nil, &service.ConfigError{File: g.Path, Msg: "[fleet]: " + err.Error()}
	}
	return s, nil
}

// stopFleet stops the agent of tunnel name, if the service runs one.
func (h *Host) stopFleet(name string, revoke bool) {
	h.fleetMu.Lock()
	r := h.fleets[name]
	delete(h.fleets, name)
	h.fleetMu.Unlock()
	if r != nil {
		r.stop(revoke)
		h.log.Info("fleet agent stopped", "tunnel", name, "lease revoked", revoke)
	}
}

// closeFleets stops every agent without revoking (Close: the gateways
// stay up).
func (h *Host) closeFleets() {
	h.fleetMu.Lock()
	runs := h.fleets
	h.fleets = nil
	h.fleetMu.Unlock()
	for _, r := range runs {
		r.stop(false)
	}
}

// foreignAgent reports whether a live process other than this one runs
// the fleet agent of interface iface (its status file says so).
func foreignAgent(iface string) bool {
	st, found, err := fleet.ReadStatus(iface)
	if err != nil || !found || st.PID <= 0 || st.PID == os.Getpid() {
		return false
	}
	return pidAlive(st.PID)
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// upFleet brings up a gateway with a [fleet] table: the gateway, then its
// agent; an agent that cannot start takes the gateway down again.
func (h *Host) upFleet(ctx context.Context, e *entry, g *gateway.Gateway) error {
	if foreignAgent(g.Name) {
		return &service.ConfigError{File: e.path, Msg: "the fleet agent of this gateway runs in another process (`wirelane gateway up`, the wirelane-fleet@ unit); stop it first"}
	}
	if err := wgtunnel.Up(ctx, g.Config(), h.options(e.name)); err != nil {
		return configError(err)
	}
	if err := h.startFleet(e.name, g); err != nil {
		if derr := wgtunnel.Down(g.Config(), h.options(e.name)); derr != nil {
			h.log.Warn("taking the gateway down after its agent failed", "tunnel", e.name, "err", derr)
		}
		return err
	}
	return nil
}

// fleetLook runs after a look: a fleet gateway found running here without
// an agent gets the service's, one whose daemon stopped loses it.
//
// Only the first look (at the service's start) adopts gateways found
// running: one that comes up later behind the service's back was brought
// up by `wirelane gateway up`, whose own agent is starting.
func (h *Host) fleetLook(out []change) {
	h.fleetMu.Lock()
	first := !h.fleetLooked
	h.fleetLooked = true
	h.fleetMu.Unlock()
	for i := range out {
		c := &out[i]
		if c.snap.kind != service.KindGateway || c.tunnels == service.ChangeRemoved {
			continue
		}
		switch {
		case first && c.snap.state == service.StateUp && c.snap.path != "" && h.fleetRunOf(c.snap.name) == nil:
			g, err := h.loadFleetGateway(&c.snap)
			if err != nil || g == nil || foreignAgent(g.Name) {
				if err != nil {
					h.log.Warn("fleet gateway found running; its file does not load, so no agent runs for it", "tunnel", c.snap.name, "err", err)
				}
				continue
			}
			if err := h.startFleet(c.snap.name, g); err != nil {
				h.log.Warn("fleet gateway found running; its agent does not start", "tunnel", c.snap.name, "err", err)
			}
		case c.snap.state == service.StateDown:
			h.stopFleet(c.snap.name, true)
		}
	}
}

// fleetStatus is the API's view of a fleet agent's status.
func fleetStatus(st fleet.Status, running bool) *service.FleetStatus {
	f := &service.FleetStatus{Prefix: st.Prefix, Site: st.Site, AgentRunning: running, StoreReachable: st.StoreReachable, StoreError: st.StoreError,
		Published: st.Published, PublishError: st.PublishError, Known: st.Known, InSync: st.InSync, Conflicts: st.Conflicts,
		Sites: []service.FleetSite{}}
	for _, s := range st.Sites {
		f.Sites = append(f.Sites, service.FleetSite{Name: s.Name, PublicKey: s.PublicKey, Location: s.Location, Endpoint: s.Endpoint,
			Networks: s.Networks, State: s.State, Reason: s.Reason, InSync: s.InSync})
	}
	return f
}

// fleetOf is the fleet state of gateway tunnel name (interface iface):
// from the agent the service runs, else from the status file of an agent
// that runs elsewhere; nil when none ever ran.
func (h *Host) fleetOf(name, iface string) *service.FleetStatus {
	if r := h.fleetRunOf(name); r != nil {
		return fleetStatus(r.a.Status(), true)
	}
	st, found, err := fleet.ReadStatus(iface)
	if err != nil || !found {
		return nil
	}
	return fleetStatus(st, st.PID > 0 && st.PID != os.Getpid() && pidAlive(st.PID))
}

// reloadFleet reloads a fleet gateway whose agent the service runs, from
// its file: the changes are those of the file against the running device
// with the fleet's peers kept; the agent applies them (Update), or is
// restarted for a new prefix, site or key. handled is false when
// the service runs no agent for the tunnel.
func (h *Host) reloadFleet(ctx context.Context, e *entry, dry bool) (res service.ReloadResult, handled bool, err error) {
	r := h.fleetRunOf(e.name)
	res = service.ReloadResult{Tunnel: e.name, DryRun: dry}
	g, err := h.loadFleetGateway(e)
	switch {
	case r == nil && (err != nil || g == nil):
		return res, false, nil // not a fleet gateway (or its file's error is the plain reload's)
	case r == nil:
		// Its agent runs elsewhere (a reload here would drop the fleet's
		// peers), or none does.
		if st, found, _ := fleet.ReadStatus(g.Name); found && foreignAgent(g.Name) {
			return res, true, fmt.Errorf("%q: its fleet agent runs in process %d, which reloads the file on SIGHUP (`wirelane gateway reload %s`): %w", e.name, st.PID, e.path, service.ErrBusy)
		}
		return res, true, fmt.Errorf("%q is in fleet %s but no agent runs for it: take it down and up again: %w", e.name, g.Fleet.Prefix, service.ErrBusy)
	case err != nil:
		return res, true, err
	case g == nil:
		return res, true, &service.ConfigError{File: e.path, Msg: "the [fleet] table is gone: take the gateway down and up again to leave the fleet"}
	}
	cfg := g.Config()
	cfg.Peers = append(cfg.Peers, r.a.Peers()...)
	p, err := wgtunnel.Reload(ctx, cfg, wgtunnel.ReloadOptions{Options: h.options(e.name), DryRun: true})
	if err != nil {
		return res, true, configError(err)
	}
	res.Changes = p.Lines()
	restart := fleet.NeedsRestart(r.g, g)
	newStore := !restart && fleet.StoreChanged(r.g, g)
	switch {
	case restart:
		res.Notes = append(res.Notes, "the fleet's prefix, site or key changed: its agent restarts")
	case newStore:
		res.Notes = append(res.Notes, "the fleet's store endpoints or TLS files changed: the agent moves onto the new store in place")
	}
	if dry {
		return res, true, nil
	}
	if !restart {
		var s *etcdstore.Store
		var st store.Store // nil unless the store changed
		if newStore {
			if s, err = openStore(g); err != nil {
				return res, true, err
			}
			st = s
		}
		err := r.a.Update(ctx, g, st)
		if s != nil {
			// The agent is on the new store whatever the apply did.
			h.fleetMu.Lock()
			old := r.store
			r.store = s
			h.fleetMu.Unlock()
			old.Close()
		}
		if err != nil {
			return res, true, configError(err)
		}
		h.fleetMu.Lock()
		r.g = g
		h.fleetMu.Unlock()
		return res, true, nil
	}
	// A new agent: the old one leaves (its record revoked when the site
	// or prefix changes, else kept for the new one to take over), the
	// file's part is applied with the fleet's peers kept, and the new
	// agent's first apply puts the fleet in step.
	same := r.g.Fleet.Prefix == g.Fleet.Prefix && r.g.Fleet.Site == g.Fleet.Site && *r.g.PrivateKey == *g.PrivateKey
	h.stopFleet(e.name, !same)
	if _, err := wgtunnel.Reload(ctx, cfg, wgtunnel.ReloadOptions{Options: h.options(e.name)}); err != nil {
		h.log.Warn("reload of the fleet gateway failed; its agent starts again on the new file", "tunnel", e.name, "err", err)
	}
	if err := h.startFleet(e.name, g); err != nil {
		return res, true, fmt.Errorf("the fleet agent does not start on the new file: %w", err)
	}
	return res, true, nil
}
