// Command wirelaned is Wirelane's userspace WireGuard daemon, a drop-in for
// wireguard-go as wg-quick's WG_QUICK_USERSPACE_IMPLEMENTATION:
//
//	wirelaned [-f|--foreground] INTERFACE-NAME
//
// It creates the TUN interface and /var/run/wireguard/INTERFACE-NAME.sock,
// returns once both are ready and keeps running in the background until the
// interface is deleted, the socket is removed, or it gets SIGTERM/SIGINT.
// Configure it with wg(8). `wirelane daemon` runs the same code.
//
// Without an interface name it runs the Wirelane service instead
// (service.go, docs/api.md):
//
//	wirelaned [--socket PATH] [--metrics-address HOST:PORT] [--group NAME]
//	          [--wireguard-dir DIR] [--wirelane-dir DIR]
package main

import (
	"os"

	"github.com/wirelane/wirelane/internal/control/daemon"
)

func main() {
	if isServiceCall(os.Args[1:]) {
		os.Exit(runService("wirelaned", os.Args[1:], os.Stderr))
	}
	os.Exit(daemon.Main(os.Args[1:]))
}
