package host

import "github.com/wirelane/wirelane/internal/control/service"

// entry is one tunnel the Host knows. Every field is guarded by Host.mu;
// copies taken under it are read without it.
type entry struct {
	name  string
	kind  service.Kind
	iface string // the network interface (a gateway's may differ from name)
	// path is the tunnel's file; "" for a WireGuard tunnel found running
	// without one (started by hand), which is listed while it runs.
	path  string
	state service.State
	err   string // why it failed (state failed)
	// names are the friendly peer names of the file ("# Name = ..." in
	// a [Peer], a gateway site's name) by base64 public key, read when the
	// tunnel comes up.
	names map[string]string
	// ovpn is the running OpenVPN tunnel (kinds openvpn-*), nil when none.
	ovpn *ovpnRun
	// authWait receives the answer to the auth event the OpenVPN client
	// is waiting on; nil when it is not asking.
	authWait chan service.AuthAnswer
}

// busy reports whether an Up or Down is in progress on the entry: the
// periodic look leaves it alone until it ends.
func (e *entry) busy() bool {
	return e.state == service.StateStarting || e.state == service.StateStopping
}

// running reports whether something of the tunnel is on the machine.
func (e *entry) running() bool {
	return e.state == service.StateUp || e.state == service.StateReconnecting || e.busy()
}
