package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/tools/clidoc"
)

var update = flag.Bool("update", false, "rewrite packaging/man/wirelane-tray.1 and the wirelane-tray completions")

const manPage = "../../packaging/man/wirelane-tray.1"

// TestGeneratedFilesAreCurrent regenerates wirelane-tray(1) and its
// completions and fails when the committed files differ (-update writes
// them).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	for path, render := range map[string]func(*bytes.Buffer, *clidoc.Program) error{
		manPage: func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteMan(b, p) },
		"../../packaging/completions/wirelane-tray.bash": func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteBash(b, p) },
		"../../packaging/completions/_wirelane-tray":     func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteZsh(b, p) },
		"../../packaging/completions/wirelane-tray.fish": func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteFish(b, p) },
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
			t.Errorf("%s is not what doc.go produces (err %v); run: go test ./cmd/wirelane-tray -run TestGeneratedFilesAreCurrent -update", filepath.Base(path), err)
		}
	}
}

// TestDocFlagsAreTheHelpFlags: every flag --help lists is in the man page
// and the other way round.
func TestDocFlagsAreTheHelpFlags(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, &out, &errOut); code != 0 {
		t.Fatalf("--help: exit %d: %s", code, errOut.String())
	}
	var inHelp, inDoc []string
	for _, m := range regexp.MustCompile(`(?m)^  (--[a-z][a-z-]*)`).FindAllStringSubmatch(out.String(), -1) {
		inHelp = append(inHelp, m[1])
	}
	inHelp = append(inHelp, "--help")
	for _, f := range programDoc().Flags {
		inDoc = append(inDoc, "--"+f.Name)
	}
	if strings.Join(inHelp, " ") != strings.Join(inDoc, " ") {
		t.Errorf("--help lists %v, the man page %v", inHelp, inDoc)
	}
}

// TestBashCompletion completes wirelane-tray's flags.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	script, _ := filepath.Abs("../../packaging/completions/wirelane-tray.bash")
	out, err := exec.Command("bash", "-c", `source "$1" && complete -p wirelane-tray && COMP_WORDS=(wirelane-tray --z) COMP_CWORD=1 && _wirelane_tray && printf '%s\n' "${COMPREPLY[@]}"`, "bash", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "wirelane-tray") || !strings.Contains(string(out), "--zenity") {
		t.Errorf("bash completion of wirelane-tray: %v\n%s", err, out)
	}
}

// TestManPageRenders formats wirelane-tray(1) with man(1) and groff -ww.
func TestManPageRenders(t *testing.T) {
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed (scripts/test.sh installs man-db as root)")
	}
	cmd := exec.Command("man", "-l", manPage)
	cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=80", "LC_ALL=C.UTF-8", "MAN_KEEP_FORMATTING=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("man -l: %v\n%s", err, out)
	}
	text := regexp.MustCompile(".\b").ReplaceAllString(string(out), "")
	for _, w := range []string{"WIRELANE-TRAY(1)", "--autostart", "--zenity", "WIRELANE_SOCKET=PATH", "SEE ALSO"} {
		if !strings.Contains(text, w) {
			t.Errorf("rendered page lacks %q:\n%s", w, text)
		}
	}
	if _, err := exec.LookPath("groff"); err == nil {
		warn, err := exec.Command("groff", "-man", "-ww", "-z", "-Tutf8", filepath.Clean(manPage)).CombinedOutput()
		if err != nil || len(warn) > 0 {
			t.Errorf("groff -man -ww: %v\n%s", err, warn)
		}
	}
}
