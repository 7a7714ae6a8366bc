package ovpntunnel

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/ovpn/client"
)

// TestMain lets the end-to-end test run Connect and Serve in another
// network namespace by re-executing this test binary.
func TestMain(m *testing.M) {
	if d := os.Getenv("WIRELANE_OVPNCLI_STATUS_DIR"); d != "" {
		StatusDir = d
	}
	helper := map[string]func([]string) int{"connect": helperConnect, "serve": helperServe}[os.Getenv("WIRELANE_OVPNCLI_HELPER")]
	if helper != nil {
		procs.Apply() // as `wirelane ovpn connect|serve` does
		// WIRELANE_OVPNCLI_CPUPROFILE=PREFIX writes PREFIX.connect and
		// PREFIX.serve CPU profiles (for the throughput comparison).
		if prefix := os.Getenv("WIRELANE_OVPNCLI_CPUPROFILE"); prefix != "" {
			if f, err := os.Create(prefix + "." + os.Getenv("WIRELANE_OVPNCLI_HELPER")); err == nil {
				pprof.StartCPUProfile(f)
				code := helper(os.Args[1:])
				pprof.StopCPUProfile()
				f.Close()
				os.Exit(code)
			}
		}
		os.Exit(helper(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// capture collects what Connect and Serve print (all of it on stderr)
// until the test ends.
func capture(t *testing.T) (errOut *bytes.Buffer) {
	errOut = &bytes.Buffer{}
	old := stderr
	stderr = errOut
	t.Cleanup(func() { stderr = old })
	return errOut
}

// helperConnect runs Connect with the flags the end-to-end tests give
// (cmd/wirelane parses the real command line; its tests cover the flags).
func helperConnect(args []string) int {
	o := ConnectOptions{}
	fs := flag.NewFlagSet("connect", flag.ContinueOnError)
	fs.StringVar(&o.Dev, "dev", "", "")
	fs.IntVar(&o.MTU, "mtu", o.MTU, "")
	fs.StringVar(&o.AuthFile, "auth-file", "", "")
	fs.BoolVar(&o.NoRoutes, "no-routes", false, "")
	fs.BoolVar(&o.BlockIPv6, "block-ipv6", false, "")
	fs.BoolVar(&o.Verbose, "v", false, "")
	dns := fs.String("dns", "auto", "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return 2
	}
	var err error
	if o.DNS, err = ParseDNSMode(*dns); err != nil {
		return 2
	}
	o.File = fs.Arg(0)
	if os.Getenv("WIRELANE_OVPNCLI_EVENTS") != "" {
		// The phases as a program sees them, for the tests to compare.
		o.OnEvent = func(e client.Event) {
			failed := ""
			if e.Err != nil {
				failed = " failed"
			}
			fmt.Fprintf(stderr, "event: %s%s\n", e.State, failed)
		}
	}
	return Connect(o)
}

// helperServe runs Serve with the flags the end-to-end tests give.
func helperServe(args []string) int {
	var o ServeOptions
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&o.Dev, "dev", "", "")
	fs.BoolVar(&o.Verbose, "v", false, "")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		return 2
	}
	o.File = fs.Arg(0)
	return Serve(o)
}

func TestMissingFiles(t *testing.T) {
	errOut := capture(t)
	if code := Connect(ConnectOptions{File: "/nonexistent/x.ovpn", MTU: 1500}); code != 1 || !strings.Contains(errOut.String(), "no such file") {
		t.Errorf("connect to a missing file: exit %d, stderr:\n%s", code, errOut)
	}
	errOut.Reset()
	if code := Serve(ServeOptions{File: "/nonexistent/server.conf"}); code != 1 || !strings.Contains(errOut.String(), "no such file") {
		t.Errorf("serve a missing file: exit %d, stderr:\n%s", code, errOut)
	}
}

func TestConfigErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	srv := filepath.Join(dir, "server.conf")
	os.WriteFile(srv, []byte("port 1194\nproto udp\nserver 10.8.0.0 255.255.255.0\ncomp-lzo maybe\n"), 0o600)
	cli := filepath.Join(dir, "c.ovpn")
	os.WriteFile(cli, []byte("client\nremote 192.0.2.1 1194\nfragment 1300\n"), 0o600)
	errOut := capture(t)
	if code := Serve(ServeOptions{File: srv}); code != 1 || !strings.Contains(errOut.String(), "server.conf:4: comp-lzo") {
		t.Fatalf("serve: exit %d, stderr:\n%s", code, errOut)
	}
	errOut.Reset()
	if code := Connect(ConnectOptions{File: cli, MTU: 1500}); code != 1 || !strings.Contains(errOut.String(), "c.ovpn:3: fragment") {
		t.Fatalf("connect: exit %d, stderr:\n%s", code, errOut)
	}
}
