package main

// Tests of what scripts/install.sh puts in place: the binaries (found
// even when PATH lost the go command, as under sudo), the systemd units
// (systemd-analyze verify), man pages and completions, and --uninstall.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// installed lists the files install.sh puts under DESTDIR.
var installed = []string{
	"usr/local/bin/wirelane",
	"usr/local/bin/wirelaned",
	"usr/local/bin/wirelane-tray",
	"usr/local/share/applications/wirelane-tray.desktop",
	"etc/xdg/autostart/wirelane-tray.desktop",
	"usr/local/lib/systemd/system/wirelane@.service",
	"usr/local/lib/systemd/system/wirelane-gateway@.service",
	"usr/local/lib/systemd/system/wirelane-fleet@.service",
	"usr/local/lib/systemd/system/wirelane-ovpn@.service",
	"usr/local/lib/systemd/system/wirelaned.service",
	"usr/local/lib/systemd/system/wirelane.target",
	"usr/local/share/man/man8/wirelane.8",
	"usr/local/share/man/man8/wirelaned.8",
	"usr/local/share/man/man1/wirelane-tray.1",
	"usr/local/share/bash-completion/completions/wirelane",
	"usr/local/share/zsh/site-functions/_wirelane",
	"usr/local/share/fish/vendor_completions.d/wirelane.fish",
	"usr/local/share/bash-completion/completions/wirelaned",
	"usr/local/share/zsh/site-functions/_wirelaned",
	"usr/local/share/fish/vendor_completions.d/wirelaned.fish",
	"usr/local/share/bash-completion/completions/wirelane-tray",
	"usr/local/share/zsh/site-functions/_wirelane-tray",
	"usr/local/share/fish/vendor_completions.d/wirelane-tray.fish",
}

// TestInstallScript installs into a temporary DESTDIR with a PATH like
// sudo's secure_path (no go on it), checks the files, the binaries'
// --version, the units with systemd-analyze verify and the man pages with
// man, then uninstalls.
func TestInstallScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	if filepath.Dir(goBin) != "/usr/local/go/bin" {
		// The script must find go without PATH: only the standard
		// places are searched, so tell it where this one is.
		t.Setenv("GO", goBin)
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "install.sh"))
	dest := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(script, args...)
		cmd.Env = append(os.Environ(), "DESTDIR="+dest, "PATH=/usr/sbin:/usr/bin:/sbin:/bin")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("install.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run()
	for _, f := range installed {
		if _, err := os.Stat(filepath.Join(dest, f)); err != nil {
			t.Errorf("not installed: %v", err)
		}
	}
	bin := filepath.Join(dest, "usr/local/bin")
	if !strings.Contains(out, "wirelane ") || !strings.Contains(out, "(revision ") {
		t.Errorf("install.sh did not print a version with the revision:\n%s", out)
	}
	wantRev := "(revision " // at least the form, without git
	if rev, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		wantRev = "(revision " + strings.TrimSpace(string(rev))[:12]
	}
	for _, b := range []string{"wirelane", "wirelaned", "wirelane-tray"} {
		v, err := exec.Command(filepath.Join(bin, b), "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(v), wantRev) {
			t.Errorf("installed %s --version: %v %q, want %q in it", b, err, v, wantRev)
		}
	}
	unit, _ := os.ReadFile(filepath.Join(dest, "usr/local/lib/systemd/system/wirelane@.service"))
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/wirelane up %i") {
		t.Errorf("installed wirelane@.service does not start /usr/local/bin/wirelane:\n%s", unit)
	}

	t.Run("systemd-analyze verify", func(t *testing.T) { verifyUnits(t, dest) })
	t.Run("man", func(t *testing.T) {
		for _, p := range []string{"man8/wirelane.8", "man8/wirelaned.8", "man1/wirelane-tray.1"} {
			checkManPage(t, filepath.Join(dest, "usr/local/share/man", p), "SYNOPSIS")
		}
	})

	run("--uninstall")
	for _, f := range installed {
		if _, err := os.Stat(filepath.Join(dest, f)); err == nil {
			t.Errorf("left behind by --uninstall: %s", f)
		}
	}
}

// verifyUnits runs systemd-analyze verify on an instance of every unit
// installed under dest, with their binaries pointed at dest's and their
// man pages on MANPATH (verify checks Documentation= with man).
func verifyUnits(t *testing.T, dest string) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (scripts/test.sh installs the systemd package as root)")
	}
	dir := t.TempDir()
	units := map[string]string{
		"wirelane@.service":         "wirelane@wg0.service",
		"wirelane-gateway@.service": "wirelane-gateway@site.service",
		"wirelane-fleet@.service":   "wirelane-fleet@site.service",
		"wirelane-ovpn@.service":    "wirelane-ovpn@office.service",
		"wirelaned.service":         "wirelaned.service",
		"wirelane.target":           "wirelane.target",
	}
	args := []string{"verify"}
	for file, instance := range units {
		data, err := os.ReadFile(filepath.Join(dest, "usr/local/lib/systemd/system", file))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), "/usr/local/bin/", filepath.Join(dest, "usr/local/bin")+"/")
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, filepath.Join(dir, instance))
	}
	cmd := exec.Command("systemd-analyze", args...)
	cmd.Env = append(os.Environ(), "MANPATH="+filepath.Join(dest, "usr/local/share/man"))
	out, err := cmd.CombinedOutput()
	// systemd-analyze also reports on units it pulls in from the host;
	// only lines about ours count, and a failed verify always does.
	var ours []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "wirelane") {
			ours = append(ours, line)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestFindGoWithoutPath sources scripts/lib/find-go.sh with a PATH like
// sudo's secure_path: go and gofmt must be found (test.sh and install.sh
// rely on it).
func TestFindGoWithoutPath(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	lib, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "lib", "find-go.sh"))
	cmd := exec.Command("bash", "-c", `. "$1" && find_go && command -v go && command -v gofmt`, "bash", lib)
	env := []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + t.TempDir()}
	if filepath.Dir(goBin) != "/usr/local/go/bin" {
		env = append(env, "GO="+goBin)
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Count(string(out), "\n") != 2 {
		t.Fatalf("find_go: %v\n%s", err, out)
	}
	cmd = exec.Command("bash", "-c", `. "$1" && find_go`, "bash", lib)
	cmd.Env = []string{"PATH=/nonexistent", "HOME=" + t.TempDir()}
	if out, err := cmd.CombinedOutput(); err == nil && filepath.Dir(goBin) != "/usr/local/go/bin" {
		t.Errorf("find_go found a go where there is none:\n%s", out)
	} else if err != nil && !strings.Contains(string(out), "Install Go 1.26") {
		t.Errorf("find_go failed without saying what to install:\n%s", out)
	}
}

// TestReadmeCommandsSurviveSudo reads the README's shell blocks: a command
// run through sudo must not need go from the caller's PATH (sudo's
// secure_path drops /usr/local/go/bin) unless it passes PATH on, and the
// scripts it runs must exist and find go themselves.
func TestReadmeCommandsSurviveSudo(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	inBlock, sudoLines := false, 0
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock = !inBlock
			continue
		}
		if !inBlock || !strings.HasPrefix(line, "sudo ") {
			continue
		}
		sudoLines++
		words := strings.Fields(line)
		switch {
		case words[1] == "go" || words[1] == "gofmt":
			t.Errorf("README.md:%d: %q: sudo's secure_path hides %s", i+1, line, words[1])
		case words[1] == "env" && (len(words) < 3 || words[2] != `"PATH=$PATH"`):
			t.Errorf("README.md:%d: %q: env without PATH=$PATH", i+1, line)
		case strings.HasPrefix(words[1], "./scripts/"):
			script, err := os.ReadFile(filepath.Join("..", "..", words[1]))
			if err != nil {
				t.Errorf("README.md:%d: %v", i+1, err)
			} else if !strings.Contains(string(script), "find_go") {
				t.Errorf("README.md:%d: %s does not find go itself (scripts/lib/find-go.sh)", i+1, words[1])
			}
		}
	}
	// Inline commands too: `sudo go ...` anywhere in the README.
	if i := strings.Index(string(data), "`sudo go "); i >= 0 {
		t.Errorf("README.md:%d: `sudo go ...`: sudo's secure_path hides go", strings.Count(string(data[:i]), "\n")+1)
	}
	if sudoLines < 3 {
		t.Errorf("found %d sudo commands in README.md's shell blocks; the quick start has at least three", sudoLines)
	}
}

// TestGoFoundThroughRealSudo runs, through sudo itself (whose secure_path
// hides /usr/local/go/bin), the README's way of passing PATH on and the
// scripts' way of finding go and gofmt.
func TestGoFoundThroughRealSudo(t *testing.T) {
	if _, err := exec.LookPath("sudo"); err != nil {
		t.Skip("sudo is not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (sudo -n as root asks no password)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH")
	}
	out, err := exec.Command("sudo", "-n", "env", "PATH="+os.Getenv("PATH"), "go", "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "go version") {
		t.Errorf(`sudo env "PATH=$PATH" go version: %v\n%s`, err, out)
	}
	lib, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "lib", "find-go.sh"))
	args := []string{"-n"}
	if filepath.Dir(goBin) != "/usr/local/go/bin" {
		args = append(args, "GO="+goBin)
	}
	args = append(args, "bash", "-c", `. "$1" && find_go && go version && command -v gofmt`, "bash", lib)
	out, err = exec.Command("sudo", args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "go version") || !strings.Contains(string(out), "/gofmt") {
		t.Errorf("find_go through sudo: %v\n%s", err, out)
	}
}
