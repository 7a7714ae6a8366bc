package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/ovpn/ovpncli"
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
	ovpns := []ovpncli.TunnelStatus{{Kind: "client", PID: 77, Interface: "tun3", Config: "/etc/openvpn/p.ovpn"},
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
	writeListText(&buf, got)
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
