package host

// Import and Delete: a configuration is validated with the parser the
// command line uses (its FILE:LINE error becomes the API's line) and
// stored with mode 0600 through a temporary file renamed into place, so
// that no reader ever sees half a file.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/server"
)

// validate parses a configuration of kind k as if it were the file path.
// OpenVPN files may not name other files (their blocks must be inline):
// the stored file would point at paths the importer chose.
func validate(k service.Kind, path string, src []byte) error {
	var err error
	switch k {
	case service.KindWireGuard:
		_, err = wgquick.Parse(path, src)
		return configError(err)
	case service.KindGateway:
		var g *gateway.Gateway
		g, err = gateway.Parse(path, src)
		if err != nil {
			return configError(err)
		}
		if g.PrivateKey == nil && g.PrivateKeyFile == "" {
			return &service.ConfigError{File: path, Msg: "the gateway has no private key"}
		}
		return nil
	case service.KindOpenVPNClient:
		_, err = config.Parse(src, path, "")
	case service.KindOpenVPNServer:
		_, err = server.ParseConfig(src, path, "")
	default:
		return fmt.Errorf("kind %q: %w", k, service.ErrInvalid)
	}
	return ovpnConfigError(err)
}

// Import validates and stores a configuration as a down tunnel.
func (h *Host) Import(ctx context.Context, req service.ImportRequest) error {
	if !service.ValidName(req.Name) {
		return fmt.Errorf("name %q: %w", req.Name, service.ErrInvalid)
	}
	dir, suffix := h.cfg.Dirs.dir(req.Kind)
	if !req.Kind.Valid() {
		return fmt.Errorf("kind %q: %w", req.Kind, service.ErrInvalid)
	}
	path := filepath.Join(dir, req.Name+suffix)
	if err := validate(req.Kind, path, []byte(req.Config)); err != nil {
		return err
	}
	h.mu.Lock()
	if _, ok := h.entries[req.Name]; ok {
		h.mu.Unlock()
		return fmt.Errorf("%q: %w", req.Name, service.ErrExists)
	}
	if _, err := os.Lstat(path); err == nil {
		h.mu.Unlock()
		return fmt.Errorf("%s: %w", path, service.ErrExists)
	}
	err := writeFile(path, []byte(req.Config))
	var snap entry
	if err == nil {
		e := &entry{name: req.Name, kind: req.Kind, iface: req.Name, path: path, state: service.StateDown}
		if req.Kind == service.KindGateway {
			if g, err := gateway.Parse(path, []byte(req.Config)); err == nil && g.Name != "" {
				e.iface = g.Name
			}
		}
		h.entries[req.Name] = e
		snap = *e
	}
	h.mu.Unlock()
	if err != nil {
		return err
	}
	h.emitTunnels(&snap, service.ChangeAdded)
	return nil
}

// writeFile stores b at path with mode 0600, atomically: a temporary file
// in the same directory (created 0700 if missing), synced, then renamed.
func writeFile(path string, b []byte) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Delete removes a stored tunnel that is down or failed.
func (h *Host) Delete(ctx context.Context, name string) error {
	h.mu.Lock()
	e, ok := h.entries[name]
	switch {
	case !ok:
		h.mu.Unlock()
		return fmt.Errorf("%q: %w", name, service.ErrNotFound)
	case e.running():
		h.mu.Unlock()
		return fmt.Errorf("%q is %s: %w", name, e.state, service.ErrBusy)
	}
	if err := os.Remove(e.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		h.mu.Unlock()
		return err
	}
	delete(h.entries, name)
	snap := *e
	h.mu.Unlock()
	h.emitTunnels(&snap, service.ChangeRemoved)
	return nil
}
