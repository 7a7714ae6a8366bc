package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/control/daemon"
	"github.com/wirelane/wirelane/internal/tools/clidoc"
)

var update = flag.Bool("update", false, "rewrite packaging/man/wirelaned.8 and the wirelaned completions")

const manPage = "../../packaging/man/wirelaned.8"

// TestManPageIsCurrent regenerates wirelaned(8) and its completions and
// fails when the committed files differ (-update writes them).
func TestManPageIsCurrent(t *testing.T) {
	for path, render := range map[string]func(*bytes.Buffer, *clidoc.Program) error{
		manPage: func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteMan(b, p) },
		"../../packaging/completions/wirelaned.bash": func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteBash(b, p) },
		"../../packaging/completions/_wirelaned":     func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteZsh(b, p) },
		"../../packaging/completions/wirelaned.fish": func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteFish(b, p) },
	} {
		var b bytes.Buffer
		if err := render(&b, programDoc()); err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(old, b.Bytes()) {
			t.Errorf("%s is not what doc.go produces (err %v); run: go test ./cmd/wirelaned -update", filepath.Base(path), err)
		}
	}
}

// TestBashCompletion completes wirelaned's flags.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	script, _ := filepath.Abs("../../packaging/completions/wirelaned.bash")
	out, err := exec.Command("bash", "-c", `source "$1" && complete -p wirelaned && COMP_WORDS=(wirelaned --l) COMP_CWORD=1 && _wirelaned && printf '%s\n' "${COMPREPLY[@]}"`, "bash", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "complete -F _wirelaned wirelaned") || !strings.Contains(string(out), "--log-file") {
		t.Errorf("bash completion of wirelaned: %v\n%s", err, out)
	}
}

// TestDocOptionsAreTheUsageOptions compares the options of the man page
// with those --help (daemon.Usage) lists.
func TestDocOptionsAreTheUsageOptions(t *testing.T) {
	usage := fmt.Sprintf(daemon.Usage, "wirelaned")
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`--[a-z][a-z-]*`).FindAllString(usage, -1) {
		seen[m] = true
	}
	var inUsage, inDoc []string
	for f := range seen {
		inUsage = append(inUsage, f)
	}
	for _, f := range programDoc().Flags {
		inDoc = append(inDoc, "--"+f.Name)
	}
	sort.Strings(inUsage)
	sort.Strings(inDoc)
	if strings.Join(inUsage, " ") != strings.Join(inDoc, " ") {
		t.Errorf("--help names %v, the man page %v", inUsage, inDoc)
	}
}

// TestManPageRenders formats wirelaned(8) with man(1) and groff -ww.
func TestManPageRenders(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed (scripts/test.sh installs man-db as root)")
	}
	cmd := exec.Command("man", "-l", manPage)
	cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=80", "LC_ALL=C.UTF-8")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("man -l: %v\n%s", err, out)
	}
	text := regexp.MustCompile(".\b").ReplaceAllString(string(out), "")
	for _, w := range []string{"WIRELANED(8)", "--log-file", "WG_QUICK_USERSPACE_IMPLEMENTATION=wirelaned"} {
		if !strings.Contains(text, w) {
			t.Errorf("rendered page lacks %q", w)
		}
	}
	if _, err := exec.LookPath("groff"); err == nil {
		warn, err := exec.Command("groff", "-man", "-ww", "-z", "-Tutf8", filepath.Clean(manPage)).CombinedOutput()
		if err != nil || len(warn) > 0 {
			t.Errorf("groff -man -ww: %v\n%s", err, warn)
		}
	}
}

// TestVersionNamesTheRevision runs wirelaned --version from a fresh build.
func TestVersionNamesTheRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds wirelaned")
	}
	bin := filepath.Join(t.TempDir(), "wirelaned")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Skipf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "wirelaned ") || !strings.Contains(string(out), "(revision ") {
		t.Errorf("wirelaned --version: %v, %q", err, out)
	}
}
