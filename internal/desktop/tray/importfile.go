package tray

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/wirelane/wirelane/internal/control/service"
)

// maxImport is the largest file the tray sends (the service's own limit
// on a request body is 1 MiB).
const maxImport = 1 << 20

// ImportRequestFor reads the tunnel file at path and makes the service's
// import request: the name is the file's name without its extension, the
// kind its extension (.conf WireGuard, .toml gateway, .ovpn an OpenVPN
// client, or server when the file says `server` or `mode server`).
func ImportRequestFor(path string) (service.ImportRequest, error) {
	base := filepath.Base(path)
	ext := strings.ToLower(filepath.Ext(base))
	name := strings.TrimSuffix(base, filepath.Ext(base))
	var req service.ImportRequest
	switch ext {
	case ".conf":
		req.Kind = service.KindWireGuard
	case ".toml":
		req.Kind = service.KindGateway
	case ".ovpn":
		req.Kind = service.KindOpenVPNClient
	default:
		return req, fmt.Errorf("%s: not a tunnel file: want NAME.conf (WireGuard), NAME.toml (gateway) or NAME.ovpn (OpenVPN)", path)
	}
	if !service.ValidName(name) {
		return req, fmt.Errorf("%s: %q cannot name a tunnel: 1 to 15 of a-z A-Z 0-9 _ = + . - (rename the file)", path, Clip(name, 40))
	}
	f, err := os.Open(path)
	if err != nil {
		return req, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxImport+1))
	if err != nil {
		return req, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxImport {
		return req, fmt.Errorf("%s: larger than %d bytes: not a tunnel file", path, maxImport)
	}
	if req.Kind == service.KindOpenVPNClient && ovpnIsServer(string(b)) {
		req.Kind = service.KindOpenVPNServer
	}
	req.Name, req.Config = name, string(b)
	return req, nil
}

// ovpnIsServer reports whether an OpenVPN file configures a server: a
// `server NET MASK` or `mode server` directive outside inline blocks.
func ovpnIsServer(text string) bool {
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 0, 4096), maxImport)
	inBlock := false
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch {
		case strings.HasPrefix(f[0], "</"):
			inBlock = false
			continue
		case strings.HasPrefix(f[0], "<"):
			inBlock = true
			continue
		}
		if inBlock {
			continue
		}
		d := strings.TrimPrefix(f[0], "--")
		if d == "server" || d == "server-bridge" || (d == "mode" && len(f) > 1 && f[1] == "server") {
			return true
		}
	}
	return false
}
