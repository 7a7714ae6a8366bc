package service

import (
	"net/netip"
	"time"
)

// Kind is what sort of tunnel a Tunnel is.
type Kind string

// The kinds of tunnel.
const (
	KindWireGuard     Kind = "wireguard"
	KindGateway       Kind = "gateway"
	KindOpenVPNClient Kind = "openvpn-client"
	KindOpenVPNServer Kind = "openvpn-server"
)

// Valid reports whether k is one of the kinds above.
func (k Kind) Valid() bool {
	switch k {
	case KindWireGuard, KindGateway, KindOpenVPNClient, KindOpenVPNServer:
		return true
	}
	return false
}

// State is where a tunnel is in its life.
type State string

// The states of a tunnel. A tunnel is down or failed when nothing of it is
// left on the machine; failed carries the error.
const (
	StateDown         State = "down"
	StateStarting     State = "starting"
	StateUp           State = "up"
	StateReconnecting State = "reconnecting"
	StateStopping     State = "stopping"
	StateFailed       State = "failed"
)

// Tunnel is one tunnel as the API shows it. It holds no secret: no private
// or preshared key, no password, ever.
type Tunnel struct {
	Name  string `json:"name"`
	Kind  Kind   `json:"kind"`
	State State  `json:"state"`
	// Error says why the tunnel failed (state failed only).
	Error string `json:"error,omitempty"`
	// Addresses are the tunnel interface's addresses with their prefix
	// length.
	Addresses []netip.Prefix `json:"addresses"`
	// Interface is the network interface's name when it differs from Name
	// or when there is one ("" for an OpenVPN tunnel without a device).
	Interface string `json:"interface,omitempty"`
	// PublicKey is the WireGuard interface's public key (base64).
	PublicKey string `json:"public_key,omitempty"`
	// ListenPort is the UDP port the tunnel listens on (0 = none or not up).
	ListenPort uint16 `json:"listen_port,omitempty"`
	// FwMark is the WireGuard interface's firewall mark (0 = off).
	FwMark uint32 `json:"fwmark,omitempty"`
	// Config is the tunnel's file on the service's machine ("" when it
	// has none, such as a WireGuard interface started by hand).
	Config string `json:"config,omitempty"`
	// Peers are the WireGuard peers or the OpenVPN server's clients (for an
	// OpenVPN client: the one server).
	Peers []Peer `json:"peers"`
	// RxBytes and TxBytes are the sums over Peers.
	RxBytes uint64 `json:"rx_bytes"`
	TxBytes uint64 `json:"tx_bytes"`
	// Fleet is the fleet agent's state of a gateway in a fleet (fleet.go).
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// Peer is a WireGuard peer or an OpenVPN client or server.
type Peer struct {
	// PublicKey identifies a WireGuard peer (base64).
	PublicKey string `json:"public_key,omitempty"`
	// CommonName identifies an OpenVPN peer (its certificate's CN).
	CommonName string `json:"common_name,omitempty"`
	// Name is the friendly name ("# Name = ..." in the wg-quick file).
	Name string `json:"name,omitempty"`
	// Endpoint is the peer's current UDP or TCP address (absent when none).
	Endpoint *netip.AddrPort `json:"endpoint,omitempty"`
	// AllowedIPs are the WireGuard peer's allowed IPs, or the OpenVPN
	// client's tunnel addresses.
	AllowedIPs []netip.Prefix `json:"allowed_ips,omitempty"`
	// LatestHandshake is the last completed handshake (RFC 3339, whole
	// seconds, UTC), absent when there has been none.
	LatestHandshake *time.Time `json:"latest_handshake,omitempty"`
	RxBytes         uint64     `json:"rx_bytes"`
	TxBytes         uint64     `json:"tx_bytes"`
	// HasPresharedKey tells whether the WireGuard peer has a preshared
	// key (the key itself is never shown).
	HasPresharedKey bool `json:"has_preshared_key,omitempty"`
	// PersistentKeepalive is the WireGuard peer's keepalive interval in
	// seconds (0 = off).
	PersistentKeepalive int `json:"persistent_keepalive,omitempty"`
}

// ID returns what identifies the peer within its tunnel: the public key for
// WireGuard, the common name for OpenVPN.
func (p *Peer) ID() string {
	if p.PublicKey != "" {
		return p.PublicKey
	}
	return p.CommonName
}

// The event types of /v1/events.
const (
	EventTunnel   = "tunnel"   // a tunnel's state (the snapshot, then every change)
	EventTunnels  = "tunnels"  // a tunnel was added or removed
	EventPeer     = "peer"     // handshake established or expired, endpoint changed
	EventTransfer = "transfer" // a tunnel's counters, at most once a second while they change
	EventAuth     = "auth"     // an OpenVPN tunnel asks for credentials
	EventStopping = "stopping" // the service is stopping; the stream ends
)

// Changes carried by tunnels and peer events.
const (
	ChangeAdded            = "added"
	ChangeRemoved          = "removed"
	ChangeHandshake        = "handshake"
	ChangeHandshakeExpired = "handshake-expired"
	ChangeEndpoint         = "endpoint"
)

// Event is one line of the /v1/events stream. Which fields are set depends
// on Type (docs/api.md lists them); none carries a secret.
type Event struct {
	Type   string    `json:"type"`
	Time   time.Time `json:"time"`
	Tunnel string    `json:"tunnel,omitempty"`

	// tunnel events
	State State `json:"state,omitempty"`
	// Reason says why the state changed ("requested", "handshake timed out").
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// Initial marks the snapshot's events.
	Initial bool `json:"initial,omitempty"`
	// Status is the whole tunnel as GET /v1/tunnels/{name} shows it
	// (tunnel events; tunnels events when added).
	Status *Tunnel `json:"status,omitempty"`

	// Change is "added" or "removed" (tunnels), or "handshake",
	// "handshake-expired" or "endpoint" (peer).
	Change string `json:"change,omitempty"`
	// Peer is the peer a peer event is about.
	Peer *Peer `json:"peer,omitempty"`

	// transfer events: the tunnel's totals and each peer's counters.
	RxBytes  *uint64        `json:"rx_bytes,omitempty"`
	TxBytes  *uint64        `json:"tx_bytes,omitempty"`
	Transfer []PeerTransfer `json:"peers,omitempty"`

	// Auth is what an auth event asks for.
	Auth *AuthPrompt `json:"auth,omitempty"`
}

// PeerTransfer is one peer's counters in a transfer event.
type PeerTransfer struct {
	ID      string `json:"id"` // the public key or common name
	RxBytes uint64 `json:"rx_bytes"`
	TxBytes uint64 `json:"tx_bytes"`
}

// AuthPrompt is what an OpenVPN tunnel needs from its user before it can
// go on: a username and password, or the answer to a challenge.
type AuthPrompt struct {
	// Kind is "password" or "challenge".
	Kind string `json:"kind"`
	// Username, in a password prompt, is the username the tunnel's file
	// gives without its password: only the password is asked for (as
	// OpenVPN 2.6 prompts for it), and an answer's username is not used.
	Username string `json:"username,omitempty"`
	// Prompt is the text to show (the server's challenge text).
	Prompt string `json:"prompt,omitempty"`
	// Echo tells whether the challenge answer may be shown as typed.
	Echo bool `json:"echo,omitempty"`
}

// AuthAnswer is a client's reply to an auth event
// (POST /v1/tunnels/{name}/auth).
type AuthAnswer struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	// Response answers a challenge.
	Response string `json:"response,omitempty"`
}

// ImportRequest is the body of POST /v1/tunnels.
type ImportRequest struct {
	// Name is the tunnel's name (1 to 15 of [a-zA-Z0-9_=+.-]: it names
	// the interface too).
	Name string `json:"name"`
	// Kind is what Config holds: wireguard (a wg-quick file), gateway (a
	// TOML file), openvpn-client or openvpn-server (a .ovpn with inline
	// blocks).
	Kind Kind `json:"kind"`
	// Config is the file's text.
	Config string `json:"config"`
}

// EngineCounter is one value of an engine's own counters for /metrics,
// exported as wirelane_<Name>{tunnel="...", labels...}.
type EngineCounter struct {
	Tunnel string
	// Name is the metric name without the wirelane_ prefix, for example
	// "handshakes_rejected_total"; names ending in _total are counters,
	// others gauges.
	Name string
	Help string
	// Labels are extra label pairs (for example {"reason", "mac1"}); label
	// names must be valid Prometheus names and not "tunnel".
	Labels [][2]string
	Value  float64
}
