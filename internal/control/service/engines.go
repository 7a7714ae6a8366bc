package service

// What the engines count today, as EngineCounters, for a Host's
// EngineCounters method to return. Each function only loads counters the
// engine already keeps (atomics it increments anyway): a scrape costs the
// data path nothing.
//
// The WireGuard engine's counters travel over UAPI (wgcounters.go); the
// OpenVPN tunnels' Host-kept ones are internal/service/host's.

import "github.com/wirelane/wirelane/ovpn/server"

// OVPNServerCounters returns an OpenVPN server's drop counters:
// wirelane_openvpn_dropped_packets_total{tunnel,reason} with the reasons
// bad_control, bad_data, spoofed, no_route, rx_full, no_cookie,
// replies_withheld, compressed (dropped under allow-compression no) and
// decompress_failed,
// wirelane_tun_errors_total{tunnel},
// wirelane_socket_errors_total{tunnel,op="send"}, and its failed handshakes:
// wirelane_openvpn_handshakes_rejected_total{tunnel,reason}, one series
// per reason of server.HandshakeFailureReasons (zeros too).
func OVPNServerCounters(tunnel string, st *server.Stats) []EngineCounter {
	drop := func(reason string, v uint64) EngineCounter { return ovpnDrop(tunnel, reason, v) }
	out := []EngineCounter{
		drop("bad_control", st.BadControl.Load()),
		drop("bad_data", st.BadData.Load()),
		drop("spoofed", st.Spoofed.Load()),
		drop("no_route", st.NoRoute.Load()),
		drop("rx_full", st.RxFull.Load()),
		drop("no_cookie", st.NoCookie.Load()),
		drop("replies_withheld", st.RepliesWithheld.Load()),
		drop("compressed", st.Compressed.Load()),
		drop("decompress_failed", st.DecompressFailed.Load()),
		tunErrors(tunnel, st.TUNErrors.Load()),
		sendErrors(tunnel, st.SocketSendErrors.Load()),
	}
	st.FailedHandshakes.Each(func(reason string, n uint64) {
		out = append(out, EngineCounter{Tunnel: tunnel, Name: "openvpn_handshakes_rejected_total", Help: helpOVPNRejected, Labels: [][2]string{{"reason", reason}}, Value: float64(n)})
	})
	return out
}

// helpOVPNRejected is the help of wirelane_openvpn_handshakes_rejected_total.
const helpOVPNRejected = "OpenVPN client handshakes the server gave up on, by reason (tls_wrap: a reset failing tls-auth/tls-crypt, key_refused: a tls-crypt-v2 key refused, max_clients, rate_limit, tls, verify: the certificate refused, auth: AUTH_FAILED, timeout: hand-window, other); the stateless checks count packets."

// OVPNClientStats are the counters of an OpenVPN client tunnel that
// OVPNClientCounters exports (from its status file).
type OVPNClientStats struct {
	// DroppedControl, DroppedData, DroppedCompressed, DecompressFailed
	// and SocketSendErrors are the session's, since it last connected.
	DroppedControl, DroppedData, DroppedCompressed, DecompressFailed uint64
	SocketSendErrors                                                 uint64
	// TUNErrors runs since the tunnel started.
	TUNErrors uint64
}

// OVPNClientCounters returns an OpenVPN client's counters:
// wirelane_openvpn_dropped_packets_total{tunnel,reason} with the reasons
// bad_control, bad_data, compressed and decompress_failed, as a server
// counts them, wirelane_socket_errors_total{tunnel,op="send"} and
// wirelane_tun_errors_total{tunnel}.
func OVPNClientCounters(tunnel string, st OVPNClientStats) []EngineCounter {
	return []EngineCounter{ovpnDrop(tunnel, "bad_control", st.DroppedControl), ovpnDrop(tunnel, "bad_data", st.DroppedData),
		ovpnDrop(tunnel, "compressed", st.DroppedCompressed), ovpnDrop(tunnel, "decompress_failed", st.DecompressFailed),
		tunErrors(tunnel, st.TUNErrors), sendErrors(tunnel, st.SocketSendErrors)}
}

// sendErrors is one wirelane_socket_errors_total{op="send"} counter.
func sendErrors(tunnel string, v uint64) EngineCounter {
	return EngineCounter{Tunnel: tunnel, Name: "socket_errors_total", Help: helpSocketErrors, Labels: [][2]string{{"op", "send"}}, Value: float64(v)}
}

// tunErrors is one wirelane_tun_errors_total counter.
func tunErrors(tunnel string, v uint64) EngineCounter {
	return EngineCounter{Tunnel: tunnel, Name: "tun_errors_total", Help: helpTUNErrors, Value: float64(v)}
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
