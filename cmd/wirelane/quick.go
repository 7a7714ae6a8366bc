package main

// wg-quick's commands: up, down, strip and save parse their argument and
// hand the file to the tunnel library (internal/tunnel/wgtunnel), which
// does the work and its undo; this file only prints.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/control/service/client"
	"github.com/wirelane/wirelane/internal/tunnel/interrupt"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

const quickFileHelp = `CONFIG_FILE is a wg-quick file; an argument that is a valid interface name
(1-15 of [a-zA-Z0-9_=+.-]) means /etc/wireguard/INTERFACE.conf, and a path
names the interface after its base name (wg0.conf -> wg0).`

const upHelp = `Creates the interface: starts the userspace daemon, applies the keys and
peers, then Address, MTU, DNS, Table, routes for AllowedIPs (policy routing
and an nftables anti-spoofing firewall for a default route) and the
PreUp/PostUp hooks (%i = interface name).
If any step fails, or on Ctrl-C (or SIGTERM, SIGHUP, SIGPIPE), everything
done so far is undone.

` + quickFileHelp + `

` + quickServiceHelp + `

Environment: WIRELANE_DAEMON=PATH runs "PATH IFNAME" instead of the
built-in daemon (any userspace implementation with the wireguard-go
command line, such as wirelaned). WIRELANE_FIREWALL=off brings a default
route up without the nftables firewall (for kernels without nftables;
hosts on your other networks can then reach the tunnel's addresses).`

const downHelp = `Runs PreDown, writes the configuration back if SaveConfig is true, removes
the interface, its policy rules, nftables tables and DNS, then runs
PostDown. A save that could lose what the file holds (see save) is
refused, and down with it: the tunnel stays up. If the daemon is no longer
running (it crashed or was killed), removes what it left behind
(interface, stale socket, policy rules, nftables tables, DNS), runs
PostDown but not PreDown, and saves nothing.

` + quickFileHelp + `

` + quickServiceHelp

const quickServiceHelp = `When the Wirelane service runs (wirelaned(8); its socket answers you) and
has a tunnel called INTERFACE, the service does it, so that every client
sees the change; members of the group wirelane may then do it without
root; credentials an OpenVPN tunnel asks for are typed here, as "wirelane
ovpn connect" asks for them. WIRELANE_SOCKET=PATH names another socket,
WIRELANE_SOCKET=off skips the service.`

const stripHelp = `Prints the file without the keys only wg-quick understands (Address, DNS,
MTU, Table, hooks, SaveConfig), in a form 'wg setconf' accepts.

` + quickFileHelp

const saveHelp = `Writes the running interface's configuration (keys, peers, endpoints,
addresses) back to its file, keeping the file's DNS, Table and hooks. The
file is replaced atomically, keeps its mode and owner, and its previous
contents are kept in NAME.conf.bak. A state that could lose what the
file holds is not saved, and the file keeps its contents: an interface
without a private key, a daemon that is not the one up configured (it
restarted, was started by something else, or up did not finish; up
records its daemon in /run/wirelane/wg/NAME.json), or an interface
without addresses while the file has some. --force saves such a state
anyway and counts the daemon as the one up configured from then on (for
a tunnel that wg-quick or an older wirelane brought up, so that down
saves it too).

` + quickFileHelp

// logCmd prints a "[#] ..." line, as wg-quick does for every change.
func logCmd(s string) { fmt.Fprintf(os.Stderr, "[#] %s\n", s) }

func loadConfig(name string, args []string) (*wgquick.Config, int) {
	return loadConfigFlags(flag.NewFlagSet(name, flag.ContinueOnError), name, args)
}

// loadConfigFlags is loadConfig for a command with flags of its own (fs).
func loadConfigFlags(fs *flag.FlagSet, name string, args []string) (*wgquick.Config, int) {
	rest, st := parseFlags(fs, name, args, 1, 1)
	if st >= 0 {
		return nil, st
	}
	if name != "strip" && os.Geteuid() != 0 {
		return nil, fail(fmt.Errorf("%s needs root: it changes interfaces, routes and rules (try: sudo %s %s %s)", name, prog, name, rest[0]))
	}
	cfg, err := wgquick.LoadFile(rest[0])
	if err != nil {
		return nil, fail(err)
	}
	if wgquick.WorldAccessible(cfg.Path) {
		fmt.Fprintf(os.Stderr, "Warning: `%s' is world accessible\n", cfg.Path)
	}
	return cfg, -1
}

// signalContext is done when an interrupt arrives (interrupt.Signals:
// SIGINT, SIGTERM, SIGHUP, SIGPIPE); up, gateway up and demo then undo
// what they did.
func signalContext() (context.Context, context.CancelFunc) {
	return interrupt.NotifyContext(context.Background())
}

func cmdUp(args []string) int {
	if st, done := throughService("up", args); done {
		return st
	}
	cfg, st := loadConfig("up", args)
	if st >= 0 {
		return st
	}
	ctx, stop := signalContext()
	defer stop()
	if err := upTunnel(ctx, cfg); err != nil {
		return failCtx(ctx, "up", err)
	}
	return 0
}

func cmdDown(args []string) int {
	if st, done := throughService("down", args); done {
		return st
	}
	cfg, st := loadConfig("down", args)
	if st >= 0 {
		return st
	}
	if err := downTunnel(cfg); err != nil {
		return fail(err)
	}
	return 0
}

func cmdStrip(args []string) int {
	cfg, st := loadConfig("strip", args)
	if st >= 0 {
		return st
	}
	os.Stdout.Write(cfg.Strip())
	return 0
}

func cmdSave(args []string) int {
	fs := flag.NewFlagSet("save", flag.ContinueOnError)
	force := fs.Bool("force", false, "save even a daemon up did not configure, or an interface without addresses, and count it as configured from now on (never a state without a private key)")
	cfg, st := loadConfigFlags(fs, "save", args)
	if st >= 0 {
		return st
	}
	o, done := tunnelOptions()
	defer done()
	save := wgtunnel.Save
	if *force {
		save = wgtunnel.SaveAnyway
	}
	if err := save(cfg, o); err != nil {
		if errors.Is(err, wgtunnel.ErrNotConfiguredByUp) || errors.Is(err, wgtunnel.ErrNoAddresses) {
			err = fmt.Errorf("%w; if what runs is right (see: wg showconf %s), save it with: %s save --force %s", err, cfg.Name, prog, cfg.Path)
		}
		return fail(err)
	}
	return 0
}

// throughService runs up or down NAME through the Wirelane service when
// it runs, answers this user and has a tunnel of that name, so that every
// client of the service sees the change (and a member of the group
// wirelane may do it without root). done is false when the command is to
// run here instead.
func throughService(verb string, args []string) (status int, done bool) {
	rest, st := parseFlags(flag.NewFlagSet(verb, flag.ContinueOnError), verb, args, 1, 1)
	if st >= 0 {
		return st, true
	}
	if !isTunnelName(rest[0]) {
		return 0, false
	}
	c, ts := serviceClient()
	if c == nil {
		return 0, false
	}
	t, ok := findTunnel(ts, rest[0])
	if !ok {
		return 0, false
	}
	ctx, stop := signalContext()
	defer stop()
	logCmd(fmt.Sprintf("%s %s through the Wirelane service (%s)", verb, rest[0], serviceSocket()))
	if verb == "up" && t.Kind == service.KindOpenVPNClient {
		// Its file may ask for credentials: answer the service's auth
		// event on this terminal.
		if evs, err := c.Events(ctx); err == nil {
			defer evs.Close()
			go answerAuth(ctx, c, evs, t.Name)
		}
	}
	op := c.Down
	if verb == "up" {
		op = c.Up
	}
	if _, err := op(ctx, rest[0]); err != nil {
		return fail(err), true
	}
	return 0, true
}

// answerAuth answers the auth events of tunnel name from the terminal,
// as `wirelane ovpn connect` asks.
func answerAuth(ctx context.Context, c *client.Client, evs *client.Events, name string) {
	for evs.Next() {
		e := evs.Event()
		if e.Type != service.EventAuth || e.Tunnel != name || e.Auth == nil {
			continue
		}
		user, pass, resp, err := ovpntunnel.PromptCredentials(authRequest(e.Auth))
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %s asks for credentials, which cannot be typed here (%v); a client of the service may answer\n", prog, name, err)
			continue
		}
		if err := c.Answer(ctx, name, service.AuthAnswer{Username: user, Password: pass, Response: resp}); err != nil {
			fmt.Fprintf(os.Stderr, "%s: answering %s's credential request: %v\n", prog, name, err)
		}
	}
}

// tunnelOptions prints what the tunnel library reports as wg-quick does:
// "[#] " before every change, "Warning: " before warnings. The engine
// starts daemons (wgtunnel.Daemon); done releases it.
func tunnelOptions() (o wgtunnel.Options, done func()) {
	eng := &wgtunnel.Daemon{Log: logCmd, Prog: prog}
	return wgtunnel.Options{
		Engine: eng,
		Log:    logCmd,
		Warn:   func(s string) { fmt.Fprintf(os.Stderr, "Warning: %s\n", s) },
		Note:   func(s string) { fmt.Fprintf(os.Stderr, "%s: %s\n", prog, s) },
	}, func() { eng.Close() }
}

// downTunnel takes cfg's tunnel down.
func downTunnel(cfg *wgquick.Config) error {
	o, done := tunnelOptions()
	defer done()
	return wgtunnel.Down(cfg, o)
}

// upTunnel brings cfg up with the firewall choice of WIRELANE_FIREWALL.
func upTunnel(ctx context.Context, cfg *wgquick.Config) error {
	o, done := tunnelOptions()
	defer done()
	noFW, err := wgtunnel.FirewallFromEnv()
	if err != nil {
		return err
	}
	o.NoFirewall = noFW
	return wgtunnel.Up(ctx, cfg, o)
}
