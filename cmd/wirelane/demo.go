package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/tools/demo"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

const demoHelp = `Builds a WireGuard tunnel between two fresh network namespaces with freshly
generated keys, shows the handshake, pings across, measures TCP throughput
and removes everything again (also on Ctrl-C or failure). Needs root and a
Linux kernel with TUN support; nothing else.

The daemons and their UDP sockets stay in the host namespace on 127.0.0.1;
only the two TUN interfaces move into the namespaces, so the only path
between the namespaces is the tunnel and the host's own interfaces are not
touched.`

func cmdDemo(args []string) int {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	dur := fs.Duration("duration", 5*time.Second, "length of the throughput test (0 skips it)")
	mtu := fs.Int("mtu", 1420, "MTU of the tunnel interfaces")
	keep := fs.Bool("keep", false, "leave the namespaces and tunnel running for inspection")
	if _, st := parseFlags(fs, "demo", args, 0, 0); st >= 0 {
		return st
	}
	if *mtu < 576 || *mtu > 65535 {
		return usageError("demo", fmt.Errorf("--mtu %d: want 576 to 65535", *mtu))
	}
	if *dur < 0 {
		return usageError("demo", fmt.Errorf("--duration %v: must not be negative", *dur))
	}
	ctx, stop := signalContext()
	defer stop()
	_, ttyErr := unix.IoctlGetTermios(int(os.Stdout.Fd()), unix.TCGETS)
	eng := &wgtunnel.Daemon{Prog: prog} // logs nothing: the demo tells its own story
	defer eng.Close()
	_, err := demo.Run(ctx, demo.Options{
		Duration: *dur,
		MTU:      *mtu,
		Keep:     *keep,
		Out:      os.Stdout,
		Progress: ttyErr == nil,
		Engine:   eng,
	})
	if err != nil {
		return failCtx(ctx, "demo", err)
	}
	return 0
}
