package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

func TestListMergesFilesInterfacesAndOpenVPN(t *testing.T) {
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{
		"home.conf":              0o600,
		"office.conf":            0o600,
		"bad name.conf":          0o600, // not an interface name: not a tunnel
		"notes.txt":              0o600,
		"waytoolong0123456.conf": 0o600, // 17 characters
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "dir.conf"), 0o700); err != nil {
		t.Fatal(err)
	}
	confs, err := configFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(confs) != 2 || confs["home"] != filepath.Join(dir, "home.conf") || confs["office"] == "" {
		t.Fatalf("config files: %v", confs)
	}
	if c, err := configFiles(filepath.Join(dir, "missing")); err != nil || len(c) != 0 {
		t.Errorf("missing dir: %v %v", c, err)
	}

	hs := time.Unix(1_800_000_000, 0)
	devs := []*wgtypes.Device{
		{Name: "office", Peers: []wgtypes.Peer{{LastHandshakeTime: hs.Add(-time.Minute)}, {LastHandshakeTime: hs}, {}}},
		{Name: "adhoc"},
	}
	ovpns := []ovpntunnel.TunnelStatus{{Kind: "client", PID: 77, Interface: "tun3", Config: "/etc/openvpn/p.ovpn"},
		{Kind: "server", PID: 9, Config: "/etc/openvpn/s.conf"}} // dev null
	got := listEntries(confs, devs, ovpns)
	want := []listEntry{
		{Name: "adhoc", Kind: "wireguard", State: "up"},
		{Name: "home", Kind: "wireguard", State: "down", Config: confs["home"]},
		{Name: "office", Kind: "wireguard", State: "up", Config: confs["office"], Peers: 3, LatestHandshake: hs.Unix()},
		{Name: "pid-9", Kind: "openvpn-server", State: "up", Config: "/etc/openvpn/s.conf", PID: 9},
		{Name: "tun3", Kind: "openvpn-client", State: "up", Config: "/etc/openvpn/p.ovpn", PID: 77},
	}
	if len(got) != len(want) {
		t.Fatalf("entries:\n%+v\nwant\n%+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %+v, want %+v", i, got[i], want[i])
		}
	}

	var buf bytes.Buffer
	if err := writeListJSON(&buf, got); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema  int         `json:"schema"`
		Tunnels []listEntry `json:"tunnels"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil || doc.Schema != 1 || len(doc.Tunnels) != 5 || doc.Tunnels[2] != want[2] {
		t.Errorf("JSON (%v):\n%s", err, buf.Bytes())
	}
	buf.Reset()
	writeListJSON(&buf, nil)
	if !strings.Contains(buf.String(), `"tunnels": []`) {
		t.Errorf("empty list is not []:\n%s", buf.String())
	}
	buf.Reset()
	writeListText(&buf, got, true)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[2], "home") || !strings.Contains(lines[2], "down") || !strings.HasSuffix(lines[1], " -") {
		t.Errorf("text:\n%s", buf.String())
	}
}

func TestListRejectsArguments(t *testing.T) {
	if _, _, code := wl(t, "", "list", "wg0"); code != 2 {
		t.Errorf("list wg0: exit %d, want 2", code)
	}
	if _, _, code := wl(t, "", "list", "--bogus"); code != 2 {
		t.Errorf("list --bogus: exit %d, want 2", code)
	}
}

func TestListTextSaysNoFilesOnlyWhenItCouldLook(t *testing.T) {
	var buf bytes.Buffer
	writeListText(&buf, nil, true)
	if !strings.Contains(buf.String(), "no files in") {
		t.Errorf("readable directory: %q", buf.String())
	}
	buf.Reset()
	writeListText(&buf, nil, false)
	if got := buf.String(); got != "no running tunnels\n" {
		t.Errorf("unreadable directory: %q, want no claim about the files", got)
	}
}

// TestListAsNonRoot runs list as nobody while a tunnel is up (a TUN
// interface with a root-only socket, as a daemon makes): it must show the
// tunnel, exit 0, and say what it could not see instead of failing on the
// socket.
func TestListAsNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates an interface and a socket in /var/run/wireguard, then drops to nobody")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv is not installed")
	}
	name := fmt.Sprintf("wlnr%d", os.Getpid()%100000)
	if out, err := exec.Command("ip", "tuntap", "add", "dev", name, "mode", "tun").CombinedOutput(); err != nil {
		t.Skipf("cannot create a TUN interface: %v %s", err, out)
	}
	defer exec.Command("ip", "link", "del", name).Run()
	if err := os.MkdirAll(uapi.SocketDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := uapi.SocketPath(name)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o600)
	// The test binary, where nobody may run it.
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "wirelane")
	data, err := os.ReadFile(self(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"list"}, {"list", "--json"}} {
		cmd := exec.Command("setpriv", append([]string{"--reuid=nobody", "--regid=nogroup", "--clear-groups", bin}, args...)...)
		cmd.Env = append(os.Environ(), cliEnv)
		cmd.Dir = "/"
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s as nobody: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		text := out.String() + errb.String()
		if strings.Contains(text, "permission denied") {
			t.Errorf("%s as nobody reports a bare permission error:\n%s", strings.Join(args, " "), text)
		}
		if !strings.Contains(out.String(), name) {
			t.Errorf("%s as nobody does not show the running tunnel %s:\n%s", strings.Join(args, " "), name, text)
		}
		if !strings.Contains(text, "peers and handshakes of") || !strings.Contains(text, "sudo wirelane list") {
			t.Errorf("%s as nobody does not say what it could not see:\n%s", strings.Join(args, " "), text)
		}
		if fi, err := os.Stat(wgquick.ConfigDir); err == nil && fi.Mode().Perm()&0o005 == 0 {
			if !strings.Contains(text, "only root can read "+wgquick.ConfigDir) || strings.Contains(text, "no files in") {
				t.Errorf("%s as nobody: unreadable %s not explained, or 'no files' claimed:\n%s", strings.Join(args, " "), wgquick.ConfigDir, text)
			}
		}
	}
}
