// Package internal_test holds the test that keeps the tree layered: a
// package may import only packages of its own layer or of a layer below it,
// as the table below says. docs/architecture.md draws the same layers.
package internal_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/wirelane/wirelane/"

// layers lists, for each folder of the tree (longest match wins), the
// folders its packages may depend on, directly or through others. A
// package's own folder is always allowed.
var layers = []struct {
	folder string
	may    []string
}{
	// System helpers and the AEAD: leaves.
	{"internal/sys/", []string{"internal/sys/"}},
	{"internal/crypto/", []string{"internal/sys/", "internal/crypto/"}},
	// Engines: the UDP transport and TUN devices, then the two protocols,
	// which never import each other.
	{"conn", []string{"internal/sys/", "internal/crypto/"}},
	{"tun", []string{"internal/sys/"}},
	{"device", []string{"internal/sys/", "internal/crypto/", "conn", "tun"}},
	{"ovpn", []string{"internal/sys/", "internal/crypto/", "conn", "tun"}},
	// Services that speak a protocol to the engines (UAPI, the daemon).
	{"internal/control/", []string{"internal/sys/", "internal/crypto/", "conn", "tun", "device", "ovpn"}},
	// The tunnel library: configuration files, bring-up and undo.
	{"internal/tunnel/", []string{"internal/sys/", "internal/crypto/", "conn", "tun", "device", "ovpn", "internal/control/"}},
	// The service's tunnels: the control plane's Host over the library.
	{"internal/service/", []string{"internal/sys/", "internal/crypto/", "conn", "tun", "device", "ovpn", "internal/control/", "internal/tunnel/"}},
	// Tools built on the library: the demo, the benchmark suite.
	{"internal/tools/", []string{"internal/sys/", "internal/crypto/", "conn", "tun", "device", "ovpn", "internal/control/", "internal/tunnel/", "internal/service/"}},
	// The desktop clients: the tray speaks only the service's API (its
	// types and client, which bring the layers below the services along)
	// and the session bus, never the tunnel library or the service's Host.
	{"internal/desktop/", []string{"internal/sys/", "internal/crypto/", "conn", "tun", "device", "ovpn", "internal/control/"}},
	// Test helpers may use anything but the binaries; only tests import them.
	{"internal/testkit/", []string{"internal/", "conn", "tun", "device", "ovpn"}},
	// Binaries: flags and printing on top of everything else.
	{"cmd/", []string{"internal/sys/", "internal/crypto/", "conn", "tun", "device", "ovpn", "internal/control/", "internal/tunnel/", "internal/service/", "internal/tools/", "internal/desktop/"}},
}

// pending lists the edges that break the layering today and are being
// removed; each entry names its way out. The list only shrinks.
var pending = map[string]bool{}

// within reports whether the module-relative path rel lies in folder
// (a folder without a trailing slash also matches itself exactly).
func within(rel, folder string) bool {
	if strings.HasSuffix(folder, "/") {
		return strings.HasPrefix(rel, folder)
	}
	return rel == folder || strings.HasPrefix(rel, folder+"/")
}

// layerOf returns the table entry for rel (longest folder wins).
func layerOf(rel string) (folder string, may []string, ok bool) {
	for _, l := range layers {
		if within(rel, l.folder) && len(l.folder) > len(folder) {
			folder, may, ok = l.folder, l.may, true
		}
	}
	return
}

type listed struct {
	ImportPath string
	Deps       []string
	Imports    []string
}

func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH: the layering check needs `go list`")
	}
	cmd := exec.Command("go", "list", "-json=ImportPath,Deps,Imports", module+"...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(p.ImportPath, module)
		if rel == p.ImportPath || rel == "internal" {
			continue
		}
		folder, may, ok := layerOf(rel)
		if !ok {
			t.Errorf("%s: its folder is in no layer; add it to the table in internal/layers_test.go", rel)
			continue
		}
		checked++
		for _, dep := range p.Deps {
			drel := strings.TrimPrefix(dep, module)
			if drel == dep {
				// Outside the module: wireguard-go's engine is a baseline and
				// an interop peer, never part of the product's engines.
				if strings.HasPrefix(dep, "golang.zx2c4.com/wireguard/device") && !within(rel, "internal/tools/") && !within(rel, "internal/testkit/") && !within(rel, "cmd/wirelane-bench") {
					t.Errorf("%s depends on %s: wireguard-go's device is for tests and the benchmark only", rel, dep)
				}
				continue
			}
			if within(drel, "internal/testkit/") && !within(rel, "internal/testkit/") {
				t.Errorf("%s depends on %s: test helpers are for test files only", rel, drel)
				continue
			}
			allowed := within(drel, folder) || pending[rel+" -> "+drel]
			for _, m := range may {
				allowed = allowed || within(drel, m)
			}
			if !allowed {
				t.Errorf("%s (layer %q) depends on %s, which is above it", rel, folder, drel)
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d packages: is `go list` seeing the module?", checked)
	}
}

// TestLayerTable checks the table itself: the longest-match lookup puts
// packages where the architecture says they are.
func TestLayerTable(t *testing.T) {
	for rel, want := range map[string]string{
		"conn":                       "conn",
		"conn/conntest":              "conn",
		"device/noise":               "device",
		"internal/sys/mmsg":          "internal/sys/",
		"internal/tunnel/wgquick":    "internal/tunnel/",
		"internal/testkit/e2e":       "internal/testkit/",
		"cmd/wirelane":               "cmd/",
		"ovpn/server":                "ovpn",
		"internal/control/uapi":      "internal/control/",
		"internal/crypto/chachapoly": "internal/crypto/",
		"internal/service/host":      "internal/service/",
		"internal/desktop/tray":      "internal/desktop/",
	} {
		got, _, ok := layerOf(rel)
		if !ok || got != want {
			t.Errorf("layerOf(%q) = %q, %v; want %q", rel, got, ok, want)
		}
	}
	if _, _, ok := layerOf("connx"); ok {
		t.Errorf("connx matched a layer: folder matching must not be a bare prefix")
	}
}
