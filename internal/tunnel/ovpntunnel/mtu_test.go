package ovpntunnel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/internal/testkit/testpki"
	"github.com/wirelane/wirelane/ovpn/config"
)

// The device MTU: --mtu over a pushed tun-mtu over the file's over 1500,
// a pushed one capped to max(1600, the file's), and IV_MTU announced only
// without --mtu.
func TestTunMTUChoice(t *testing.T) {
	for _, tc := range []struct {
		flag, file, pushed int
		want, limit        int
		note               string
	}{
		{0, 0, 0, 1500, 1600, ""},
		{0, 1400, 0, 1400, 1600, ""},
		{0, 1400, 1300, 1300, 1600, "mtu 1300 pushed"},
		{0, 0, 9000, 1600, 1600, "pushed tun-mtu 9000 capped to 1600"},
		{0, 9000, 9000, 9000, 9000, ""},
		{0, 0, 1500, 1500, 1600, ""},
		{0, 1400, 1500, 1500, 1600, "mtu 1500 pushed"},
		{0, 1400, 1600, 1600, 1600, "mtu 1600 pushed"},
		{0, 9000, 12000, 9000, 9000, "capped to 9000"},
		{1450, 1400, 0, 1450, 0, ""},
		{1450, 0, 1300, 1450, 0, "pushed tun-mtu 1300 not applied: --mtu 1450"},
		{1300, 0, 1300, 1300, 0, ""},
	} {
		cfg := &config.Config{TunMTU: tc.file}
		got, note := tunMTU(tc.flag, cfg, tc.pushed)
		if got != tc.want || (tc.note == "") != (note == "") || !strings.Contains(note, tc.note) {
			t.Errorf("flag %d file %d pushed %d: %d %q, want %d %q", tc.flag, tc.file, tc.pushed, got, note, tc.want, tc.note)
		}
		if lim := pushMTULimit(tc.flag, cfg); lim != tc.limit {
			t.Errorf("flag %d file %d: IV_MTU %d, want %d", tc.flag, tc.file, lim, tc.limit)
		}
	}
}

// A reload that changes tun-mtu says the device keeps its MTU until the
// client restarts, and does not list it among the reconnect changes.
func TestReloadClientTunMTU(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.ovpn")
	base := "client\nremote 192.0.2.1\nauth-user-pass\n<ca>\n" + testpki.FixtureCA + "</ca>\n"
	os.WriteFile(file, []byte(base+"tun-mtu 1400\n"), 0o600)
	cfg, err := config.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	r := &reconnector{cfg: cfg, file: file}
	os.WriteFile(file, []byte(base), 0o600)
	p, err := r.reload(true)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Lines) != 1 || p.Lines[0] != "tun-mtu: 1400 -> none (the device keeps its MTU until the client restarts)" ||
		len(p.Notes) != 1 || !strings.Contains(p.Notes[0], "restarts") {
		t.Fatalf("plan %+v", p)
	}
}
