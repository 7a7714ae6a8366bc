package main

import (
	"io"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/procs"
)

// TestOVPNRefusesBadInlineEnv: `ovpn serve` and `ovpn connect` refuse a bad
// WIRELANE_INLINE_CRYPTO before anything else, naming the variable.
func TestOVPNRefusesBadInlineEnv(t *testing.T) {
	oldProcs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() {
		os.Unsetenv(procs.EnvInline)
		procs.Apply() // forget the complaint
		runtime.GOMAXPROCS(oldProcs)
	})
	t.Setenv("WIRELANE_SOCKET", "off")
	t.Setenv(procs.EnvInline, "lots")
	file := t.TempDir() + "/x.ovpn"
	for name, run := range map[string]func([]string) int{"serve": ovpnServe, "connect": ovpnConnect} {
		r, w, _ := os.Pipe()
		old := os.Stderr
		os.Stderr = w
		code := run([]string{file})
		os.Stderr = old
		w.Close()
		said, _ := io.ReadAll(r)
		if code != 1 || !strings.Contains(string(said), procs.EnvInline) {
			t.Errorf("ovpn %s with %s=lots: status %d, said %q", name, procs.EnvInline, code, said)
		}
	}
}
