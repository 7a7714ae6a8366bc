// Command wirelaned is Wirelane's userspace WireGuard daemon, a drop-in for
// wireguard-go as wg-quick's WG_QUICK_USERSPACE_IMPLEMENTATION:
//
//	wirelaned [-f|--foreground] [--ref-mode] INTERFACE-NAME
//
// It creates the TUN interface and /var/run/wireguard/INTERFACE-NAME.sock,
// returns once both are ready and keeps running in the background until the
// interface is deleted, the socket is removed, or it gets SIGTERM/SIGINT.
// Configure it with wg(8). `wirelane daemon` runs the same code.
package main

import (
	"os"

	"github.com/wirelane/wirelane/internal/control/daemon"
)

func main() {
	os.Exit(daemon.Main(os.Args[1:]))
}
