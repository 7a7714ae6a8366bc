package host

import (
	"cmp"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

// Dirs are where the Host finds the tunnels' files (docs/api.md, "Files").
type Dirs struct {
	// WireGuard holds wg-quick files, NAME.conf (default /etc/wireguard,
	// as `wirelane up NAME` reads).
	WireGuard string
	// Gateways holds gateway files, NAME.toml (default /etc/wirelane, as
	// `wirelane gateway up NAME` reads).
	Gateways string
	// OpenVPNClients holds client configurations, NAME.ovpn (default
	// /etc/wirelane/openvpn-client).
	OpenVPNClients string
	// OpenVPNServers holds server configurations, NAME.ovpn (default
	// /etc/wirelane/openvpn-server).
	OpenVPNServers string
}

// DefaultDirs returns the directories of a normal installation.
func DefaultDirs() Dirs {
	return Dirs{
		WireGuard:      wgquick.ConfigDir,
		Gateways:       gateway.ConfigDir,
		OpenVPNClients: "/etc/wirelane/openvpn-client",
		OpenVPNServers: "/etc/wirelane/openvpn-server",
	}
}

// dir returns the directory of kind k's files and their suffix.
func (d *Dirs) dir(k service.Kind) (dir, suffix string) {
	switch k {
	case service.KindWireGuard:
		return d.WireGuard, ".conf"
	case service.KindGateway:
		return d.Gateways, ".toml"
	case service.KindOpenVPNClient:
		return d.OpenVPNClients, ".ovpn"
	default:
		return d.OpenVPNServers, ".ovpn"
	}
}

// kinds is the order in which the directories are read: a name found in
// two of them is the first one's (the other file is logged and ignored).
var kinds = []service.Kind{service.KindWireGuard, service.KindGateway, service.KindOpenVPNClient, service.KindOpenVPNServer}

// Config says where a Host finds its tunnels and how it runs them. The
// zero value gives the defaults.
type Config struct {
	// Dirs are the files' directories; empty fields take DefaultDirs'.
	Dirs Dirs
	// Engine runs the WireGuard devices (default: a wgtunnel.Daemon, one
	// daemon process per interface, which outlives the service).
	Engine wgtunnel.Engine
	// UAPIDir is where the daemons' UAPI sockets are (default
	// /var/run/wireguard); status is read there.
	UAPIDir string
	// NoFirewall brings default routes up without the nftables firewall
	// (wgtunnel.Options.NoFirewall).
	NoFirewall bool
	// Logger receives what the library reports ("[#]" lines, warnings).
	Logger *slog.Logger
	// Interval is how often the Host looks for files and daemons that came
	// or went (default 1 s).
	Interval time.Duration
	// OVPNStartTimeout bounds how long an OpenVPN tunnel may take to come
	// up (default 60 s).
	OVPNStartTimeout time.Duration
}

// Host is the service.Host of the machine's tunnels. It is safe for
// concurrent use.
type Host struct {
	cfg  Config // defaults applied; immutable
	log  *slog.Logger
	eng  wgtunnel.Engine
	uapi *service.UAPIHost // reads a running WireGuard tunnel's state

	// ownEngine is whether Close releases eng; immutable.
	ownEngine bool

	mu      sync.Mutex
	entries map[string]*entry // every tunnel by name; guarded by mu
	// reloadMu serialises reloads (reload.go); taken before mu.
	reloadMu sync.Mutex
	publish  func(service.Event) // guarded by mu; nil before Watch and after stop

	fleetMu sync.Mutex           // guards fleets; taken after mu, never before
	fleets  map[string]*fleetRun // the fleet agents the service runs, by tunnel (fleet.go)
	// fleetLooked is set after the first look: only the fleet gateways
	// found running then (the service restarted) get the service's agent.
	fleetLooked bool
}

var _ service.Host = (*Host)(nil)

// New returns a Host over the files of cfg.Dirs. It reads them now and
// finds the WireGuard tunnels already up (their daemons answer), which it
// reports up without bringing them up again.
func New(cfg Config) *Host {
	def := DefaultDirs()
	cfg.Dirs.WireGuard = cmp.Or(cfg.Dirs.WireGuard, def.WireGuard)
	cfg.Dirs.Gateways = cmp.Or(cfg.Dirs.Gateways, def.Gateways)
	cfg.Dirs.OpenVPNClients = cmp.Or(cfg.Dirs.OpenVPNClients, def.OpenVPNClients)
	cfg.Dirs.OpenVPNServers = cmp.Or(cfg.Dirs.OpenVPNServers, def.OpenVPNServers)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.OVPNStartTimeout = cmp.Or(cfg.OVPNStartTimeout, time.Minute)
	h := &Host{cfg: cfg, log: cfg.Logger, eng: cfg.Engine, uapi: service.NewUAPIHost(cfg.UAPIDir), entries: map[string]*entry{}}
	if h.eng == nil {
		h.eng, h.ownEngine = &wgtunnel.Daemon{}, true
	}
	h.look()
	return h
}

// Close stops the OpenVPN tunnels, which run in this process and cannot
// outlive it (the library removes their routes and DNS), and releases the
// engine the Host opened. It leaves the WireGuard tunnels up: their daemons
// outlive the service, which finds them again when it restarts.
func (h *Host) Close() error {
	h.mu.Lock()
	var runs []*ovpnRun
	for _, e := range h.entries {
		if e.ovpn != nil {
			runs = append(runs, e.ovpn)
		}
	}
	h.mu.Unlock()
	for _, r := range runs {
		r.stop()
	}
	h.closeFleets()
	if h.ownEngine {
		return h.eng.Close()
	}
	return nil
}

// List returns every tunnel, sorted by name.
func (h *Host) List() []service.Tunnel {
	h.mu.Lock()
	snaps := make([]entry, 0, len(h.entries))
	for _, e := range h.entries {
		snaps = append(snaps, *e)
	}
	h.mu.Unlock()
	slices.SortFunc(snaps, func(a, b entry) int { return cmp.Compare(a.name, b.name) })
	out := make([]service.Tunnel, len(snaps))
	for i := range snaps {
		out[i] = h.tunnelOf(&snaps[i])
	}
	return out
}

// Get returns one tunnel.
func (h *Host) Get(name string) (service.Tunnel, bool) {
	h.mu.Lock()
	e, ok := h.entries[name]
	var snap entry
	if ok {
		snap = *e
	}
	h.mu.Unlock()
	if !ok {
		return service.Tunnel{}, false
	}
	return h.tunnelOf(&snap), true
}

// tunnelOf builds the API's view of a copy of an entry, asking the
// running tunnel for its details (outside the Host's lock).
func (h *Host) tunnelOf(e *entry) service.Tunnel {
	t := service.Tunnel{Name: e.name, Kind: e.kind, State: e.state, Error: e.err, Addresses: []netip.Prefix{}, Peers: []service.Peer{}, Config: e.path}
	if e.iface != e.name {
		t.Interface = e.iface
	}
	if e.state != service.StateUp && e.state != service.StateStopping && e.state != service.StateReconnecting {
		return t
	}
	switch e.kind {
	case service.KindWireGuard, service.KindGateway:
		rt, ok := h.uapi.Get(e.iface)
		if !ok {
			return t
		}
		rt.Name, rt.Kind, rt.State, rt.Error, rt.Interface, rt.Config = t.Name, t.Kind, t.State, t.Error, t.Interface, t.Config
		for i := range rt.Peers {
			rt.Peers[i].Name = e.names[rt.Peers[i].PublicKey]
		}
		if rt.Addresses == nil {
			rt.Addresses = []netip.Prefix{}
		}
		if rt.Peers == nil {
			rt.Peers = []service.Peer{}
		}
		if e.kind == service.KindGateway {
			rt.Fleet = h.fleetOf(e.name, e.iface)
		}
		return rt
	default:
		if st, ok := ovpnStatus(e.path); ok {
			fillOVPN(&t, st)
		}
		return t
	}
}

// ovpnStatus finds the status file this process publishes for the
// OpenVPN configuration path.
func ovpnStatus(path string) (ovpntunnel.TunnelStatus, bool) {
	abs, _ := filepath.Abs(path)
	sts, _ := ovpntunnel.Status()
	for _, st := range sts {
		if st.PID == os.Getpid() && st.Config == abs {
			return st, true
		}
	}
	return ovpntunnel.TunnelStatus{}, false
}

// fillOVPN copies an OpenVPN tunnel's status into t: its addresses and,
// as peers, the server (client tunnel) or the clients (server tunnel).
func fillOVPN(t *service.Tunnel, st ovpntunnel.TunnelStatus) {
	for _, a := range []string{st.Address, st.Address6} {
		if p, err := netip.ParsePrefix(a); err == nil {
			t.Addresses = append(t.Addresses, p)
		}
	}
	endpoint := func(s string) *netip.AddrPort {
		if ap, err := netip.ParseAddrPort(s); err == nil {
			return &ap
		}
		return nil
	}
	since := func(at time.Time) *time.Time {
		if at.IsZero() {
			return nil
		}
		at = at.UTC()
		return &at
	}
	if st.Kind == ovpntunnel.KindClient {
		t.Peers = append(t.Peers, service.Peer{CommonName: "server", Endpoint: endpoint(st.Remote), LatestHandshake: since(st.Since), RxBytes: st.RxBytes, TxBytes: st.TxBytes})
	}
	for _, c := range st.Clients {
		p := service.Peer{CommonName: c.CommonName, Endpoint: endpoint(c.Remote), LatestHandshake: since(c.Since), RxBytes: c.RxBytes, TxBytes: c.TxBytes}
		for _, a := range []string{c.Address, c.Address6} {
			if ad, err := netip.ParseAddr(a); err == nil {
				p.AllowedIPs = append(p.AllowedIPs, netip.PrefixFrom(ad, ad.BitLen()))
			}
		}
		t.Peers = append(t.Peers, p)
	}
	for _, p := range t.Peers {
		t.RxBytes += p.RxBytes
		t.TxBytes += p.TxBytes
	}
}
