package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// The test binary doubles as the wirelane command when this variable is
// set, so the tests run the real command line (and `up` can re-execute it
// as the daemon) without a separate build.
const asCLIEnv = "WIRELANE_TEST_AS_CLI"

func TestMain(m *testing.M) {
	// A binary built with -race sleeps a second on exit (the race
	// runtime's atexit_sleep_ms), and these tests start the test binary
	// as a child hundreds of times; the children are checked by this
	// process, so they may exit at once.
	if g := os.Getenv("GORACE"); !strings.Contains(g, "atexit_sleep_ms") {
		os.Setenv("GORACE", strings.TrimSpace(g+" atexit_sleep_ms=0"))
	}
	// These tests check the commands without the service; a service
	// running on the machine must not answer for them (service_test.go
	// and the e2e tests cover the commands through it).
	if os.Getenv(socketEnv) == "" {
		os.Setenv(socketEnv, "off")
	}
	if os.Getenv(asCLIEnv) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// self returns the path of the test binary acting as wirelane.
func self(t testing.TB) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// cliEnv is the environment entry that turns the test binary into wirelane.
var cliEnv = asCLIEnv + "=1"

// wl runs wirelane with args and stdin, returning stdout, stderr and the
// exit status.
func wl(t testing.TB, stdin string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(self(t), args...)
	cmd.Env = append(os.Environ(), cliEnv)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{
		{}, {"frobnicate"}, {"up"}, {"up", "--bogus", "wg0"}, {"down", "a", "b"}, {"show", "a", "b"},
		{"show", "--jsn"}, {"show", "wg0", "--jsn"}, {"genkey", "extra"}, {"pubkey", "-x"}, {"demo", "--duration", "soon"}, {"demo", "--mtu", "5"}, {"demo", "--duration", "-1s"}, {"strip"},
		{"ovpn"}, {"ovpn", "frobnicate"}, {"ovpn", "connect"}, {"ovpn", "serve", "--bogus", "x.conf"},
	} {
		_, stderr, code := wl(t, "", args...)
		if code != 2 {
			t.Errorf("wirelane %q: exit %d, want 2", args, code)
		}
		if !strings.Contains(stderr, "Usage: wirelane") {
			t.Errorf("wirelane %q: no usage on stderr:\n%s", args, stderr)
		}
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	stdout, _, code := wl(t, "", "--help")
	if code != 0 || !strings.Contains(stdout, "Commands:") || strings.Contains(stdout, "daemon") {
		t.Errorf("wirelane --help: exit %d\n%s", code, stdout)
	}
	for _, c := range commands {
		if c.hidden {
			continue
		}
		for _, h := range []string{"--help", "-h"} {
			stdout, _, code := wl(t, "", c.name, "x", h)
			if code != 0 || !strings.HasPrefix(stdout, "Usage: wirelane "+c.name) {
				t.Errorf("wirelane %s %s: exit %d\n%s", c.name, h, code, stdout)
			}
		}
	}
}

func TestGenkeyPubkeyGenpsk(t *testing.T) {
	priv, _, code := wl(t, "", "genkey")
	if code != 0 || len(priv) != 45 || priv[44] != '\n' {
		t.Fatalf("genkey printed %q (exit %d)", priv, code)
	}
	k, err := wgquick.ParseKey(priv[:44])
	if err != nil || k[0]&7 != 0 || k[31]&0xc0 != 0x40 {
		t.Fatalf("genkey output is not a clamped key: %v", err)
	}
	pub, _, code := wl(t, priv, "pubkey")
	if code != 0 || pub != k.PublicKey().String()+"\n" {
		t.Errorf("pubkey = %q", pub)
	}
	pub, _, _ = wl(t, "dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\n", "pubkey")
	if pub != "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\n" {
		t.Errorf("pubkey of the known key = %q", pub)
	}
	psk, _, code := wl(t, "", "genpsk")
	if _, err := wgquick.ParseKey(strings.TrimSuffix(psk, "\n")); code != 0 || err != nil || psk == priv {
		t.Errorf("genpsk printed %q", psk)
	}
}

// pubkeyInputs are accepted and rejected inputs for `pubkey`.
var pubkeyInputs = []string{
	"dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=",
	"dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\n\n  \t\x00",
	"dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo= x",
	" dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=",
	"dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCp=",
	"short",
	"",
	"////////////////////////////////////////////",
	"dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=dwdt",
}

func TestPubkeyErrors(t *testing.T) {
	for in, want := range map[string]string{
		pubkeyInputs[2]: "wirelane: Trailing characters found after key\n",
		pubkeyInputs[3]: "wirelane: Trailing characters found after key\n", // 44 bytes read, '=' trails
		pubkeyInputs[4]: "wirelane: Key is not the correct length or format\n",
		pubkeyInputs[5]: "wirelane: Key is not the correct length or format\n",
	} {
		out, stderr, code := wl(t, in, "pubkey")
		if code != 1 || out != "" || stderr != want {
			t.Errorf("pubkey <<%q: exit %d, stdout %q, stderr %q; want %q", in, code, out, stderr, want)
		}
	}
}

// TestKeysByteIdenticalToWG compares with the real wg when installed.
func TestKeysByteIdenticalToWG(t *testing.T) {
	wg, err := exec.LookPath("wg")
	if err != nil {
		t.Skip("wg (wireguard-tools) not installed; known-answer tests cover the keys")
	}
	for _, in := range pubkeyInputs {
		cmd := exec.Command(wg, "pubkey")
		cmd.Stdin = strings.NewReader(in)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		werr := cmd.Run()
		wcode := 0
		if ee, ok := werr.(*exec.ExitError); ok {
			wcode = ee.ExitCode()
		}
		mout, merr, mcode := wl(t, in, "pubkey")
		// wg names itself by argv[0] ("/usr/bin/wg: ..."); compare the rest.
		wantErr := errb.String()
		if i := strings.Index(wantErr, ": "); i >= 0 {
			wantErr = "wirelane" + wantErr[i:]
		}
		if mout != out.String() || merr != wantErr || mcode != wcode {
			t.Errorf("pubkey <<%q:\n wirelane: %q %q %d\n       wg: %q %q %d", in, mout, merr, mcode, out.String(), wantErr, wcode)
		}
	}
	// wg accepts our keys and derives the same public keys.
	for range 5 {
		priv, _, _ := wl(t, "", "genkey")
		cmd := exec.Command(wg, "pubkey")
		cmd.Stdin = strings.NewReader(priv)
		want, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		got, _, _ := wl(t, priv, "pubkey")
		if got != string(want) {
			t.Errorf("pubkey %q, wg says %q", got, want)
		}
	}
}

func TestStripAndFileErrors(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "wlx0.conf")
	os.WriteFile(good, []byte("[Interface]\nPrivateKey = dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\nAddress = 10.0.0.1/24\nPostUp = echo hi\n\n[Peer]\nPublicKey = hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\nAllowedIPs = 10.0.0.0/24\n"), 0o600)
	out, stderr, code := wl(t, "", "strip", good)
	want := "[Interface]\nPrivateKey = dwdtCnMYpX08FsFyUbJmRd9ML4frwJkqsXf7pR25LCo=\n\n[Peer]\nPublicKey = hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo=\nAllowedIPs = 10.0.0.0/24\n"
	if code != 0 || out != want || stderr != "" {
		t.Errorf("strip: exit %d\n%s\nstderr %s", code, out, stderr)
	}
	bad := filepath.Join(dir, "wlx1.conf")
	os.WriteFile(bad, []byte("[Interface]\nAddress = 10.0.0.1/24\nMTU = huge\n"), 0o600)
	cmds := []string{"strip", "up", "down", "save"}
	if os.Geteuid() != 0 {
		cmds = cmds[:1] // the others stop earlier, asking for root
	}
	for _, c := range cmds {
		_, stderr, code = wl(t, "", c, bad)
		if code != 1 || stderr != "wirelane: "+bad+`:3: MTU: "huge" is not a number between 68 and 65535`+"\n" {
			t.Errorf("%s of a bad file: exit %d, stderr %q", c, code, stderr)
		}
	}
	_, stderr, code = wl(t, "", "strip", filepath.Join(dir, "missing.conf"))
	if code != 1 || !strings.Contains(stderr, "does not exist") {
		t.Errorf("missing file: exit %d, %q", code, stderr)
	}
	os.Chmod(good, 0o644)
	os.Chmod(dir, 0o755)
	_, stderr, _ = wl(t, "", "strip", good)
	if !strings.Contains(stderr, "world accessible") {
		t.Errorf("no warning for a world-readable file: %q", stderr)
	}
}

func TestGenkeyWarnsForWorldReadableFile(t *testing.T) {
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "k"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.Chmod(f.Name(), 0o644)
	cmd := exec.Command(self(t), "genkey")
	cmd.Env = append(os.Environ(), cliEnv)
	cmd.Stdout = f
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "Warning: writing to world accessible file.") {
		t.Errorf("stderr %q", errb.String())
	}
}

// TestBadAEADEnvironment: an unknown WIRELANE_AEAD value stops every command
// with a message naming the variable; the valid ones are accepted.
func TestBadAEADEnvironment(t *testing.T) {
	run := func(value string) (string, int) {
		cmd := exec.Command(self(t), "genkey")
		cmd.Env = append(os.Environ(), cliEnv, "WIRELANE_AEAD="+value)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return errb.String(), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return errb.String(), 0
	}
	if msg, code := run("fast"); code != 1 || !strings.Contains(msg, `WIRELANE_AEAD="fast"`) {
		t.Fatalf("WIRELANE_AEAD=fast: exit %d, %q", code, msg)
	}
	for _, v := range []string{"", "auto", "generic"} {
		if msg, code := run(v); code != 0 {
			t.Fatalf("WIRELANE_AEAD=%q: exit %d, %q", v, code, msg)
		}
	}
}
