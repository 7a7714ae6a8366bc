package main

// `wirelane reload`: the running tunnel is changed in place into what its
// file (a wg-quick file, a gateway's TOML file, an OpenVPN file) now says;
// the tunnel library (wgtunnel.Reload; for OpenVPN the running process,
// through the service's API or the control socket its status file names)
// computes the plan and applies it with its undo. This file only parses,
// prints the plan and reports.
//
//	NAME.toml -> gateway | root? | the service runs an OpenVPN tunnel NAME
//	-> POST /v1/tunnels/NAME/reload | an OpenVPN tunnel runs for NAME (its
//	interface, file, or file name) -> its control socket | wg-quick

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/wirelane/wirelane/internal/control/service/client"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"

	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

const reloadHelp = `Changes the running tunnel into what its file now says, in place: peers
added and removed; for a peer that stays only what changed (allowed IPs,
endpoint, keepalive, preshared key), so its session, keypairs, counters
and handshake state survive; addresses, MTU, the routes of the allowed IPs,
the policy rules and firewall of a default route, FwMark, Table and DNS
(compared with what systemd-resolved or resolvconf holds for the link). The
listen port is rebound only when it changed; PreUp and PostUp do not run
again. A new private key restarts every session, and reload says so.
Prints each change it makes; a reload that fails part-way undoes what it
did and leaves the tunnel as it was. A file with no change changes nothing.

` + quickFileHelp + `
A FILE.toml is a gateway file (as 'wirelane gateway reload FILE').

OpenVPN tunnels ('wirelane ovpn serve|connect' in the foreground or in
the service) are found by interface, file or file name and reload in
their own process. A server applies a new CRL, CA or certificate at once
(connected clients it no longer admits are disconnected, with the
reason), its routes at once, and push lines, data-ciphers and pools to
the sessions that start after it; connected clients keep their session
and keys. A client applies its own DNS lines and block-ipv6 at once and
the rest at its next reconnect. SIGHUP stops a foreground
'wirelane ovpn' (a closed terminal); use reload.`

func cmdReload(args []string) int {
	fs := flag.NewFlagSet("reload", flag.ContinueOnError)
	dry := fs.Bool("dry-run", false, "print the changes without applying them")
	rest, st := parseFlags(fs, "reload", args, 1, 1)
	if st >= 0 {
		return st
	}
	arg := rest[0]
	if strings.HasSuffix(arg, ".toml") {
		return reloadGateway(arg, *dry)
	}
	// The service's OpenVPN tunnels reload in the service (its operators
	// may ask; no root needed here).
	if isTunnelName(arg) {
		if c, ts := serviceClient(); c != nil {
			if t, ok := findTunnel(ts, arg); ok && !isWireGuard(&t) {
				return reloadThroughService(c, arg, *dry)
			}
		}
	}
	if os.Geteuid() != 0 {
		return fail(fmt.Errorf("reload needs root: it changes interfaces, routes and rules (try: sudo %s reload %s)", prog, arg))
	}
	if st, ok, err := ovpntunnel.FindRunning(arg); err == nil && ok {
		return reloadOVPN(arg, st, *dry)
	}
	cfg, err := wgquick.LoadFile(arg)
	if err != nil {
		return fail(err)
	}
	if wgquick.WorldAccessible(cfg.Path) {
		fmt.Fprintf(os.Stderr, "Warning: `%s' is world accessible\n", cfg.Path)
	}
	return reloadTunnel(cfg, *dry)
}

// reloadGateway reloads the gateway of the file (or name) arg.
func reloadGateway(arg string, dry bool) int {
	if os.Geteuid() != 0 {
		return fail(fmt.Errorf("reload needs root: it changes interfaces, routes and rules (try: sudo %s gateway reload %s)", prog, arg))
	}
	path, _ := gateway.Resolve(arg)
	g, err := gateway.LoadFile(path)
	if err != nil {
		return fail(err)
	}
	if g.Fleet != nil {
		return reloadFleetGateway(g, dry)
	}
	if err := loadGatewayKeys(g); err != nil {
		return fail(err)
	}
	return reloadTunnel(g.Config(), dry)
}

// reloadTunnel reloads cfg's tunnel (or, dry, prints the plan) and prints
// what changed.
func reloadTunnel(cfg *wgquick.Config, dry bool) int {
	ctx, stop := signalContext()
	defer stop()
	o, done := tunnelOptions()
	defer done()
	noFW, err := wgtunnel.FirewallFromEnv()
	if err != nil {
		return fail(err)
	}
	o.NoFirewall = noFW
	if dry {
		o.Log = nil
	}
	p, err := wgtunnel.Reload(ctx, cfg, wgtunnel.ReloadOptions{Options: o, DryRun: dry})
	if err != nil {
		return failCtx(ctx, "reload", err)
	}
	lines := p.Lines()
	switch {
	case len(lines) == 0:
		fmt.Printf("%s: no change (the running tunnel matches %s)\n", cfg.Name, cfg.Path)
	case dry:
		fmt.Printf("%s: reload would make %d change(s):\n", cfg.Name, len(lines))
	default:
		fmt.Printf("%s: reloaded from %s, %d change(s):\n", cfg.Name, cfg.Path, len(lines))
	}
	for _, l := range lines {
		fmt.Printf("  %s\n", l)
	}
	if p.PrivateKey && !dry {
		fmt.Fprintf(os.Stderr, "Warning: %s has a new private key: every peer's session restarted\n", cfg.Name)
	}
	return 0
}

// reloadOVPN reloads the running OpenVPN tunnel st through its control
// socket.
func reloadOVPN(arg string, st ovpntunnel.TunnelStatus, dry bool) int {
	ctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p, _, err := ovpntunnel.ReloadRunning(ctx, arg, dry)
	if err != nil {
		return fail(err)
	}
	name := st.Interface
	if name == "" {
		name = arg
	}
	printPlan(name, st.Config, dry, p.Lines, p.Notes)
	return 0
}

// reloadThroughService reloads the service's tunnel name.
func reloadThroughService(c *client.Client, name string, dry bool) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := c.Reload(ctx, name, dry)
	if err != nil {
		return fail(err)
	}
	printPlan(name, "its file", dry, res.Changes, res.Notes)
	return 0
}

// printPlan prints what a reload changed (or, dry, would change).
func printPlan(name, file string, dry bool, lines, notes []string) {
	switch {
	case len(lines) == 0:
		fmt.Printf("%s: no change (the running tunnel matches %s)\n", name, file)
	case dry:
		fmt.Printf("%s: reload would make %d change(s):\n", name, len(lines))
	default:
		fmt.Printf("%s: reloaded from %s, %d change(s):\n", name, file, len(lines))
	}
	for _, l := range lines {
		fmt.Printf("  %s\n", l)
	}
	for _, n := range notes {
		fmt.Fprintf(os.Stderr, "Note: %s\n", n)
	}
}
