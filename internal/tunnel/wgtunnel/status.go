package wgtunnel

import (
	"errors"
	"io/fs"
	"syscall"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// State is what Status reports about one tunnel.
type State struct {
	// Name is the interface name asked about.
	Name string
	// Up is true while a device of that name runs.
	Up bool
	// Stale is true when the device's engine died and left its control
	// socket behind (Up is then false).
	Stale bool
	// Device is the running configuration while Up, else nil.
	Device *wgtypes.Device
}

// Status reports whether the tunnel name is up and, if so, its running
// configuration. A tunnel that is down is not an error; only a failure to
// ask is.
func Status(name string, o Options) (State, error) {
	eng, release := o.engine()
	defer release()
	st := State{Name: name}
	dev, err := eng.Device(name)
	switch {
	case err == nil:
		st.Up, st.Device = true, dev
		return st, nil
	case errors.Is(err, fs.ErrNotExist):
		return st, nil
	case errors.Is(err, syscall.ECONNREFUSED):
		st.Stale = true
		return st, nil
	default:
		return st, err
	}
}
