package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
)

const ovpnHelp = `
Subcommands:
  connect [flags] FILE.ovpn   join an OpenVPN 2.6 server as a client: brings up a
                              TUN with the pushed address and routes, shows each
                              connection step, reconnects when the server goes
                              away (as openvpn does), tears down on Ctrl-C
  serve [flags] CONFIG        run an OpenVPN server that OpenVPN 2.6 clients join
  genkey [flags] TYPE [FILE]  write a new tls-crypt-v2 server or client key, or
                              a tls-crypt key, as 'openvpn --genkey' does

Run 'wirelane ovpn SUBCOMMAND --help' for its flags.
docs/openvpn.md lists the supported directives.`

// ovpnUsage prints the ovpn command's usage.
func ovpnUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s ovpn connect|serve|genkey [flags] ARGS\n%s\n", prog, ovpnHelp)
}

// cmdOvpn dispatches `wirelane ovpn connect|serve`: their flags are
// parsed here, and the tunnel is run by internal/tunnel/ovpntunnel. Both
// run their data path in this process, so they choose its threads as the
// WireGuard daemon does (internal/sys/procs).
func cmdOvpn(args []string) int {
	if len(args) == 0 {
		ovpnUsage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "connect":
		return ovpnConnect(args[1:])
	case "serve":
		return ovpnServe(args[1:])
	case "genkey":
		return ovpnGenkey(args[1:])
	}
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "help" {
			ovpnUsage(os.Stdout)
			return 0
		}
	}
	fmt.Fprintf(os.Stderr, "%s ovpn: unknown subcommand %q\n", prog, args[0])
	ovpnUsage(os.Stderr)
	return 2
}

const ovpnConnectUsage = `Usage: wirelane ovpn connect [flags] FILE.ovpn

Connects to the OpenVPN server of a client configuration file, brings up a
TUN device with the pushed address and routes, gives the pushed DNS
servers and search domains to systemd-resolved or resolvconf(8) (with
neither, it fails rather than let lookups go around the tunnel; --dns=off
connects without them), and keeps the tunnel up until Ctrl-C. Needs root
(CAP_NET_ADMIN).

Each step is shown on stderr with its time: resolving, connecting, TLS
handshake, authenticating, pushed options, device, routes, connected. The
remotes are tried in turn and again as the file's resolv-retry,
connect-retry, connect-retry-max and server-poll-timeout say (openvpn's
defaults: retry forever). Credentials that auth-user-pass needs and the file
does not hold come from --auth-file or are asked for on the terminal, as is a
static-challenge response. Directives that are ignored are summarised once;
-v lists each with its line. 'wirelane reload FILE.ovpn' applies a changed
file's DNS lines at once and the rest at the next reconnect; SIGHUP stops
the tunnel, as Ctrl-C does.

When the Wirelane service runs, answers this user and has an OpenVPN client
tunnel of that name, 'wirelane ovpn connect NAME' has the service bring it
up, prints its state changes and answers its credential prompts on the
terminal, and takes it down on Ctrl-C (no flags then: the service runs it
with its own settings). WIRELANE_SOCKET=off skips the service.`

const ovpnServeUsage = `Usage: wirelane ovpn serve [flags] CONFIG

Runs an OpenVPN 2.6 server from an OpenVPN-style server configuration
(port, proto, server NET MASK, ca/cert/key, tls-auth or tls-crypt,
data-ciphers, push "route ...", keepalive, client-to-client,
client-config-dir). Creates the TUN device with the server's tunnel
address and serves until Ctrl-C. Needs root (CAP_NET_ADMIN). 'wirelane
reload CONFIG' (or the interface) applies a changed file in place: a new
CRL disconnects the clients it revokes, routes and iroutes change at once,
push lines and ciphers apply to new sessions, connected clients keep their
sessions. SIGHUP stops the server, as Ctrl-C does.

When the Wirelane service runs, answers this user and has an OpenVPN server
tunnel of that name, 'wirelane ovpn serve NAME' has the service bring it up
and takes it down on Ctrl-C. WIRELANE_SOCKET=off skips the service.`

// devUsage documents --dev of both subcommands.
const devUsage = "TUN interface name (default: the file's dev, tun means the kernel picks tunN)"

// ovpnConnectFlags returns the flag set of `ovpn connect`, filling o (and
// dns, the --dns text) as it parses.
func ovpnConnectFlags() (fs *flag.FlagSet, o *ovpntunnel.ConnectOptions, dns *string) {
	fs = flag.NewFlagSet("wirelane ovpn connect", flag.ContinueOnError)
	o = &ovpntunnel.ConnectOptions{}
	fs.StringVar(&o.Dev, "dev", "", devUsage)
	fs.IntVar(&o.MTU, "mtu", 0, "TUN MTU, 576 to 65535 (default: a tun-mtu the server pushes, else the file's tun-mtu, else 1500)")
	fs.StringVar(&o.AuthFile, "auth-file", "", "`file` with the username and password lines for auth-user-pass (a username line alone: the password is asked for; default: ask on the terminal)")
	fs.BoolVar(&o.NoRoutes, "no-routes", false, "do not install pushed routes (addresses only)")
	fs.BoolVar(&o.BlockIPv6, "block-ipv6", false, "answer IPv6 packets into the tunnel with ICMPv6 no-route instead of sending them (as the block-ipv6 directive; with redirect-gateway, global IPv6 is routed into the tunnel)")
	dns = fs.String("dns", "auto", "pushed DNS servers: auto (through systemd-resolved or resolvconf; with neither, connect fails) or off (not applied)")
	fs.BoolVar(&o.Verbose, "v", false, "log protocol details and each ignored directive to stderr")
	return fs, o, dns
}

// ovpnServeFlags returns the flag set of `ovpn serve`, filling o.
func ovpnServeFlags() (fs *flag.FlagSet, o *ovpntunnel.ServeOptions) {
	fs = flag.NewFlagSet("wirelane ovpn serve", flag.ContinueOnError)
	o = &ovpntunnel.ServeOptions{}
	fs.StringVar(&o.Dev, "dev", "", devUsage)
	fs.BoolVar(&o.Verbose, "v", false, "log protocol details to stderr")
	return fs, o
}

// ovpnConnect parses `wirelane ovpn connect`'s flags and runs the client.
func ovpnConnect(args []string) int {
	fs, o, dns := ovpnConnectFlags()
	file, code, ok := ovpnArgs(fs, ovpnConnectUsage, args)
	if !ok {
		return code
	}
	if st, done := ovpnThroughService("connect", file, flagsSet(fs)); done {
		return st
	}
	o.File = file
	if o.MTU != 0 && (o.MTU < 576 || o.MTU > 65535) {
		fmt.Fprintf(os.Stderr, "wirelane ovpn connect: --mtu %d out of range 576..65535\n", o.MTU)
		return 2
	}
	var err error
	if o.DNS, err = ovpntunnel.ParseDNSMode(*dns); err != nil {
		fmt.Fprintf(os.Stderr, "wirelane ovpn connect: %v\n", err)
		return 2
	}
	procs.Apply()
	if err := procs.EnvError(); err != nil {
		fmt.Fprintf(os.Stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	return ovpntunnel.Connect(*o)
}

// ovpnServe parses `wirelane ovpn serve`'s flags and runs the server.
func ovpnServe(args []string) int {
	fs, o := ovpnServeFlags()
	file, code, ok := ovpnArgs(fs, ovpnServeUsage, args)
	if !ok {
		return code
	}
	if st, done := ovpnThroughService("serve", file, flagsSet(fs)); done {
		return st
	}
	o.File = file
	procs.Apply()
	if err := procs.EnvError(); err != nil {
		fmt.Fprintf(os.Stderr, "wirelane ovpn serve: %v\n", err)
		return 1
	}
	return ovpntunnel.Serve(*o)
}

// ovpnPrintUsage prints usage and the flags in the style of every
// wirelane command's --help: long flags with two dashes, one-letter ones
// with one.
func ovpnPrintUsage(w io.Writer, usage string, fs *flag.FlagSet) {
	fmt.Fprintln(w, usage)
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		kind, text := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if len(f.Name) == 1 {
			name = "-" + f.Name
		}
		if kind != "" {
			name += " " + strings.ToUpper(kind)
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" {
			text += " (default " + d + ")"
		}
		fmt.Fprintf(w, "  %s\n        %s\n", name, text)
	})
}

// ovpnArgs parses flags placed before or after the one positional
// argument. It returns the argument, or an exit status (0 after --help,
// which prints the usage on standard output).
func ovpnArgs(fs *flag.FlagSet, usage string, args []string) (string, int, bool) {
	fs.SetOutput(io.Discard) // errors and --help are printed below
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				ovpnPrintUsage(os.Stdout, usage, fs)
				return "", 0, false
			}
			fmt.Fprintf(os.Stderr, "%s: %v\n", fs.Name(), err)
			ovpnPrintUsage(os.Stderr, usage, fs)
			return "", 2, false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		fmt.Fprintf(os.Stderr, "%s: want exactly one file argument, got %d\n", fs.Name(), len(pos))
		ovpnPrintUsage(os.Stderr, usage, fs)
		return "", 2, false
	}
	return pos[0], 0, true
}
