package service

// What the engines count today, as EngineCounters, for a Host's
// EngineCounters method to return. Each function only loads counters the
// engine already keeps (atomics it increments anyway): a scrape costs the
// data path nothing.
//
// The WireGuard engine's counters travel over UAPI (wgcounters.go); the
// OpenVPN tunnels' Host-kept ones are internal/service/host's. Missing (see
// docs/api.md "Engine counters"): an OpenVPN client's TUN errors.

import "github.com/wirelane/wirelane/ovpn/server"

// OVPNServerCounters returns an OpenVPN server's drop counters:
// wirelane_openvpn_dropped_packets_total{tunnel,reason} with the reasons
// bad_control, bad_data, spoofed, no_route and rx_full, and
// wirelane_tun_errors_total{tunnel}.
func OVPNServerCounters(tunnel string, st *server.Stats) []EngineCounter {
	drop := func(reason string, v uint64) EngineCounter { return ovpnDrop(tunnel, reason, v) }
	return []EngineCounter{
		drop("bad_control", st.BadControl.Load()),
		drop("bad_data", st.BadData.Load()),
		drop("spoofed", st.Spoofed.Load()),
		drop("no_route", st.NoRoute.Load()),
		drop("rx_full", st.RxFull.Load()),
		{Tunnel: tunnel, Name: "tun_errors_total", Help: helpTUNErrors, Value: float64(st.TUNErrors.Load())},
	}
}

// OVPNClientCounters returns an OpenVPN client's drop counters (its
// session's, since it last connected):
// wirelane_openvpn_dropped_packets_total{tunnel,reason} with the reasons
// bad_control and bad_data, as a server counts them.
func OVPNClientCounters(tunnel string, badControl, badData uint64) []EngineCounter {
	return []EngineCounter{ovpnDrop(tunnel, "bad_control", badControl), ovpnDrop(tunnel, "bad_data", badData)}
}

// ovpnDrop is one wirelane_openvpn_dropped_packets_total counter.
func ovpnDrop(tunnel, reason string, v uint64) EngineCounter {
	const help = "Packets an OpenVPN tunnel dropped, by reason (a client's since it last connected)."
	return EngineCounter{Tunnel: tunnel, Name: "openvpn_dropped_packets_total", Help: help, Labels: [][2]string{{"reason", reason}}, Value: float64(v)}
}

// EngineGOMAXPROCS is wirelane_engine_gomaxprocs{tunnel}, a gauge: the
// threads running Go code in the process that carries the tunnel (for an
// OpenVPN tunnel hosted by the service, the service's own).
func EngineGOMAXPROCS(tunnel string, n int) EngineCounter {
	return EngineCounter{Tunnel: tunnel, Name: "engine_gomaxprocs", Help: helpGOMAXPROCS, Value: float64(n)}
}
