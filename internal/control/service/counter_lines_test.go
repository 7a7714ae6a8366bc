package service

import (
	"reflect"
	"testing"

	"github.com/wirelane/wirelane/ovpn/server"
)

// TestCounterLines: a healthy tunnel prints no line; troubles print one
// line per kind, in a fixed order, only their nonzero values, by label
// value; the engines' own counters for a server (OVPNServerCounters, its
// drops by reason among them) come out as `show` prints them.
func TestCounterLines(t *testing.T) {
	if l := CounterLines(nil); l != nil {
		t.Errorf("no counters: %q", l)
	}
	healthy := []Counter{
		{Name: "wirelane_wireguard_dropped_packets_total", Labels: map[string]string{"reason": "malformed"}},
		{Name: "wirelane_wireguard_handshakes_completed_total", Labels: map[string]string{"role": "initiator"}, Value: 4},
		{Name: "wirelane_engine_gomaxprocs", Value: 2},
		{Name: "wirelane_tun_errors_total"},
	}
	if l := CounterLines(healthy); l != nil {
		t.Errorf("a healthy tunnel: %q, want no line", l)
	}
	wg := []Counter{
		{Name: "wirelane_socket_errors_total", Labels: map[string]string{"op": "send"}, Value: 1},
		{Name: "wirelane_socket_errors_total", Labels: map[string]string{"op": "receive"}},
		{Name: "wirelane_wireguard_dropped_packets_total", Labels: map[string]string{"reason": "unknown_index"}, Value: 5},
		{Name: "wirelane_wireguard_dropped_packets_total", Labels: map[string]string{"reason": "malformed"}, Value: 20},
		{Name: "wirelane_wireguard_handshakes_rejected_total", Labels: map[string]string{"reason": "mac1"}, Value: 3},
		{Name: "wirelane_tun_errors_total", Value: 2},
		{Name: "wirelane_wireguard_handshake_initiations_total", Value: 9},
	}
	want := []string{"dropped: malformed 20, unknown_index 5", "rejected handshakes: mac1 3", "tun errors: 2", "socket errors: send 1"}
	if l := CounterLines(wg); !reflect.DeepEqual(l, want) {
		t.Errorf("WireGuard: %q, want %q", l, want)
	}

	var st server.Stats
	st.Spoofed.Add(7)
	st.SocketSendErrors.Add(1)
	cs := []Counter{{Name: "wirelane_openvpn_handshakes_rejected_total", Labels: map[string]string{"reason": "verify"}, Value: 1}}
	for _, ec := range OVPNServerCounters("ovs", &st) {
		c := Counter{Name: "wirelane_" + ec.Name, Value: ec.Value}
		for _, l := range ec.Labels {
			c.Labels = map[string]string{l[0]: l[1]}
		}
		cs = append(cs, c)
	}
	want = []string{"dropped: spoofed 7", "failed handshakes: verify 1", "socket errors: send 1"}
	if l := CounterLines(cs); !reflect.DeepEqual(l, want) {
		t.Errorf("OpenVPN server: %q, want %q", l, want)
	}
}
