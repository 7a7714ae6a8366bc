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

// gatewayFleetUp runs a fleet gateway until interrupted.
func gatewayFleetUp(g *gateway.Gateway) int {
	// Not interrupt.Signals: once SIGPIPE is asked for, Go delivers it for
	// every broken socket too, and the etcd client's connection to a
	// member that died must not take the gateway down.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
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
	s, err := etcdstore.New(etcdstore.Config{Endpoints: f.Endpoints, CAFile: f.CAFile, CertFile: f.CertFile, KeyFile: f.KeyFile})
	if err != nil {
		downTunnel(g.Config())
		return fail(err)
	}
	defer s.Close()
	a, err := fleet.New(fleet.Config{Gateway: g, Store: s, Options: o, StatusFile: fleet.StatusPath(g.Name), CacheFile: fleet.CachePath(g.Name),
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		downTunnel(g.Config())
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "%s: gateway %s is site %s of fleet %s; running until interrupted (then it leaves the fleet and goes down)\n", prog, g.Name, f.Site, f.Prefix)
	actx, leave := context.WithCancel(ctx)
	defer leave()
	gone := make(chan struct{})
	go func() {
		// A gateway taken down under the agent (`gateway down`, its
		// daemon killed) must not stay announced: leave the fleet. The
		// look is a connect to the daemon's socket, not a UAPI get,
		// which of thousands of peers costs the daemon time and memory.
		d := &wgtunnel.Daemon{}
		defer d.Close()
		for actx.Err() == nil {
			time.Sleep(2 * time.Second)
			if !d.InUse(g.Name) {
				fmt.Fprintf(os.Stderr, "%s: %s is no longer up; leaving the fleet\n", prog, g.Name)
				close(gone)
				leave()
				return
			}
		}
	}()
	a.Run(actx)
	select {
	case <-gone:
		os.Remove(fleet.StatusPath(g.Name))
		return 1
	default:
	}
	os.Remove(fleet.StatusPath(g.Name))
	if err := downTunnel(g.Config()); err != nil {
		return fail(err)
	}
	return 0
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
