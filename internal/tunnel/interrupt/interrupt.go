// Package interrupt names the signals that make a command holding a
// tunnel stop and undo what it did, so that `wirelane up`, `gateway up`,
// the demo and `ovpn connect|serve` all stop the same way.
package interrupt

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Signals are Ctrl-C (SIGINT), kill (SIGTERM), a closed terminal (SIGHUP)
// and a closed pipe on the command's output (SIGPIPE). Left to their
// default action, the last two would kill the process half way and leave
// a tunnel half up (or its routes and DNS behind); caught, a write to the
// closed pipe fails with EPIPE and the undo runs. SIGHUP stays a stop
// for these foreground commands (not OpenVPN's restart, nor a reload):
// a terminal that goes away must not leave a tunnel behind; a running
// tunnel reloads through `wirelane reload` (the service, wirelaned,
// reloads its tunnels on SIGHUP instead).
var Signals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE}

// NotifyContext returns a copy of parent that is done when one of Signals
// arrives; stop restores the signals' default behaviour.
func NotifyContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, Signals...)
}
