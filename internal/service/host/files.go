package host

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// found is one tunnel file.
type found struct {
	name  string
	kind  service.Kind
	iface string
	path  string
}

// scanFiles reads the four directories. A name found twice is the first
// directory's; the other file is logged once per look. Unreadable or
// missing directories hold no tunnels.
func (h *Host) scanFiles() map[string]found {
	out := map[string]found{}
	for _, k := range kinds {
		dir, suffix := h.cfg.Dirs.dir(k)
		des, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, de := range des {
			name, ok := strings.CutSuffix(de.Name(), suffix)
			if !ok || !service.ValidName(name) || !de.Type().IsRegular() {
				continue
			}
			p := filepath.Join(dir, de.Name())
			if prev, dup := out[name]; dup {
				h.log.Debug("tunnel name used twice; the second file is ignored", "tunnel", name, "kept", prev.path, "ignored", p)
				continue
			}
			f := found{name: name, kind: k, iface: name, path: p}
			if k == service.KindGateway {
				// The interface is the file's name setting, when it has one.
				if g, err := gateway.LoadFile(p); err == nil && g.Name != "" {
					f.iface = g.Name
				}
			}
			out[name] = f
		}
	}
	return out
}

// peerNames reads the friendly peer names of a WireGuard or gateway file
// (nil when it has none or does not parse).
func peerNames(kind service.Kind, path string) map[string]string {
	out := map[string]string{}
	switch kind {
	case service.KindWireGuard:
		cfg, err := loadWireGuard(path)
		if err != nil {
			return nil
		}
		for _, p := range cfg.Peers {
			if p.Name != "" {
				out[base64.StdEncoding.EncodeToString(p.PublicKey[:])] = p.Name
			}
		}
	case service.KindGateway:
		g, err := gateway.LoadFile(path)
		if err != nil {
			return nil
		}
		for _, s := range g.Sites {
			if s.Name != "" {
				out[base64.StdEncoding.EncodeToString(s.PublicKey[:])] = s.Name
			}
		}
	}
	return out
}

// loadWireGuard parses a wg-quick file (the interface is named after it).
func loadWireGuard(path string) (*wgquick.Config, error) {
	return wgquick.LoadFile(path)
}
