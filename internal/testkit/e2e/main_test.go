// Package e2e holds Wirelane's end-to-end tests: real daemons (wirelaned
// and the reference wireguard-go), configured with the real wg(8) and
// wg-quick(8), carrying ping and iperf3 traffic between network namespaces.
// They need root; without it every test skips.
//
// The topology is the one of the kernel's WireGuard self-test: each daemon
// starts in a private "namespace 0" that holds only lo, so its UDP sockets
// live there and the endpoints are 127.0.0.1 / [::1]; its interface is then
// moved into namespace 1 or 2, where the tunnel addresses live:
//
//	ns1: A 192.168.241.1 fd00::1     ns2: B 192.168.241.2 fd00::2
//	        \                            /
//	         ns0: A's socket :P1, B's socket :P2 on lo
//
// TestMain builds wirelaned, the wirelane CLI and wireguard-go (at the
// version go.mod pins) once into a temporary directory.
//
// Run as root: go test ./internal/testkit/e2e/ (about a minute). With -reference
// the Wirelane-pair tests run wireguard-go on both sides instead, which
// checks the harness itself: go test ./internal/testkit/e2e/ -args -reference.
package e2e

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// reference makes the Wirelane-pair tests run wireguard-go on both sides,
// to check the harness itself against a known-good implementation.
var reference = flag.Bool("reference", false, "run the two-daemon tests with wireguard-go on both sides (harness check)")

// Binaries built by TestMain; buildErr holds why one is missing.
var (
	binDir   string
	buildErr = map[string]error{}
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Geteuid() != 0 || os.Getenv("FLEET_WRITER") != "" {
		// Every test skips with its own message (or this is the helper
		// process of TestFleetScale): do not build anything.
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "wirelane-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binDir = dir
	for name, b := range map[string]struct{ pkg, tags string }{
		"wirelaned":     {pkg: "github.com/wirelane/wirelane/cmd/wirelaned"},
		"wireguard-go":  {pkg: "golang.zx2c4.com/wireguard"},
		"wirelane":      {pkg: "github.com/wirelane/wirelane/cmd/wirelane"},
		"wirelane-tray": {pkg: "github.com/wirelane/wirelane/cmd/wirelane-tray"},
		// The daemon whose devices take the conventional locked send path
		// (internal/sys/refmode): a build, not a flag of the product.
		"wirelaned-ref": {pkg: "github.com/wirelane/wirelane/cmd/wirelaned", tags: "wirelane_refmode"},
		// The daemon whose protocol timers WIRELANE_SOAK_REKEY shortens,
		// for the rekey soak: a test build, never a release
		// (TestSoakBuildIsNotTheRelease).
		"wirelaned-soak": {pkg: "github.com/wirelane/wirelane/cmd/wirelaned", tags: "wirelane_soaktimers"},
	} {
		args := []string{"build", "-o", filepath.Join(dir, name)}
		if b.tags != "" {
			args = append(args, "-tags", b.tags)
		}
		out, err := exec.Command("go", append(args, b.pkg)...).CombinedOutput()
		if err != nil {
			buildErr[name] = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	return m.Run()
}
