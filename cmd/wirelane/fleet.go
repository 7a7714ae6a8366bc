package main

// A gateway in a fleet (a [fleet] table in its file): `gateway up` brings
// it up as usual, then stays in the foreground running the fleet agent
// (internal/tunnel/fleet) for as long as the gateway lives; `gateway show`
// prints the fleet's sites from the agent's status file.
//
//	up:   parse -> keys -> wgtunnel.Up (or take over a running gateway
//	      whose agent died) -> etcd client -> fleet.Agent.Run until a
//	      signal -> revoke the lease -> wgtunnel.Down

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/wirelane/wirelane/internal/tunnel/fleet"
	"github.com/wirelane/wirelane/internal/tunnel/fleet/etcdstore"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

// gatewayFleetUp runs a fleet gateway until interrupted. SIGHUP reloads
// its file: the agent takes it in place (fleet.Agent.Update; new store
// endpoints or TLS files with a client of the new store), or, for a new
// prefix, site or key, a new agent replaces it.
func gatewayFleetUp(g *gateway.Gateway) int {
	// Not interrupt.Signals: once SIGPIPE is asked for, Go delivers it for
	// every broken socket too, and the etcd client's connection to a
	// member that died must not take the gateway down.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	o, done := tunnelOptions()
	defer done()
	noFW, err := wgtunnel.FirewallFromEnv()
	if err != nil {
		return fail(err)
	}
	o.NoFirewall = noFW
	f := g.Fleet
	st, err := wgtunnel.Status(g.Name, o)
	if err != nil {
		return fail(err)
	}
	if st.Up {
		fmt.Fprintf(os.Stderr, "%s: %s is up already; its fleet agent takes it over\n", prog, g.Name)
	} else if err := wgtunnel.Up(ctx, g.Config(), o); err != nil {
		return failCtx(ctx, "gateway", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	heapProfileOnUSR1(log)
	// run is one agent: its store client, its context, its end.
	type run struct {
		a      *fleet.Agent
		s      *etcdstore.Store
		cancel context.CancelFunc
		done   chan struct{}
	}
	start := func(g *gateway.Gateway) (*run, error) {
		f := g.Fleet
		s, err := etcdstore.New(etcdstore.Config{Endpoints: f.Endpoints, CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile})
		if err != nil {
			return nil, err
		}
		a, err := fleet.New(fleet.Config{Gateway: g, Store: s, Options: o, StatusFile: fleet.StatusPath(g.Name), CacheFile: fleet.CachePath(g.Name), Log: log})
		if err != nil {
			s.Close()
			return nil, err
		}
		actx, cancel := context.WithCancel(ctx)
		r := &run{a: a, s: s, cancel: cancel, done: make(chan struct{})}
		go func() { defer close(r.done); a.Run(actx) }()
		return r, nil
	}
	end := func(r *run, revoke bool) {
		if !revoke {
			r.a.Detach()
		}
		r.cancel()
		<-r.done
		r.s.Close()
	}
	cur, err := start(g)
	if err != nil {
		downTunnel(g.Config())
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "%s: gateway %s is site %s of fleet %s; running until interrupted (then it leaves the fleet and goes down; SIGHUP reloads %s)\n", prog, g.Name, f.Site, f.Prefix, g.Path)
	gone := make(chan struct{})
	go func() {
		// A gateway taken down under the agent (`gateway down`, its
		// daemon killed) must not stay announced: leave the fleet. The
		// look is a connect to the daemon's socket, not a UAPI get,
		// which of thousands of peers costs the daemon time and memory.
		d := &wgtunnel.Daemon{}
		defer d.Close()
		for ctx.Err() == nil {
			time.Sleep(2 * time.Second)
			if !d.InUse(g.Name) {
				fmt.Fprintf(os.Stderr, "%s: %s is no longer up; leaving the fleet\n", prog, g.Name)
				close(gone)
				return
			}
		}
	}()
	for {
		select {
		case <-hup:
			g2, err := reloadFleetFile(g.Path)
			switch {
			case err != nil:
			case !fleet.NeedsRestart(g, g2) && fleet.StoreChanged(g, g2):
				// New endpoints or TLS files: the agent moves onto a
				// client of the new store in place.
				f2 := g2.Fleet
				s2, serr := etcdstore.New(etcdstore.Config{Endpoints: f2.Endpoints, CAFile: f2.CAFile, CertFile: f2.CertFile, KeyFile: f2.KeyFile})
				if serr != nil {
					err = fmt.Errorf("%s: [fleet]: %w", g2.Path, serr)
					break
				}
				err = cur.a.Update(ctx, g2, s2)
				old := cur.s
				cur.s = s2 // the agent is on it whatever the apply did
				old.Close()
			case !fleet.NeedsRestart(g, g2):
				err = cur.a.Update(ctx, g2, nil)
			default:
				// A new agent; the old one's record is kept for it unless
				// the site, prefix or key changed.
				same := g.Fleet.Prefix == g2.Fleet.Prefix && g.Fleet.Site == g2.Fleet.Site && *g.PrivateKey == *g2.PrivateKey && g.Name == g2.Name
				if g.Name != g2.Name {
					err = fmt.Errorf("%s: the interface name changed (%s -> %s): take the gateway down and up again", g.Path, g.Name, g2.Name)
					break
				}
				peers := cur.a.Peers()
				end(cur, !same)
				cfg := g2.Config()
				cfg.Peers = append(cfg.Peers, peers...)
				if _, rerr := wgtunnel.Reload(ctx, cfg, wgtunnel.ReloadOptions{Options: o}); rerr != nil {
					log.Warn("reload of the gateway's own settings failed; the new agent tries again", "err", rerr)
				}
				var nr *run
				if nr, err = start(g2); err != nil {
					// Back to the file that ran.
					log.Error("the new agent does not start; the old file's agent runs again", "err", err)
					nr, _ = start(g)
					g2 = g
				}
				if nr == nil {
					downTunnel(g.Config())
					return fail(err)
				}
				cur = nr
			}
			if err == nil {
				g = g2
				log.Info("reloaded", "file", g.Path)
			} else {
				log.Warn("reload failed; the gateway runs on as it was", "file", g.Path, "err", err)
			}
			cur.a.NoteReload(err)
			continue
		case <-gone:
			end(cur, true)
			os.Remove(fleet.StatusPath(g.Name))
			return 1
		case <-ctx.Done():
		}
		break
	}
	end(cur, true)
	os.Remove(fleet.StatusPath(g.Name))
	if err := downTunnel(g.Config()); err != nil {
		return fail(err)
	}
	return 0
}

// heapProfileOnUSR1: with WIRELANE_FLEET_HEAP_PROFILE=FILE, SIGUSR1
// writes the agent's heap profile to FILE after a collection (for `go
// tool pprof`; scripts/fleet-scale.sh's measurement uses it). A FILE
// ending in .txt gets the text form, which also carries the heap's
// totals (runtime.MemStats): the scale test reads HeapAlloc there.
func heapProfileOnUSR1(log *slog.Logger) {
	path := os.Getenv("WIRELANE_FLEET_HEAP_PROFILE")
	if path == "" {
		return
	}
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			runtime.GC()
			f, err := os.Create(path)
			if err == nil {
				debug := 0
				if strings.HasSuffix(path, ".txt") {
					debug = 1
				}
				err = errors.Join(pprof.Lookup("heap").WriteTo(f, debug), f.Close())
			}
			if err != nil {
				log.Warn("heap profile", "file", path, "err", err)
			}
		}
	}()
}

// reloadFleetFile reads a fleet gateway's file again, with its keys and
// its etcd TLS files, for a reload.
func reloadFleetFile(path string) (*gateway.Gateway, error) {
	g, err := gateway.LoadFile(path)
	if err != nil {
		return nil, err
	}
	if g.Fleet == nil {
		return nil, fmt.Errorf("%s: the [fleet] table is gone: take the gateway down and up again to leave the fleet", path)
	}
	if err := loadGatewayKeys(g); err != nil {
		return nil, err
	}
	if err := checkFleetTLS(g); err != nil {
		return nil, err
	}
	return g, nil
}

// reloadFleetGateway reloads a fleet gateway's file in the process that
// runs its agent: the service (through its API) or `gateway up` (SIGHUP,
// then its status file says how it went).
func reloadFleetGateway(g *gateway.Gateway, dry bool) int {
	st, found, err := fleet.ReadStatus(g.Name)
	if err != nil {
		return fail(err)
	}
	if !found || st.PID <= 0 || syscall.Kill(st.PID, 0) != nil {
		return fail(fmt.Errorf("%s is in fleet %s and no agent runs for it (start it with: %s gateway up %s)", g.Name, g.Fleet.Prefix, prog, g.Path))
	}
	if c, ts := serviceClient(); c != nil {
		for _, t := range ts {
			if (t.Interface == g.Name || (t.Interface == "" && t.Name == g.Name)) && t.Fleet != nil && t.Fleet.AgentRunning && t.Config != "" {
				if sameFile(t.Config, g.Path) {
					return reloadThroughService(c, t.Name, dry)
				}
			}
		}
	}
	if dry {
		return fail(fmt.Errorf("%s: its fleet agent runs in process %d (`gateway up`), which reloads on SIGHUP; --dry-run is answered only by the service's agents", g.Name, st.PID))
	}
	sent := time.Now()
	if err := syscall.Kill(st.PID, syscall.SIGHUP); err != nil {
		return fail(fmt.Errorf("signal the fleet agent (pid %d): %w", st.PID, err))
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		now, found, err := fleet.ReadStatus(g.Name)
		if err != nil || !found || !now.Reloaded.After(sent) {
			continue
		}
		if now.ReloadError != "" {
			return fail(fmt.Errorf("%s: the fleet agent (pid %d) did not take the file: %s", g.Name, now.PID, now.ReloadError))
		}
		fmt.Printf("%s: reloaded from %s by its fleet agent (pid %d)\n", g.Name, g.Path, now.PID)
		return 0
	}
	return fail(fmt.Errorf("%s: the fleet agent (pid %d) did not answer the reload within a minute", g.Name, st.PID))
}

// sameFile reports whether a and b name the same file.
func sameFile(a, b string) bool {
	fa, err1 := os.Stat(a)
	fb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(fa, fb)
}

// checkFleetTLS reads a fleet gateway's etcd TLS files, as up will.
func checkFleetTLS(g *gateway.Gateway) error {
	if g.Fleet == nil {
		return nil
	}
	if _, err := etcdstore.TLSConfig(g.Fleet.CAFile, g.Fleet.CertFile, g.Fleet.KeyFile); err != nil {
		return fmt.Errorf("%s: [fleet]: %w", g.Path, err)
	}
	return nil
}

// printFleet prints the fleet part of `gateway show`: the agent's state
// and every site it knows.
func printFleet(g *gateway.Gateway) {
	st, found, err := fleet.ReadStatus(g.Name)
	switch {
	case err != nil:
		fmt.Printf("fleet %s: %v\n", g.Fleet.Prefix, err)
		return
	case !found:
		fmt.Printf("fleet %s: no agent runs for %s (start it with: %s gateway up %s)\n", g.Fleet.Prefix, g.Name, prog, g.Path)
		return
	}
	alive := false
	if st.PID > 0 {
		err := syscall.Kill(st.PID, 0)
		alive = err == nil || errors.Is(err, syscall.EPERM)
	}
	store := "reachable"
	if !st.StoreReachable {
		store = "UNREACHABLE (keeping the last state)"
		if st.StoreError != "" {
			store += ": " + st.StoreError
		}
	}
	fmt.Printf("fleet %s (revision %d)\n", st.Prefix, st.Revision)
	row := func(k, v string) { fmt.Printf("  %-15s %s\n", k+":", v) }
	if !alive {
		row("agent", fmt.Sprintf("NOT RUNNING (pid %d; status of %s)", st.PID, st.Updated.Format(time.RFC3339)))
	} else {
		row("agent", fmt.Sprintf("pid %d", st.PID))
	}
	row("store", store)
	pub := "yes"
	if !st.Published {
		pub = "no"
		if st.PublishError != "" {
			pub += ": " + st.PublishError
		}
	}
	row("published", pub)
	row("sites", fmt.Sprintf("%d known, %d in sync, %d conflicts", st.Known, st.InSync, st.Conflicts))
	if st.ApplyError != "" {
		row("last apply", "FAILED: "+st.ApplyError)
	}
	sites := st.Sites
	sort.Slice(sites, func(i, j int) bool { return sites[i].Name < sites[j].Name })
	tw := tabwriter.NewWriter(os.Stdout, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "  SITE\tSTATE\tLOCATION\tENDPOINT\tNETWORKS\tNOTE")
	for _, s := range sites {
		state := s.State
		if (s.State == fleet.StateActive || s.State == fleet.StateVia) && !s.InSync {
			state += " (not applied)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", s.Name, state, dash(s.Location), dash(s.Endpoint), dash(strings.Join(s.Networks, ",")), s.Reason)
	}
	tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
