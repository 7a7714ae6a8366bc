package service

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wirelane/wirelane/ovpn/server"
)

// TestTunnelCountersEndpoint: GET /v1/tunnels/{name}/counters shows the
// tunnel's engine counters (its own only, with their labels), [] for a
// tunnel without any, 404 for no tunnel, 405 for another method, and
// 403 for a caller without rights. (The real engines' counts are the
// end-to-end tests': internal/testkit/e2e service_counters_test.go.)
func TestTunnelCountersEndpoint(t *testing.T) {
	var st server.Stats
	st.TUNErrors.Add(3)
	h := NewFakeHost()
	h.SetCounters(append(OVPNServerCounters("ovs", &st), EngineCounter{Tunnel: "other", Name: "tun_errors_total", Value: 9}))
	ts := startService(t, h, Config{}, roleOperator)
	code, body, _ := ts.do("GET", "/v1/tunnels/ovs/counters", "")
	if code != 200 {
		t.Fatalf("GET counters: %d %s", code, body)
	}
	var cs []Counter
	if err := json.Unmarshal(body, &cs); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	found := map[string]bool{}
	for _, c := range cs {
		switch {
		case c.Name == "wirelane_tun_errors_total":
			found["tun"] = c.Value == 3 && len(c.Labels) == 0
		case c.Name == "wirelane_openvpn_handshakes_rejected_total" && c.Labels["reason"] == "verify":
			found["verify"] = c.Value == 0
		case c.Name == "wirelane_openvpn_dropped_packets_total" && c.Labels["reason"] == "spoofed":
			found["spoofed"] = true
		}
		if c.Value == 9 {
			t.Errorf("another tunnel's counter shown: %+v", c)
		}
	}
	if !found["tun"] || !found["verify"] || !found["spoofed"] {
		t.Errorf("counters %s lack some of tun_errors 3, rejected verify 0, dropped spoofed: %v", body, found)
	}
	if code, body, _ := ts.do("GET", "/v1/tunnels/wg0/counters", ""); code != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("a tunnel without counters: %d %s, want 200 []", code, body)
	}
	if code, _, _ := ts.do("GET", "/v1/tunnels/nope/counters", ""); code != 404 {
		t.Errorf("no such tunnel: %d, want 404", code)
	}
	if code, _, _ := ts.do("POST", "/v1/tunnels/ovs/counters", ""); code != 405 {
		t.Errorf("POST counters: %d, want 405", code)
	}
	nobody := startService(t, h, Config{}, roleNone)
	if code, _, _ := nobody.do("GET", "/v1/tunnels/ovs/counters", ""); code != 403 {
		t.Errorf("a caller without rights: %d, want 403", code)
	}
}
