package wgtunnel

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// onlyFiles fails unless dir holds exactly the names given.
func onlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, de := range des {
		got = append(got, de.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("%s holds %q, want %q", dir, got, names)
	}
	for i := range names {
		if got[i] != names[i] {
			t.Fatalf("%s holds %q, want %q", dir, got, names)
		}
	}
}

func TestSaveReplacesTheFileKeepingModeOwnerAndABackup(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "wg0.conf")
	if err := os.WriteFile(p, []byte("old\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o640) // whatever the umask
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 4321, 4322
		if err := os.Chown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeConfigFile(p, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{p: "new\n", p + BackupSuffix: "old\n"} {
		b, err := os.ReadFile(file)
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
		fi, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode().Perm() != 0o640 || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: mode %v owner %d:%d, want -rw-r----- %d:%d", file, fi.Mode().Perm(), st.Uid, st.Gid, uid, gid)
		}
	}
	onlyFiles(t, dir, "wg0.conf", "wg0.conf.bak")

	// A second save replaces the backup with the previous contents.
	if err := writeConfigFile(p, []byte("newer\n")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p + BackupSuffix); string(b) != "new\n" {
		t.Errorf("backup after the second save = %q, want the first save's contents", b)
	}
	onlyFiles(t, dir, "wg0.conf", "wg0.conf.bak")
}

func TestSaveOfANewFileIsPrivate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "wg1.conf")
	if err := writeConfigFile(p, []byte("new\n")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("new file: %v, %v; want mode 0600", fi.Mode(), err)
	}
	onlyFiles(t, dir, "wg1.conf")
}

func TestSaveRefusesAStateWithoutThePrivateKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "wlsave0.conf")
	const body = "[Interface]\nPrivateKey = yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	eng := &fakeEngine{devs: map[string]*wgtypes.Device{"wlsave0": {Name: "wlsave0", ListenPort: 51820}}}
	err := Save(&wgquick.Config{Name: "wlsave0", Path: p}, Options{Engine: eng})
	if !errors.Is(err, ErrNoPrivateKey) {
		t.Fatalf("Save of a keyless state: %v, want ErrNoPrivateKey", err)
	}
	if b, _ := os.ReadFile(p); string(b) != body {
		t.Errorf("the file changed to %q", b)
	}
	onlyFiles(t, dir, "wlsave0.conf")
}

func TestSaveOfATunnelThatIsDownFails(t *testing.T) {
	err := Save(&wgquick.Config{Name: "wlnone0", Path: filepath.Join(t.TempDir(), "wlnone0.conf")}, Options{Engine: &fakeEngine{}})
	if err == nil {
		t.Error("Save of a tunnel that is down succeeded")
	}
}
