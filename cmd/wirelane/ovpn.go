package main

import (
	"fmt"
	"io"
	"os"

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

Run 'wirelane ovpn connect --help' or 'wirelane ovpn serve --help' for flags.
docs/openvpn.md lists the supported directives.`

// ovpnUsage prints the ovpn command's usage.
func ovpnUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s ovpn connect|serve [flags] FILE\n%s\n", prog, ovpnHelp)
}

// cmdOvpn dispatches `wirelane ovpn connect|serve` to the OpenVPN front end.
// Both run their data path in this process, so they choose its threads
// as the WireGuard daemon does (internal/sys/procs).
func cmdOvpn(args []string) int {
	if len(args) == 0 {
		ovpnUsage(os.Stderr)
		return 2
	}
	switch args[0] {
	case "connect":
		procs.Apply()
		return ovpntunnel.Connect(args[1:])
	case "serve":
		procs.Apply()
		return ovpntunnel.Serve(args[1:])
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
