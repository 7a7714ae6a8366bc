package ovpntunnel

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/procs"
)

// TestMain lets the end-to-end test run Connect and Serve in another
// network namespace by re-executing this test binary.
func TestMain(m *testing.M) {
	if d := os.Getenv("WIRELANE_OVPNCLI_STATUS_DIR"); d != "" {
		StatusDir = d
	}
	helper := map[string]func([]string) int{"connect": Connect, "serve": Serve}[os.Getenv("WIRELANE_OVPNCLI_HELPER")]
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

func capture(t *testing.T) (out, errOut *bytes.Buffer) {
	out, errOut = &bytes.Buffer{}, &bytes.Buffer{}
	oldOut, oldErr := stdout, stderr
	stdout, stderr = out, errOut
	t.Cleanup(func() { stdout, stderr = oldOut, oldErr })
	return out, errOut
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		fn   func([]string) int
		args []string
		code int
		want string
	}{
		{"connect without a file", Connect, nil, 2, "want exactly one file argument, got 0"},
		{"connect with two files", Connect, []string{"a.ovpn", "b.ovpn"}, 2, "got 2"},
		{"connect with an unknown flag", Connect, []string{"--bogus", "a.ovpn"}, 2, "flag provided but not defined"},
		{"connect with a bad MTU", Connect, []string{"--mtu", "10", "a.ovpn"}, 2, "--mtu 10 out of range"},
		{"connect with a bad --dns", Connect, []string{"--dns", "yes", "a.ovpn"}, 2, `--dns "yes": want auto or off`},
		{"connect help", Connect, []string{"--help"}, 0, "Usage: wirelane ovpn connect"},
		{"connect help spells long flags with two dashes", Connect, []string{"--help"}, 0, "\n  --auth-file FILE\n"},
		{"connect help spells one-letter flags with one", Connect, []string{"--help"}, 0, "\n  -v\n"},
		{"serve without a file", Serve, nil, 2, "want exactly one file argument"},
		{"serve help", Serve, []string{"-h"}, 0, "Usage: wirelane ovpn serve"},
		{"connect to a missing file", Connect, []string{"/nonexistent/x.ovpn"}, 1, "no such file"},
		{"serve a missing file", Serve, []string{"/nonexistent/server.conf"}, 1, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut := capture(t)
			if code := tc.fn(tc.args); code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, errOut)
			}
			// --help is what was asked for: it goes to standard output.
			got, stream := errOut, "stderr"
			if tc.code == 0 {
				got, stream = out, "stdout"
			}
			if !strings.Contains(got.String(), tc.want) {
				t.Fatalf("%s lacks %q:\n%s", stream, tc.want, got)
			}
		})
	}
}

func TestConfigErrorsNameTheLine(t *testing.T) {
	dir := t.TempDir()
	srv := filepath.Join(dir, "server.conf")
	os.WriteFile(srv, []byte("port 1194\nproto udp\nserver 10.8.0.0 255.255.255.0\ncomp-lzo yes\n"), 0o600)
	cli := filepath.Join(dir, "c.ovpn")
	os.WriteFile(cli, []byte("client\nremote 192.0.2.1 1194\nfragment 1300\n"), 0o600)
	_, errOut := capture(t)
	if code := Serve([]string{srv}); code != 1 || !strings.Contains(errOut.String(), "server.conf:4: comp-lzo") {
		t.Fatalf("serve: exit %d, stderr:\n%s", code, errOut)
	}
	errOut.Reset()
	if code := Connect([]string{cli}); code != 1 || !strings.Contains(errOut.String(), "c.ovpn:3: fragment") {
		t.Fatalf("connect: exit %d, stderr:\n%s", code, errOut)
	}
}
