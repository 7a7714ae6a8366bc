package ovpntunnel

import (
	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/config"
)

// Files with keys or passwords that group or others can read are named
// in a warning; the same files at 0600 are not.
func TestSecretFileWarnings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pass := write("pass.txt", "user\npw\n", 0o644)
	keyFile := write("client.key", testpki.FixtureKey, 0o640)
	cfgFile := write("c.ovpn", "client\nremote 192.0.2.1 1194\nkey client.key\n<ca>\n"+testpki.FixtureCA+"</ca>\n<cert>\n"+testpki.FixtureCert+"</cert>\n<auth-user-pass>\nu\np\n</auth-user-pass>\n", 0o644)
	cfg, err := config.ParseFile(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(secretWarnings(cfgFile, &cfg.Common, pass), "\n")
	for _, p := range []string{pass, keyFile, cfgFile} {
		if !strings.Contains(got, p) {
			t.Errorf("no warning for %s in:\n%s", p, got)
		}
	}
	for _, p := range []string{pass, keyFile, cfgFile} {
		os.Chmod(p, 0o600)
	}
	if w := secretWarnings(cfgFile, &cfg.Common, pass); len(w) != 0 {
		t.Errorf("warnings for 0600 files: %q", w)
	}
}
