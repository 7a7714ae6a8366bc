package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/tools/clidoc"
)

var update = flag.Bool("update", false, "rewrite the generated files under packaging/ (go test ./cmd/wirelane -run TestGeneratedFiles -update)")

// generated lists the files made from programDoc, relative to the
// repository root, with their renderers.
var generated = []struct {
	path   string
	render func(*bytes.Buffer, *clidoc.Program) error
}{
	{"packaging/man/wirelane.8", func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteMan(b, p) }},
	{"packaging/completions/wirelane.bash", func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteBash(b, p) }},
	{"packaging/completions/_wirelane", func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteZsh(b, p) }},
	{"packaging/completions/wirelane.fish", func(b *bytes.Buffer, p *clidoc.Program) error { return clidoc.WriteFish(b, p) }},
}

// TestGeneratedFilesAreCurrent regenerates the man page and the
// completions from the command table and flag sets, and fails when the
// committed files differ: a changed flag or help text must come with its
// regenerated files (-update writes them).
func TestGeneratedFilesAreCurrent(t *testing.T) {
	p := programDoc()
	for _, g := range generated {
		var b bytes.Buffer
		if err := g.render(&b, p); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("..", "..", g.path)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		old, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(old, b.Bytes()) {
			t.Errorf("%s is not what the command table and flags produce (err %v); run: go test ./cmd/wirelane -run TestGeneratedFilesAreCurrent -update", g.path, err)
		}
	}
}

// TestDocHasEveryFlag checks the collection itself: every visible command
// is described, with the flags its --help prints.
func TestDocHasEveryFlag(t *testing.T) {
	p := programDoc()
	byName := map[string]*clidoc.Command{}
	for _, c := range p.Commands {
		byName[c.Name] = c
	}
	flagRE := regexp.MustCompile(`(?m)^  (--?[a-z][a-z0-9-]*)`)
	check := func(path []string, d *clidoc.Command) {
		stdout, _, code := wl(t, "", append(path, "--help")...)
		if code != 0 {
			t.Errorf("%s --help: exit %d", strings.Join(path, " "), code)
			return
		}
		var inHelp, inDoc []string
		if _, fl, ok := strings.Cut(stdout, "\nFlags:\n"); ok {
			for _, m := range flagRE.FindAllStringSubmatch(fl, -1) {
				inHelp = append(inHelp, m[1])
			}
		}
		for _, f := range d.Flags {
			inDoc = append(inDoc, strings.Split(f.Spelling(), ", ")[0])
		}
		sort.Strings(inHelp)
		sort.Strings(inDoc)
		if strings.Join(inHelp, " ") != strings.Join(inDoc, " ") {
			t.Errorf("%s: --help lists flags %v, the doc %v", strings.Join(path, " "), inHelp, inDoc)
		}
		for _, f := range inHelp {
			if len(f) > 2 && !strings.HasPrefix(f, "--") {
				t.Errorf("%s --help spells the long flag %s with one dash", strings.Join(path, " "), f)
			}
		}
	}
	for _, c := range commands {
		if c.hidden {
			continue
		}
		d := byName[c.name]
		if d == nil {
			t.Errorf("command %s is not in the doc", c.name)
			continue
		}
		if c.name == "ovpn" {
			if len(d.Subcommands) != 3 {
				t.Fatalf("ovpn has %d subcommands in the doc, want connect, serve and genkey", len(d.Subcommands))
			}
			for _, s := range d.Subcommands {
				check([]string{"ovpn", s.Name}, s)
			}
			continue
		}
		check([]string{c.name}, d)
	}
	if f := byName["list"].Flags; len(f) != 1 || f[0].Name != "json" {
		t.Errorf("list flags %+v, want --json", f)
	}
}

func TestVersionNamesTheRevision(t *testing.T) {
	for _, arg := range []string{"--version", "-V"} {
		stdout, _, code := wl(t, "", arg)
		if code != 0 || !strings.HasPrefix(stdout, "wirelane ") || !strings.Contains(stdout, "(revision ") {
			t.Errorf("wirelane %s: exit %d, %q", arg, code, stdout)
		}
	}
	stdout, _, code := wl(t, "", "help", "list")
	if code != 0 || !strings.HasPrefix(stdout, "Usage: wirelane list") {
		t.Errorf("wirelane help list: exit %d\n%s", code, stdout)
	}
}

// TestManPageRenders formats wirelane(8) with man(1) and groff's warnings
// on: both must accept the page without a word.
func TestManPageRenders(t *testing.T) {
	page := filepath.Join("..", "..", "packaging", "man", "wirelane.8")
	checkManPage(t, page, "wirelane up", "--json", "SYNOPSIS", "systemctl enable --now wirelane@wg0")
}

// checkManPage renders page with man -l and groff -ww and looks for want
// in the text.
func checkManPage(t *testing.T, page string, want ...string) {
	t.Helper()
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man is not installed (scripts/test.sh installs man-db as root)")
	}
	cmd := exec.Command("man", "-l", page)
	cmd.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=80", "LC_ALL=C.UTF-8", "MAN_KEEP_FORMATTING=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("man -l %s: %v\n%s", page, err, out)
	}
	text := regexp.MustCompile(".\b").ReplaceAllString(string(out), "") // overstrike bold and underline
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("man -l %s: no %q in the rendered page", page, w)
		}
	}
	if _, err := exec.LookPath("groff"); err == nil {
		warn, err := exec.Command("groff", "-man", "-ww", "-z", "-Tutf8", page).CombinedOutput()
		if err != nil || len(warn) > 0 {
			t.Errorf("groff -man -ww %s: %v\n%s", page, err, warn)
		}
	}
}

// complete runs the bash completion for words (the last one is being
// completed) and returns the candidates. prelude runs first (inside the
// same shell).
func complete(t *testing.T, prelude string, words ...string) []string {
	t.Helper()
	script, _ := filepath.Abs(filepath.Join("..", "..", "packaging", "completions", "wirelane.bash"))
	var quoted []string
	for _, w := range words {
		quoted = append(quoted, "'"+w+"'")
	}
	sh := prelude + `source "$1" || exit 1
COMP_WORDS=(` + strings.Join(quoted, " ") + `)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_wirelane
printf '%s\n' "${COMPREPLY[@]}"`
	out, err := exec.Command("bash", "-c", sh, "bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("bash completion of %q: %v\n%s", words, err, out)
	}
	return strings.Fields(string(out))
}

func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	script := filepath.Join("..", "..", "packaging", "completions", "wirelane.bash")
	out, err := exec.Command("bash", "-c", `source "$1" && complete -p wirelane`, "bash", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "complete -F _wirelane wirelane") {
		t.Fatalf("complete -p wirelane after sourcing: %v\n%s", err, out)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "site.toml"), nil, 0o644)
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)
	cd := "cd '" + dir + "' || exit 1\n"
	for _, tc := range []struct {
		words []string
		want  string // one candidate that must be there
		not   string // one that must not
	}{
		{[]string{"wirelane", "li"}, "list", "up"},
		{[]string{"wirelane", ""}, "ovpn", "daemon"},
		{[]string{"wirelane", "-"}, "--version", ""},
		{[]string{"wirelane", "list", "--j"}, "--json", ""},
		{[]string{"wirelane", "show", ""}, "interfaces", ""},
		{[]string{"wirelane", "ovpn", "c"}, "connect", "serve"},
		{[]string{"wirelane", "ovpn", "connect", "--a"}, "--auth-file", "-auth-file"},
		{[]string{"wirelane", "demo", "--mtu", ""}, "notes.txt", "--keep"},
		{[]string{"wirelane", "gateway", ""}, "check", "site.toml"},
		{[]string{"wirelane", "gateway", "up", ""}, "site.toml", "notes.txt"},
		{[]string{"wirelane", "genkey", ""}, "", "notes.txt"},
	} {
		got := complete(t, cd, tc.words...)
		has := func(s string) bool {
			for _, g := range got {
				if g == s {
					return true
				}
			}
			return false
		}
		if tc.want != "" && !has(tc.want) {
			t.Errorf("completing %q: %q missing from %q", tc.words, tc.want, got)
		}
		if tc.not != "" && has(tc.not) {
			t.Errorf("completing %q: %q offered (%q)", tc.words, tc.not, got)
		}
	}
}

// TestBashCompletionOffersTunnelNames completes "up" with /etc/wireguard
// and the socket directory replaced, in a private mount namespace, by
// directories holding two tunnel files and two running tunnels' sockets.
func TestBashCompletionOffersTunnelNames(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mounts a private /etc/wireguard in a new mount namespace")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("unshare is not installed")
	}
	if err := os.MkdirAll("/etc/wireguard", 0o700); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "packaging", "completions", "wirelane.bash"))
	if err := os.MkdirAll(uapi.SocketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sh := `mount -t tmpfs none /etc/wireguard && touch /etc/wireguard/wgtest1.conf /etc/wireguard/office.conf /etc/wireguard/readme.txt || exit 1
mount -t tmpfs none ` + uapi.SocketDir + ` && touch ` + uapi.SocketDir + `/running1.sock ` + uapi.SocketDir + `/office.sock || exit 1
source "$1" || exit 1
COMP_WORDS=(wirelane up '')
COMP_CWORD=2
_wirelane
printf '%s\n' "${COMPREPLY[@]}"`
	out, err := exec.Command("unshare", "-m", "--propagation", "private", "bash", "-c", sh, "bash", script).CombinedOutput()
	if err != nil {
		t.Fatalf("unshare: %v\n%s", err, out)
	}
	got := " " + strings.Join(strings.Fields(string(out)), " ") + " "
	if !strings.Contains(got, " wgtest1 ") || strings.Count(got, " office ") != 1 || !strings.Contains(got, " running1 ") || strings.Contains(got, "readme") {
		t.Errorf("completing \"wirelane up\": %q, want the tunnels wgtest1, office (once) and running1", got)
	}
}

// TestFishCompletion asks fish for the candidates of a few command lines.
func TestFishCompletion(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		t.Skip("fish is not installed")
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "packaging", "completions", "wirelane.fish"))
	for line, want := range map[string]string{
		"wirelane ovpn c":           "connect\t",
		"wirelane li":               "list\t",
		"wirelane list --":          "--json\t",
		"wirelane ovpn connect --a": "--auth-file\t",
		"wirelane show ":            "interfaces",
	} {
		out, err := exec.Command("fish", "--no-config", "-c", "source $argv[1]; complete -C $argv[2]", script, line).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("fish: complete -C %q: %v, want %q in:\n%s", line, err, want, out)
		}
	}
}

// TestZshCompletion runs the zsh completion function with stand-ins for
// zsh's completion built-ins (compadd, _describe, _files) that print what
// they are given.
func TestZshCompletion(t *testing.T) {
	if _, err := exec.LookPath("zsh"); err != nil {
		t.Skip("zsh is not installed")
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "packaging", "completions", "_wirelane"))
	harness := `compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }
_describe() { local n=$2; print -l -- ${(P)n}; }
_files() { print -- "FILES $*"; }
f=$1
shift
words=("$@")
CURRENT=$#words
source $f`
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"wirelane", "li"}, "list:list the tunnels"},
		{[]string{"wirelane", "list", "--j"}, "--json"},
		{[]string{"wirelane", "ovpn", ""}, "connect"},
		{[]string{"wirelane", "ovpn", "connect", "--auth-file", ""}, "FILES"},
		{[]string{"wirelane", "gateway", ""}, "check"},
		{[]string{"wirelane", "gateway", "up", ""}, "FILES -g *.toml"},
		{[]string{"wirelane", "show", ""}, "interfaces"},
	} {
		out, err := exec.Command("zsh", append([]string{"-f", "-c", harness, "zsh", script}, tc.words...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("zsh completing %q: %v, want %q in:\n%s", tc.words, err, tc.want, out)
		}
	}
}

// TestZshAndFishCompletionsParse checks the other two scripts' syntax
// with their shells, where installed.
func TestZshAndFishCompletionsParse(t *testing.T) {
	ran := 0
	for _, sh := range []struct{ shell, file string }{{"zsh", "_wirelane"}, {"fish", "wirelane.fish"}} {
		if _, err := exec.LookPath(sh.shell); err != nil {
			t.Logf("%s is not installed: %s not checked", sh.shell, sh.file)
			continue
		}
		ran++
		path := filepath.Join("..", "..", "packaging", "completions", sh.file)
		if out, err := exec.Command(sh.shell, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", sh.shell, sh.file, err, out)
		}
	}
	if ran == 0 {
		t.Skip("neither zsh nor fish is installed")
	}
}
