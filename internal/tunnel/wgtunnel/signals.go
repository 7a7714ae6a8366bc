package wgtunnel

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// Interrupts are the signals that make a command bringing a tunnel up
// stop and undo what it did: Ctrl-C (SIGINT), kill (SIGTERM), a closed
// terminal (SIGHUP) and a closed pipe on its output (SIGPIPE). Left to
// their default action, the last two would kill the process half way and
// leave a tunnel half up; caught, a write to the closed pipe fails with
// EPIPE and the undo runs.
var Interrupts = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE}

// NotifyContext returns a copy of parent that is done when one of
// Interrupts arrives, for Up's ctx; stop restores the signals' default
// behaviour.
func NotifyContext(parent context.Context) (ctx context.Context, stop context.CancelFunc) {
	return signal.NotifyContext(parent, Interrupts...)
}
