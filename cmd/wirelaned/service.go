package main

// `wirelaned` without an interface name runs the service: the API of
// docs/api.md on its unix socket, in front of the machine's tunnels
// (internal/service/host): the files of /etc/wireguard and /etc/wirelane,
// brought up and down through the tunnel library. Each WireGuard tunnel's
// device runs in its own daemon process (this binary, `wirelaned IFNAME`),
// which outlives the service; a restarted service finds them again.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/service/host"
	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

const serviceUsage = `Usage: %[1]s [--socket PATH] [--metrics-address HOST:PORT] [--group NAME]
       [--wireguard-dir DIR] [--wirelane-dir DIR]

Without an interface name, runs the Wirelane service in the foreground: the
local API (docs/api.md) on the unix socket, Prometheus metrics at /metrics
there and, with --metrics-address, on a TCP address. It owns the tunnels of
the wg-quick files in --wireguard-dir (NAME.conf), the gateway files in
--wirelane-dir (NAME.toml) and the OpenVPN files in its openvpn-client and
openvpn-server directories (NAME.ovpn), and brings them up and down on
request. It stops on SIGTERM or SIGINT, leaving the WireGuard tunnels up
(their daemons run on; a restarted service finds them). SIGHUP reloads
every tunnel that is up from its file, in place ("systemctl reload
wirelaned"; see wirelane reload).

`

// serviceFlags are the flags only the service has.
var serviceFlags = []string{"--socket", "--metrics-address", "--group", "--wireguard-dir", "--wirelane-dir"}

// isServiceCall reports whether args ask for the service: none, or the
// service's own flags (the daemon always has an interface name, and the
// detached copy it starts is given it too).
func isServiceCall(args []string) bool {
	if len(args) == 0 {
		return true
	}
	for _, f := range serviceFlags {
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
	def := host.DefaultDirs()
	wgDir := fs.String("wireguard-dir", def.WireGuard, "the wg-quick files (NAME.conf)")
	wlDir := fs.String("wirelane-dir", def.Gateways, "the gateway files (NAME.toml) and the openvpn-client and openvpn-server directories (NAME.ovpn)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n", prog, fs.Arg(0))
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// The OpenVPN tunnels run in this process: it carries their packets
	// with the threads a data path gets (internal/sys/procs), as
	// `wirelane ovpn serve|connect` would.
	procs.Apply().LogThreads(log)
	noFW, err := wgtunnel.FirewallFromEnv()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 2
	}
	// The daemons are this binary (`wirelaned IFNAME`), unless
	// WIRELANE_DAEMON names another implementation.
	eng := &wgtunnel.Daemon{Prog: prog, Stderr: stderr}
	if os.Getenv(wgtunnel.DaemonEnv) == "" {
		if exe, err := os.Executable(); err == nil {
			eng.Exec = exe
		}
	}
	h := host.New(host.Config{
		Dirs: host.Dirs{
			WireGuard:      *wgDir,
			Gateways:       *wlDir,
			OpenVPNClients: filepath.Join(*wlDir, "openvpn-client"),
			OpenVPNServers: filepath.Join(*wlDir, "openvpn-server"),
		},
		Engine:     eng,
		NoFirewall: noFW,
		Logger:     log,
	})
	defer eng.Close()
	defer h.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go reloadOnHangup(ctx, h, log)
	s := service.New(h, service.Config{Socket: *socket, MetricsAddr: *metrics, Group: *group, Logger: log})
	if err := s.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}

// reloadOnHangup reloads every tunnel that is up on each SIGHUP until ctx
// is done (systemctl reload wirelaned), logging what changed and what
// failed (a failed tunnel is left as it was).
func reloadOnHangup(ctx context.Context, h *host.Host, log *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		log.Info("SIGHUP: reloading the tunnels that are up")
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		res, err := h.ReloadAll(rctx)
		cancel()
		for _, r := range res {
			for _, c := range r.Changes {
				log.Info("reloaded", "tunnel", r.Tunnel, "change", c)
			}
			if len(r.Changes) == 0 {
				log.Info("reloaded: no change", "tunnel", r.Tunnel)
			}
		}
		if err != nil {
			log.Warn("reload failed (the tunnel is as it was)", "err", err)
		}
	}
}
