package ovpntunnel

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/procs"
)

// TestVerboseLogsPlan: with -v, `ovpn serve` and `ovpn connect` log the
// data path's threads first (one Info line), even when the file is bad.
func TestVerboseLogsPlan(t *testing.T) {
	buf := capture(t)
	missing := filepath.Join(t.TempDir(), "missing.ovpn")
	if code := Serve(ServeOptions{File: missing, Verbose: true}); code == 0 {
		t.Fatal("Serve of a missing file succeeded")
	}
	if code := Connect(ConnectOptions{File: missing, Verbose: true}); code == 0 {
		t.Fatal("Connect of a missing file succeeded")
	}
	p := procs.Current()
	want := fmt.Sprintf(`msg="data path plan" cpus=%d gomaxprocs=%d why=`, p.CPUs, p.GOMAXPROCS)
	if n := strings.Count(buf.String(), want); n != 2 {
		t.Errorf("%d plan lines %q in:\n%s", n, want, buf.String())
	}
}
