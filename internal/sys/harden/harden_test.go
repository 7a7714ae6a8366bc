package harden

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestSecretFileMode(t *testing.T) {
	dir := t.TempDir()
	for mode, warn := range map[os.FileMode]bool{0o600: false, 0o400: false, 0o640: true, 0o644: true, 0o604: true} {
		p := filepath.Join(dir, "k")
		if err := os.WriteFile(p, []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		got := SecretFileMode(p)
		if (got != "") != warn || (warn && !strings.Contains(got, p)) {
			t.Errorf("mode %04o: warning %q", mode, got)
		}
	}
	if SecretFileMode(filepath.Join(dir, "missing")) != "" {
		t.Error("a missing file got a warning")
	}
}

func TestNoDump(t *testing.T) {
	if err := NoDump(); err != nil {
		t.Fatal(err)
	}
	v, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil || v != 0 {
		t.Fatalf("PR_GET_DUMPABLE = %d, %v after NoDump", v, err)
	}
}
