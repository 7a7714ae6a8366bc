package host

// WireGuard and gateway tunnels: the file is parsed as the command line
// parses it and handed to wgtunnel.Up or Down, which do the work and, for
// a failed Up, its undo.

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

// options are the library's options for the service: its reports go to
// the log, its hooks' output to the service's standard error.
func (h *Host) options(name string) wgtunnel.Options {
	return wgtunnel.Options{
		Engine:     h.eng,
		Log:        func(s string) { h.log.Info("[#] "+s, "tunnel", name) },
		Warn:       func(s string) { h.log.Warn(s, "tunnel", name) },
		Note:       func(s string) { h.log.Info(s, "tunnel", name) },
		HookStdout: os.Stderr,
		HookStderr: os.Stderr,
		NoFirewall: h.cfg.NoFirewall,
	}
}

// wgConfig reads the wg-quick model of a WireGuard or gateway file;
// withKeys also reads a gateway's key files (for Up).
func (h *Host) wgConfig(e *entry, withKeys bool) (*wgquick.Config, error) {
	if e.kind == service.KindWireGuard {
		cfg, err := loadWireGuard(e.path)
		if err != nil {
			return nil, configError(err)
		}
		return cfg, nil
	}
	g, err := gateway.LoadFile(e.path)
	if err != nil {
		return nil, configError(err)
	}
	if withKeys {
		warnings, err := g.LoadKeys()
		for _, w := range warnings {
			h.log.Warn(w, "tunnel", e.name)
		}
		if err != nil {
			return nil, configError(err)
		}
	}
	return g.Config(), nil
}

// upWireGuard brings a WireGuard or gateway tunnel up.
func (h *Host) upWireGuard(ctx context.Context, e *entry) error {
	if e.kind == service.KindGateway {
		g, err := h.loadFleetGateway(e)
		if err != nil {
			return err
		}
		if g != nil {
			return h.upFleet(ctx, e, g)
		}
	}
	cfg, err := h.wgConfig(e, true)
	if err != nil {
		return err
	}
	if err := wgtunnel.Up(ctx, cfg, h.options(e.name)); err != nil {
		return configError(err)
	}
	return nil
}

// downWireGuard takes a WireGuard or gateway tunnel down. A file that no
// longer parses (or none) still lets the interface go, without its hooks.
func (h *Host) downWireGuard(e *entry) error {
	if e.kind == service.KindGateway {
		h.stopFleet(e.name, true) // leave the fleet first: the others drop the site
	}
	cfg := &wgquick.Config{Name: e.iface, Path: e.path}
	if e.path != "" {
		if c, err := h.wgConfig(e, false); err == nil {
			cfg = c
		} else {
			h.log.Warn("taking the tunnel down without its file's hooks: the file does not parse", "tunnel", e.name, "err", err)
		}
	}
	return wgtunnel.Down(cfg, h.options(e.name))
}

// wgUp reports whether a WireGuard device of that interface runs here:
// its daemon answers, and the interface is in this network namespace
// (UAPI sockets are shared by all namespaces).
//
// The look is the engine's InUse (a connect to the daemon's socket), not
// a UAPI get: the periodic look asks it every second, and a get of a
// gateway's thousands of fleet peers costs its daemon time and memory.
func (h *Host) wgUp(iface string) bool {
	return h.eng.InUse(iface) && linkHere(iface)
}

// configError turns the parsers' located errors into the service's
// ConfigError (the API's "line" field); other errors pass unchanged.
func configError(err error) error {
	var pe *wgquick.ParseError
	if errors.As(err, &pe) {
		return &service.ConfigError{File: pe.File, Line: pe.Line, Msg: pe.Msg}
	}
	var ge *gateway.Error
	if errors.As(err, &ge) {
		msg := ge.Msg
		if ge.Key != "" {
			msg = fmt.Sprintf("%s: %s", ge.Key, ge.Msg)
		}
		return &service.ConfigError{File: ge.File, Line: ge.Pos.Line, Msg: msg}
	}
	return err
}
