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

var update = flag.Bool("update", false, "rewrite packaging/man/wirelaned.8")

const manPage = "../../packaging/man/wirelaned.8"

// TestManPageIsCurrent regenerates wirelaned(8) and fails when the
// committed page differs (-update writes it).
func TestManPageIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := clidoc.WriteMan(&b, programDoc()); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(manPage, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(manPage)
	if err != nil || !bytes.Equal(old, b.Bytes()) {
		t.Errorf("packaging/man/wirelaned.8 is not what doc.go produces (err %v); run: go test ./cmd/wirelaned -update", err)
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
