package main

// `wirelaned` without an interface name runs the service: the API of
// docs/api.md on its unix socket. Until the tunnel library's Host is wired
// in, the service shows the WireGuard daemons already running (their UAPI
// sockets) and cannot start or stop tunnels itself.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"syscall"

	"github.com/wirelane/wirelane/internal/control/service"
)

const serviceUsage = `Usage: %[1]s [--socket PATH] [--metrics-address HOST:PORT] [--group NAME]

Without an interface name, runs the Wirelane service in the foreground: the
local API (docs/api.md) on the unix socket, Prometheus metrics at /metrics
there and, with --metrics-address, on a TCP address. For now it shows the
WireGuard daemons already running (wirelaned IFNAME, wireguard-go) through
their UAPI sockets, with their peers and counters; it does not start or stop
tunnels. It stops on SIGTERM or SIGINT.

`

// isServiceCall reports whether args ask for the service: none, or the
// service's own flags (the daemon always has an interface name, and the
// detached copy it starts is given it too).
func isServiceCall(args []string) bool {
	if len(args) == 0 {
		return true
	}
	for _, f := range []string{"--socket", "--metrics-address", "--group"} {
		if args[0] == f || strings.HasPrefix(args[0], f+"=") {
			return true
		}
	}
	return false
}

// runService runs the service until SIGTERM or SIGINT.
func runService(prog string, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet(prog, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, serviceUsage, prog); fs.PrintDefaults() }
	socket := fs.String("socket", service.DefaultSocket, "the API's unix socket")
	metrics := fs.String("metrics-address", "", "also serve /metrics on this TCP address (for example 127.0.0.1:9586)")
	group := fs.String("group", "wirelane", "the group whose members may list, watch and switch tunnels")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", prog, fs.Arg(0))
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	s := service.New(service.NewUAPIHost(""), service.Config{Socket: *socket, MetricsAddr: *metrics, Group: *group, Logger: log})
	if err := s.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}
