package wgtunnel_test

import (
	"context"
	"fmt"
	"os"

	"github.com/wirelane/wirelane/internal/tunnel/interrupt"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

// Bringing a tunnel up as `wirelane up wg0` does: the file, a daemon per
// interface, "[#]" lines on stderr, and an undo on any interrupt.
func ExampleUp() {
	cfg, err := wgquick.LoadFile("wg0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return
	}
	logf := func(s string) { fmt.Fprintf(os.Stderr, "[#] %s\n", s) }
	o := wgtunnel.Options{
		Engine: &wgtunnel.Daemon{Log: logf, Prog: "wirelane"},
		Log:    logf,
		Warn:   func(s string) { fmt.Fprintf(os.Stderr, "Warning: %s\n", s) },
	}
	ctx, stop := interrupt.NotifyContext(context.Background())
	defer stop()
	if err := wgtunnel.Up(ctx, cfg, o); err != nil {
		fmt.Fprintln(os.Stderr, err) // nothing of the tunnel is left
		return
	}
	st, _ := wgtunnel.Status(cfg.Name, o)
	fmt.Println(st.Name, "up:", st.Up)
}
