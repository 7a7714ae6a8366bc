// Package host is the service's real Host (internal/control/service): the
// tunnels of the machine, known from their files, brought up and down
// through the tunnel library, the same code the command line runs.
//
//	Dirs.WireGuard/NAME.conf        wireguard       wgtunnel.Up/Down
//	Dirs.Gateways/NAME.toml         gateway         gateway -> wgtunnel.Up/Down
//	Dirs.OpenVPNClients/NAME.ovpn   openvpn-client  ovpntunnel.Connect (goroutine)
//	Dirs.OpenVPNServers/NAME.ovpn   openvpn-server  ovpntunnel.Serve (goroutine)
//
// The life of a tunnel: down -> starting -> up (or failed, with the error:
// the library has undone everything) -> stopping -> down. The Host keeps
// one entry per name (entry.go); a look every Config.Interval (watch.go)
// adds and removes entries as files come and go, and notices WireGuard
// tunnels that came up or went down behind its back (a `wirelane up`
// without the service, a daemon that died). At start it finds the
// WireGuard tunnels already up (their daemons answer on their UAPI sockets)
// and shows them up without bringing them up again; OpenVPN tunnels run in
// the service's process and end with it (Close stops them). An OpenVPN
// client's phases drive its states (reconnecting included), and the
// credentials its file asks for are asked of the service's clients (an
// auth event, answered through Answer).
//
// Status of a WireGuard tunnel comes from its daemon through
// service.UAPIHost (one get=1), with the friendly peer names of its file;
// of an OpenVPN tunnel, from the status file it publishes.
//
// Files: doc.go, host.go (Host, Config, List, Get), entry.go (the per-tunnel
// state), files.go (scanning and parsing the files), wireguard.go (up and
// down of WireGuard and gateway tunnels), openvpn.go (OpenVPN tunnels, their
// phases and credentials), updown.go (Up, Down and the tunnel events),
// store.go (Import and Delete), watch.go (Watch and the periodic look).
package host
