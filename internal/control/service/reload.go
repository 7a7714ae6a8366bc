package service

// POST /v1/tunnels/{name}/reload (operator): the running tunnel is
// changed in place into what its file now says (the Host's Reloader).
// Body (optional): {"dry_run": true} to get the plan without applying it.
// Answer: 200 with a ReloadResult; a file that does not parse is 400 with
// its line, a tunnel that is not up 409; a reload that failed part-way
// (undone: the tunnel is as it was) 500 with the reason.

import (
	"context"
	"net/http"
)

// Reloader is implemented by a Host whose tunnels reload in place. A
// Host without it answers 501 to POST /v1/tunnels/{name}/reload.
type Reloader interface {
	// Reload changes the running tunnel name into what its file says and
	// returns what it changed (dry: what it would change, applying
	// nothing). A tunnel that is not up is ErrBusy; a bad file a
	// *ConfigError; a failed change is undone before it returns.
	Reload(ctx context.Context, name string, dry bool) (ReloadResult, error)
}

// ReloadRequest is the optional body of POST /v1/tunnels/{name}/reload.
type ReloadRequest struct {
	DryRun bool `json:"dry_run,omitempty"`
}

// ReloadResult is the answer of a reload.
type ReloadResult struct {
	Tunnel string `json:"tunnel"`
	// DryRun: nothing was applied; Changes are what a reload would do.
	DryRun bool `json:"dry_run,omitempty"`
	// Changes lists the changes, one line each (empty: the running
	// tunnel matches its file).
	Changes []string `json:"changes"`
	// Notes say what the changes mean for sessions (a WireGuard private
	// key change restarts every session; an OpenVPN client's change that
	// waits for its next reconnect).
	Notes []string `json:"notes,omitempty"`
}

// reloadTunnel answers POST /v1/tunnels/{name}/reload.
func (s *Server) reloadTunnel(w http.ResponseWriter, r *http.Request, name string) {
	rl, ok := s.host.(Reloader)
	if !ok {
		writeError(w, http.StatusNotImplemented, apiError{Error: "this service cannot reload tunnels"})
		return
	}
	var req ReloadRequest
	if r.ContentLength != 0 && !s.readJSON(w, r, &req) {
		return
	}
	ctx, cancel := s.hostContext(r)
	defer cancel()
	c := callerOf(r.Context())
	s.log.Info("tunnel reload requested", "tunnel", name, "uid", c.uid, "dry_run", req.DryRun)
	res, err := rl.Reload(ctx, name, req.DryRun)
	if err != nil {
		s.hostError(w, err)
		return
	}
	if res.Changes == nil {
		res.Changes = []string{}
	}
	writeJSON(w, http.StatusOK, res)
}
