package main

// `wirelane gateway`: a site-to-site gateway described in TOML
// (internal/tunnel/gateway). The file is turned into the same wg-quick model that
// `up` and `down` use, and then handed to them, so a gateway comes up and
// goes down exactly like a wg-quick tunnel, with the same roll-back:
//
//	check: parse -> read key files -> print the summary
//	show:  parse -> read key files if possible -> print the summary
//	up:    parse -> read key files -> gateway.Config -> wgtunnel.Up
//	down:  parse (or a bare interface name) -> gateway.Config -> wgtunnel.Down
//	reload: parse -> read key files -> gateway.Config -> wgtunnel.Reload

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

const gatewayHelp = `Subcommands:
  check FILE    validate the file and its key files, print a summary
  show FILE     print the gateway and its sites (never private or
                preshared keys)
  up FILE       create the interface, configure every site as a peer,
                add addresses and a route for every site network; on
                failure or Ctrl-C everything done so far is undone
  down FILE     remove the interface and what up added
  reload FILE   change the running gateway to match the file, in place
                (sites added and removed, networks moved; the sessions of
                unchanged sites stay); see 'wirelane reload'

FILE is a gateway TOML file ([interface] and one [[site]] per remote site;
see docs/gateway.md). A gateway with a [fleet] table joins a fleet of
gateways on etcd: up then stays in the foreground, publishing this site
and keeping the peers in step with the fleet, until interrupted (it then
leaves the fleet and goes down; reload FILE, or SIGHUP, has it read the
file again in place, the fleet's peers kept); through the service, the
service runs that agent; show lists the fleet's sites and states. An argument that is a valid interface name and does
not end in .toml means /etc/wirelane/NAME.toml; down also accepts the name
of a running gateway whose file is gone (its hooks are then not run).
Problems in the file are reported as FILE:LINE:COL: what is wrong.

When the Wirelane service runs, answers this user and has a gateway of
that NAME, up NAME and down NAME go through it (a member of the group
wirelane may then run them without root); WIRELANE_SOCKET=off skips the
service.`

func cmdGateway(args []string) int {
	rest, st := parseFlags(flag.NewFlagSet("gateway", flag.ContinueOnError), "gateway", args, 2, 2)
	if st >= 0 {
		return st
	}
	sub, arg := rest[0], rest[1]
	switch sub {
	case "check", "show", "up", "down":
	case "reload":
		return reloadGateway(arg, false)
	default:
		return usageError("gateway", fmt.Errorf("unknown subcommand %q (want check, show, up, down or reload)", sub))
	}
	if sub == "up" || sub == "down" {
		if st, done := gatewayThroughService(sub, arg); done {
			return st
		}
	}
	if (sub == "up" || sub == "down") && os.Geteuid() != 0 {
		return fail(fmt.Errorf("gateway %s needs root: it changes interfaces, routes and rules (try: sudo %s gateway %s %s)", sub, prog, sub, arg))
	}
	path, isName := gateway.Resolve(arg)
	g, err := gateway.LoadFile(path)
	if err != nil {
		if sub == "down" && isName && errors.Is(err, fs.ErrNotExist) {
			return gatewayDownByName(arg, path)
		}
		return fail(err)
	}
	switch sub {
	case "check":
		if err := loadGatewayKeys(g); err != nil {
			return fail(err)
		}
		if err := checkFleetTLS(g); err != nil {
			return fail(err)
		}
		fmt.Print(g.Summary())
		if g.Fleet != nil {
			fmt.Printf("%s: OK (%d static site(s), the others from fleet %s)\n", g.Path, len(g.Sites), g.Fleet.Prefix)
			return 0
		}
		fmt.Printf("%s: OK (%d site(s))\n", g.Path, len(g.Sites))
		return 0
	case "show":
		if err := loadGatewayKeys(g); err != nil {
			// The summary is still useful; only the public key is missing.
			fmt.Fprintf(os.Stderr, "Note: %v\n", err)
		}
		fmt.Print(g.Summary())
		if g.Fleet != nil {
			printFleet(g)
		}
		return 0
	case "up":
		if err := loadGatewayKeys(g); err != nil {
			return fail(err)
		}
		if g.Fleet != nil {
			return gatewayFleetUp(g)
		}
		ctx, stop := signalContext()
		defer stop()
		if err := upTunnel(ctx, g.Config()); err != nil {
			return failCtx(ctx, "gateway", err)
		}
		return 0
	default: // down
		if err := downTunnel(g.Config()); err != nil {
			return fail(err)
		}
		return 0
	}
}

// loadGatewayKeys reads the gateway's key files, printing their warnings,
// and warns when the gateway file itself holds a key others can read.
func loadGatewayKeys(g *gateway.Gateway) error {
	warnings, err := g.LoadKeys()
	for _, w := range warnings {
		fmt.Fprintln(os.Stderr, w)
	}
	if err != nil {
		return err
	}
	inline := g.PrivateKeyFile == "" && g.PrivateKey != nil
	for _, s := range g.Sites {
		inline = inline || s.PresharedKeyFile == "" && s.PresharedKey != nil
	}
	if inline && wgquick.WorldAccessible(g.Path) {
		fmt.Fprintf(os.Stderr, "Warning: `%s' holds a key and is world accessible\n", g.Path)
	}
	return nil
}

// gatewayDownByName takes down a running gateway whose file is gone: the
// interface, its socket and (for a default route) its policy rules. With
// no file its pre_down and post_down hooks are unknown, so none run.
func gatewayDownByName(name, path string) int {
	// Without a file, only an interface that has a WireGuard socket is
	// taken down: a typo must not delete an unrelated link (eth0).
	if !wgtunnel.HasSocket(name) {
		return fail(fmt.Errorf("`%s' does not exist, and %s is not a WireGuard interface (no %s)", path, name, uapi.SocketPath(name)))
	}
	fmt.Fprintf(os.Stderr, "Note: `%s' does not exist; removing interface %s without running hooks\n", path, name)
	if err := downTunnel(&wgquick.Config{Name: name, Path: path}); err != nil {
		return fail(err)
	}
	return 0
}
