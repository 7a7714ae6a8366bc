package service

import (
	"strings"
	"testing"
)

// fleetHost is the fake host with a fleet agent's state on wg0, as the
// real host reads it from the agent's status file.
type fleetHost struct{ *FakeHost }

func (h fleetHost) withFleet(t Tunnel) Tunnel {
	if t.Name == "wg0" {
		t.Fleet = &FleetStatus{Prefix: "/wirelane/fleets/prod", Site: "berlin", AgentRunning: true, StoreReachable: false, StoreError: "context deadline exceeded",
			Published: true, Known: 3, InSync: 2, Conflicts: 1,
			Sites: []FleetSite{{Name: "berlin", State: "self", InSync: true}, {Name: "lisbon", State: "active", InSync: true}, {Name: "evil", State: "conflict", Reason: "network 10.20.0.0/24 overlaps 10.20.0.0/16 of this site"}}}
	}
	return t
}

func (h fleetHost) List() []Tunnel {
	ts := h.FakeHost.List()
	for i := range ts {
		ts[i] = h.withFleet(ts[i])
	}
	return ts
}

func (h fleetHost) Get(name string) (Tunnel, bool) {
	t, ok := h.FakeHost.Get(name)
	return h.withFleet(t), ok
}

func TestFleetInTheAPIAndMetrics(t *testing.T) {
	h := fleetHost{NewFakeHost()}
	ts := startService(t, h, Config{}, roleOperator)
	h.Up(t.Context(), "wg0")
	code, body, _ := ts.do("GET", "/v1/tunnels/wg0", "")
	if code != 200 {
		t.Fatalf("GET /v1/tunnels/wg0: %d %s", code, body)
	}
	tn := decodeJSON[Tunnel](t, body)
	if tn.Fleet == nil || tn.Fleet.Known != 3 || tn.Fleet.StoreReachable || len(tn.Fleet.Sites) != 3 || tn.Fleet.Sites[2].State != "conflict" {
		t.Fatalf("fleet in the API: %+v", tn.Fleet)
	}
	_, body, _ = ts.do("GET", "/metrics", "")
	for _, want := range []string{
		`wirelane_fleet_sites{tunnel="wg0"} 3`,
		`wirelane_fleet_sites_in_sync{tunnel="wg0"} 2`,
		`wirelane_fleet_conflicts{tunnel="wg0"} 1`,
		`wirelane_fleet_store_reachable{tunnel="wg0"} 0`,
		`wirelane_fleet_agent_running{tunnel="wg0"} 1`,
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("the exposition lacks %s", want)
		}
	}
}
