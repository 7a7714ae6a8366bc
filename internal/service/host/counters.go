package host

// The engines' own counters for /metrics (service.CounterSource): a
// WireGuard tunnel's from its daemon (the UAPI get=1 with counters), an
// OpenVPN tunnel's from the engine in this process.

import (
	"cmp"
	"runtime"
	"slices"
	"sync/atomic"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/ovpntunnel"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/server"
)

// ovpnCounters are an OpenVPN tunnel's counters kept by the Host (the
// engines' own are read from the server's Stats).
type ovpnCounters struct {
	srv atomic.Pointer[server.Server] // the running server (kind openvpn-server); nil before it exists
	// completed and failed count a client's handshakes that reached
	// CONNECTED and the attempts whose step failed; for a server,
	// completed counts the clients that connected (its failed handshakes
	// are the server's own Stats.FailedHandshakes).
	completed, failed atomic.Uint64
	// left counts a server's clients that left, timed out or were
	// replaced.
	left atomic.Uint64
}

// clientPhase counts one of a client's phases.
func (c *ovpnCounters) clientPhase(ev client.Event) {
	switch {
	case ev.Err != nil:
		c.failed.Add(1)
	case ev.State == client.StateConnected:
		c.completed.Add(1)
	}
}

// serverEvent counts a server's client arriving or leaving.
func (c *ovpnCounters) serverEvent(ev server.Event) {
	switch ev.Kind {
	case server.ClientConnected:
		c.completed.Add(1)
	case server.ClientDisconnected:
		c.left.Add(1)
	}
}

const (
	helpOVPNHandshakes = "OpenVPN handshakes, by outcome (completed: a client reached CONNECTED, or a server's client pushed its configuration; failed: a client's attempt whose step failed, or a server's rejected handshake, by reason in openvpn_handshakes_rejected_total)."
	helpOVPNLeft       = "OpenVPN server clients that left, timed out or were replaced."
)

// counters returns the tunnel's counters.
// st is a client tunnel's last published status (nil when there is none
// yet).
func (c *ovpnCounters) counters(tunnel string, kind service.Kind, st *ovpntunnel.TunnelStatus) []service.EngineCounter {
	hs := func(outcome string, v uint64) service.EngineCounter {
		return service.EngineCounter{Tunnel: tunnel, Name: "openvpn_handshakes_total", Help: helpOVPNHandshakes, Labels: [][2]string{{"outcome", outcome}}, Value: float64(v)}
	}
	failed := c.failed.Load()
	s := c.srv.Load()
	if kind == service.KindOpenVPNServer && s != nil {
		failed = s.Stats().FailedHandshakes.Total()
	}
	out := []service.EngineCounter{hs("completed", c.completed.Load()), hs("failed", failed),
		// The tunnel runs in this process: its threads are ours.
		service.EngineGOMAXPROCS(tunnel, runtime.GOMAXPROCS(0))}
	if kind == service.KindOpenVPNClient && st != nil {
		out = append(out, service.OVPNClientCounters(tunnel, service.OVPNClientStats{DroppedControl: st.DroppedControl, DroppedData: st.DroppedData,
			DroppedCompressed: st.DroppedCompressed, DecompressFailed: st.DecompressFailed, TUNErrors: st.TUNErrors, SocketSendErrors: st.SocketSendErrors})...)
	}
	if kind == service.KindOpenVPNServer {
		out = append(out, service.EngineCounter{Tunnel: tunnel, Name: "openvpn_clients_left_total", Help: helpOVPNLeft, Value: float64(c.left.Load())})
		if s != nil {
			out = append(out, service.OVPNServerCounters(tunnel, s.Stats())...)
		}
	}
	return out
}

// EngineCounters returns the counters of every tunnel that runs, in name
// order: WireGuard's from their daemons, OpenVPN's from this process.
func (h *Host) EngineCounters() []service.EngineCounter {
	type running struct {
		name, iface, path string
		kind              service.Kind
		run               *ovpnRun
	}
	h.mu.Lock()
	var rs []running
	for _, e := range h.entries {
		if e.state == service.StateUp || e.state == service.StateReconnecting {
			rs = append(rs, running{e.name, e.iface, e.path, e.kind, e.ovpn})
		}
	}
	h.mu.Unlock()
	slices.SortFunc(rs, func(a, b running) int { return cmp.Compare(a.name, b.name) })
	var out []service.EngineCounter
	for _, r := range rs {
		switch r.kind {
		case service.KindWireGuard, service.KindGateway:
			out = append(out, h.uapi.Counters(r.iface, r.name)...)
		default:
			if r.run != nil {
				var st *ovpntunnel.TunnelStatus
				if r.kind == service.KindOpenVPNClient {
					if s, ok := ovpnStatus(r.path); ok {
						st = &s
					}
				}
				out = append(out, r.run.ctr.counters(r.name, r.kind, st)...)
			}
		}
	}
	return out
}

var _ service.CounterSource = (*Host)(nil)
