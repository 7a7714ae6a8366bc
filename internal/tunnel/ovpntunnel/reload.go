package ovpntunnel

// Reloading a running OpenVPN tunnel (issue 17): how a reload reaches it
// and what it does.
//
//	caller (service: Reloader.Reload; `wirelane reload NAME`: the control
//	socket beside the status file, ovpn-<pid>[-n].sock, mode 0600)
//	    -> the tunnel's own goroutine (Serve's or Connect's select loop:
//	       reloads never race its teardown)
//	       server: parse the file (FILE:LINE) -> server.PlanReload
//	           -> dry run? the plan -> host side with an undo stack: the
//	              tunnel addresses (new added before the old goes), routes
//	              removed, added -> server.ApplyReload (clients the file
//	              no longer admits are disconnected with the reason)
//	           a failure undoes the host side: the tunnel is as it was
//	       client: clientReload (connect.go's side, reload_client.go)
//
// SIGHUP is not a reload for `wirelane ovpn serve|connect` in the
// foreground: there it means the terminal went away, and the tunnel
// stops and undoes what it did (internal/tunnel/interrupt). The service
// (wirelaned) reloads all its tunnels on SIGHUP.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/internal/sys/gomem"
	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/ovpn/server"
)

// Plan is what a reload of an OpenVPN tunnel changed, or (dry run) would
// change.
type Plan struct {
	// Lines describe the changes, one each; none: the file matches.
	Lines []string `json:"lines"`
	// Notes say what the changes mean for connected peers (a client's
	// change that waits for the next reconnect).
	Notes []string `json:"notes,omitempty"`
	// DryRun: nothing was applied.
	DryRun bool `json:"dry_run,omitempty"`
}

// Empty reports whether the plan has no change.
func (p *Plan) Empty() bool { return p == nil || len(p.Lines) == 0 }

// ErrNotRunning is Reloader.Reload's error when no tunnel listens on it.
var ErrNotRunning = errors.New("the OpenVPN tunnel is not running")

// Reloader hands reload requests to a running Serve or Connect
// (ServeOptions.Reloader, ConnectOptions.Reloader). Safe for concurrent
// use; requests are applied one at a time.
type Reloader struct {
	mu   sync.Mutex
	reqs chan reloadReq // nil until a tunnel runs; guarded by mu
	done chan struct{}  // closed when that tunnel stops; guarded by mu
}

// reloadReq is one request to the tunnel's goroutine.
type reloadReq struct {
	dry   bool
	reply chan reloadReply
}

type reloadReply struct {
	plan *Plan
	err  error
}

// NewReloader returns a Reloader that no tunnel listens on yet.
func NewReloader() *Reloader { return &Reloader{} }

// Reload asks the running tunnel to reload its file (dry: only to plan)
// and waits for the plan, or for ctx.
func (r *Reloader) Reload(ctx context.Context, dry bool) (*Plan, error) {
	r.mu.Lock()
	reqs, done := r.reqs, r.done
	r.mu.Unlock()
	if reqs == nil {
		return nil, ErrNotRunning
	}
	req := reloadReq{dry: dry, reply: make(chan reloadReply, 1)}
	select {
	case reqs <- req:
	case <-done:
		return nil, ErrNotRunning
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case rep := <-req.reply:
		return rep.plan, rep.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// attach makes r the reloader of a tunnel whose goroutine reads the
// returned channel; detach (at the tunnel's end) refuses later requests.
func (r *Reloader) attach() (reqs <-chan reloadReq, detach func()) {
	if r == nil {
		r = NewReloader() // still served by the control socket
	}
	ch, done := make(chan reloadReq), make(chan struct{})
	r.mu.Lock()
	r.reqs, r.done = ch, done
	r.mu.Unlock()
	return ch, func() {
		r.mu.Lock()
		if r.reqs == ch {
			r.reqs, r.done = nil, nil
		}
		r.mu.Unlock()
		close(done)
	}
}

// serverReload reloads a running server from its file.
type serverReload struct {
	file string
	name string // the TUN device
	s    *server.Server
	nc   *netConf
}

// reload plans (and, unless dry, applies) the file's changes.
func (x *serverReload) reload(dry bool) (*Plan, error) {
	cfg, err := server.ParseConfigFile(x.file)
	if err != nil {
		return nil, err // FILE:LINE
	}
	sp, err := x.s.PlanReload(cfg)
	if err != nil {
		return nil, err
	}
	p := &Plan{Lines: sp.Lines(), DryRun: dry}
	for _, w := range cfg.Warnings {
		p.Notes = append(p.Notes, fmt.Sprintf("%s:%d: %s: %s", x.file, w.Line, w.Directive, cmp.Or(w.Message, "ignored")))
	}
	if dry || sp.Empty() {
		return p, nil
	}
	var undo netcfg.Undo
	if err := x.hostSide(sp, &undo); err != nil {
		if rerr := undo.Rollback(); rerr != nil {
			return nil, fmt.Errorf("reload: %w; undoing it failed too: %v", err, rerr)
		}
		return nil, fmt.Errorf("reload: %w (the tunnel is as it was)", err)
	}
	if _, err := x.s.ApplyReload(sp); err != nil {
		_ = undo.Rollback()
		return nil, fmt.Errorf("reload: %w (the tunnel is as it was)", err)
	}
	undo.Discard()
	for _, l := range p.Lines {
		progress("reload: %s", l)
	}
	return p, nil
}

// hostSide changes the TUN device's addresses and routes as the plan
// says, each inverse on undo; the routes added are also recorded for
// teardown.
func (x *serverReload) hostSide(sp *server.ReloadPlan, undo *netcfg.Undo) error {
	c := x.nc
	c.nc.Undo = undo
	defer func() { c.nc.Undo = nil }()
	for _, pair := range [][2]netip.Prefix{{sp.OldAddress, sp.Address}, {sp.OldAddress6, sp.Address6}} {
		old, nu := pair[0], pair[1]
		if old == nu {
			continue
		}
		// The new address first: the host never has none.
		if err := c.addAddr(nu); err != nil {
			return err
		}
		if old.IsValid() {
			if err := c.nc.RemoveAddress(x.name, old); err != nil {
				return err
			}
		}
	}
	for _, r := range sp.RemoveRoutes {
		if err := c.nc.DeleteRoute(x.name, r, 0); err != nil {
			return err
		}
	}
	for _, r := range sp.AddRoutes {
		if err := c.nc.AddRouteVia(x.name, r, netip.Addr{}); err != nil {
			return err
		}
	}
	for _, r := range sp.AddRoutes {
		c.routes.Push("route "+r.String(), func() error { return c.nc.DeleteRoute(x.name, r, 0) })
	}
	return nil
}

// controlSocket serves reload requests from `wirelane reload` on a unix
// socket beside the status file (mode 0600: root's).
type controlSocket struct {
	path string
	ln   net.Listener
}

// controlRequest and controlReply are the socket's one JSON line each way:
// a reload (or its dry run), or the process's runtime gauges.
type controlRequest struct {
	Reload  bool `json:"reload,omitempty"`
	DryRun  bool `json:"dry_run,omitempty"`
	Runtime bool `json:"runtime,omitempty"`
}

type controlReply struct {
	Plan    *Plan        `json:"plan,omitempty"`
	Runtime *gomem.Stats `json:"runtime,omitempty"`
	Error   string       `json:"error,omitempty"`
}

// openControl listens on path and hands each request to r.
func openControl(path string, r *Reloader) (*controlSocket, error) {
	if err := makeStatusDir(); err != nil {
		return nil, err
	}
	_ = os.Remove(path) // a dead process's socket (the pid is ours now)
	// Until the chmod, the umask keeps others from writing (connecting).
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket: %w", err)
	}
	cs := &controlSocket{path: path, ln: ln}
	go cs.serve(r)
	return cs, nil
}

func (cs *controlSocket) serve(r *Reloader) {
	for {
		c, err := cs.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
			line, err := bufio.NewReader(io.LimitReader(c, maxControlLine)).ReadBytes('\n')
			var req controlRequest
			if err == nil {
				req, err = parseControlRequest(line)
			}
			var rep controlReply
			switch {
			case err != nil:
				rep.Error = "bad request: " + err.Error()
			case req.Runtime:
				st := gomem.Read()
				rep.Runtime = &st
			default:
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				rep.Plan, err = r.Reload(ctx, req.DryRun)
				cancel()
				if err != nil {
					rep.Error = err.Error()
				}
			}
			b, _ := json.Marshal(rep)
			_, _ = c.Write(append(b, '\n'))
		}()
	}
}

// maxControlLine bounds a request line.
const maxControlLine = 4096

// parseControlRequest reads one request line: a JSON object with
// "reload": true (and "dry_run"), or "runtime": true, nothing else.
func parseControlRequest(line []byte) (controlRequest, error) {
	var req controlRequest
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, err
	}
	switch {
	case req.Reload && req.Runtime:
		return req, errors.New("one request at a time (reload or runtime)")
	case req.Runtime && req.DryRun:
		return req, errors.New("dry_run belongs to a reload")
	case !req.Reload && !req.Runtime:
		return req, errors.New("unknown request (want {\"reload\": true} or {\"runtime\": true})")
	}
	return req, nil
}

// controls counts the control sockets this process has opened.
var controls atomic.Int64

// controlPath is where the next control socket of this process goes.
func controlPath() string {
	if n := controls.Add(1); n > 1 {
		return filepath.Join(StatusDir, fmt.Sprintf("ovpn-%d-%d.sock", os.Getpid(), n))
	}
	return filepath.Join(StatusDir, fmt.Sprintf("ovpn-%d.sock", os.Getpid()))
}

func (cs *controlSocket) close() {
	if cs == nil {
		return
	}
	cs.ln.Close()
	os.Remove(cs.path)
}

// ReloadRunning reloads the OpenVPN tunnel this host runs for arg (its
// interface, its configuration file, or that file's name without
// .conf/.ovpn), through the control socket its status file names. It
// returns ErrNotRunning when no running tunnel matches.
func ReloadRunning(ctx context.Context, arg string, dry bool) (*Plan, TunnelStatus, error) {
	st, ok, err := FindRunning(arg)
	if err != nil {
		return nil, st, err
	}
	if !ok {
		return nil, st, fmt.Errorf("%q: %w (no status file in %s names it)", arg, ErrNotRunning, StatusDir)
	}
	if st.Control == "" {
		return nil, st, fmt.Errorf("the OpenVPN tunnel %q (pid %d) has no control socket: its wirelane is older than reload", arg, st.PID)
	}
	rep, err := askControl(ctx, st.Control, controlRequest{Reload: true, DryRun: dry})
	if err != nil {
		return nil, st, fmt.Errorf("control socket of %q: %w", arg, err)
	}
	if rep.Error != "" {
		return rep.Plan, st, errors.New(rep.Error) // the reload's own, FILE:LINE
	}
	return rep.Plan, st, nil
}

// RuntimeOf returns the Go runtime's gauges (heap, stacks, collections,
// goroutines) of the OpenVPN tunnel process whose control socket is
// control (TunnelStatus.Control). The rekey soaks read them to show a
// process stays flat.
func RuntimeOf(ctx context.Context, control string) (gomem.Stats, error) {
	rep, err := askControl(ctx, control, controlRequest{Runtime: true})
	if err != nil {
		return gomem.Stats{}, err
	}
	if rep.Error != "" {
		return gomem.Stats{}, errors.New(rep.Error)
	}
	if rep.Runtime == nil {
		return gomem.Stats{}, errors.New("the answer has no runtime gauges (an older wirelane?)")
	}
	return *rep.Runtime, nil
}

// askControl sends req over the control socket at path and returns the
// reply (whose Error the caller reads); err is the exchange's own.
func askControl(ctx context.Context, path string, req controlRequest) (controlReply, error) {
	var rep controlReply
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return rep, err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return rep, err
	}
	line, err := bufio.NewReader(io.LimitReader(c, 1<<20)).ReadBytes('\n')
	if err != nil {
		return rep, err
	}
	err = json.Unmarshal(line, &rep)
	return rep, err
}

// FindRunning returns the running OpenVPN tunnel arg names: its
// interface, its configuration file (a path), or the file's name without
// .conf or .ovpn.
func FindRunning(arg string) (TunnelStatus, bool, error) {
	all, err := Status()
	if err != nil {
		return TunnelStatus{}, false, err
	}
	abs, _ := filepath.Abs(arg)
	for _, st := range all {
		base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(st.Config), ".conf"), ".ovpn")
		if st.Interface == arg || st.Config == abs || base == arg {
			return st, true, nil
		}
	}
	return TunnelStatus{}, false, nil
}
