package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestStringNamesVersionRevisionAndChanges(t *testing.T) {
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"a tagged build", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.4.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "false"}}},
			"v0.4.0 (revision 0123456789ab, go1.26.0)"},
		{"a modified tree", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261201000000-0123456789ab+dirty"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"}}},
			"v0.0.0-20261201000000-0123456789ab+dirty (revision 0123456789ab, modified, go1.26.0)"},
		{"go run without VCS stamping", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}},
			"(devel) (revision unknown, go1.26.0)"},
		{"no build information", nil, "(devel) (revision unknown)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fromBuild(tc.bi).String(); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestLinkTimeVersionWins(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = "v9.9.9"
	if got := fromBuild(&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}).Version; got != "v9.9.9" {
		t.Errorf("version %q, want the link-time v9.9.9", got)
	}
}

// TestTaggedCheckoutBuildsWithItsVersion clones the repository as a user
// would, tags the clone and builds wirelaned there with the plain go
// command: --version must name the tag and the revision (not "(devel)").
func TestTaggedCheckoutBuildsWithItsVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and builds a binary")
	}
	for _, tool := range []string{"go", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH", tool)
		}
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	clone := filepath.Join(t.TempDir(), "src")
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("", "clone", "-q", "--no-hardlinks", strings.TrimSpace(string(top)), clone)
	// The clone gets the working tree as it is now (this test's code
	// included), committed and tagged.
	files, err := exec.Command("git", "-C", strings.TrimSpace(string(top)), "ls-files", "-co", "--exclude-standard", "-z").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Split(strings.TrimRight(string(files), "\x00"), "\x00") {
		src := filepath.Join(strings.TrimSpace(string(top)), f)
		data, err := os.ReadFile(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(src)
		dst := filepath.Join(clone, f)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, data, fi.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	id := []string{"-c", "user.name=test", "-c", "user.email=test@example.invalid"}
	git(clone, "add", "-A")
	git(clone, append(id, "commit", "-q", "--allow-empty", "-m", "test")...)
	git(clone, append(id, "tag", "-a", "-m", "test", "v0.98.7")...)
	rev, err := exec.Command("git", "-C", clone, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "wirelaned")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/wirelaned")
	build.Dir = clone
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("wirelaned --version: %v\n%s", err, out)
	}
	want := "wirelaned v0.98.7 (revision " + strings.TrimSpace(string(rev))[:12]
	if !strings.HasPrefix(string(out), want) {
		t.Errorf("wirelaned --version = %q, want it to start with %q", out, want)
	}
}
