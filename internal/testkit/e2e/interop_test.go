package e2e

import "testing"

// TestInteropWithWireguardGo runs Wirelane (A) against the reference
// wireguard-go (B), once with each side sending first, so that each
// initiates the handshake.
func TestInteropWithWireguardGo(t *testing.T) {
	for _, first := range []string{"wirelane initiates", "wireguard-go initiates"} {
		t.Run(first, func(t *testing.T) {
			need(t, implWirelane, "iperf3")
			need(t, implWGGo)
			p := newPair(t, implWirelane, implWGGo)
			init, resp := p.a, p.b
			if first == "wireguard-go initiates" {
				init, resp = p.b, p.a
			}
			init.ping(t, resp.v4)
			handshakeDone(t, resp, init)
			resp.ping(t, init.v6)
			init.ping(t, resp.v6)
			resp.ping(t, init.v4)
			iperf(t, p.a, p.b, p.b.v4, false, false) // Wirelane sends
			iperf(t, p.a, p.b, p.b.v4, false, true)  // wireguard-go sends
			iperf(t, p.b, p.a, p.a.v6, true, false)  // UDP towards Wirelane
		})
	}
}
