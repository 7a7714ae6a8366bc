package service

// A gateway in a fleet (docs/gateway.md#fleet) carries its agent's state in
// Tunnel.Fleet, and these metrics, per gateway tunnel:
//
//	wirelane_fleet_sites{tunnel}           records the agent knows (its own too)
//	wirelane_fleet_sites_in_sync{tunnel}   of them, those the device holds as asked
//	wirelane_fleet_conflicts{tunnel}       records refused (conflicts, bad records)
//	wirelane_fleet_store_reachable{tunnel} 1 while the store answers, 0 while
//	                                       the gateway keeps its last state
//	wirelane_fleet_agent_running{tunnel}   1 while the agent process runs

import "github.com/prometheus/client_golang/prometheus"

// FleetStatus is the state of a gateway's fleet agent, as its status file
// says.
type FleetStatus struct {
	// Prefix is the fleet's etcd key prefix; Site this gateway's site.
	Prefix string `json:"prefix"`
	Site   string `json:"site"`
	// AgentRunning is false when the agent that wrote the status is gone
	// (the rest is then its last word).
	AgentRunning bool `json:"agent_running"`
	// StoreReachable is false while etcd does not answer; StoreError
	// says why.
	StoreReachable bool   `json:"store_reachable"`
	StoreError     string `json:"store_error,omitempty"`
	// Published is true while this site's record is in the store;
	// PublishError says why not (a name taken by another key, say).
	Published    bool   `json:"published"`
	PublishError string `json:"publish_error,omitempty"`
	Known        int    `json:"known"`
	InSync       int    `json:"in_sync"`
	Conflicts    int    `json:"conflicts"`
	// Sites are the records the agent saw, with their state.
	Sites []FleetSite `json:"sites"`
}

// FleetSite is one record of a fleet and what this gateway made of it.
type FleetSite struct {
	Name      string   `json:"name"`
	PublicKey string   `json:"public_key,omitempty"`
	Location  string   `json:"location,omitempty"`
	Endpoint  string   `json:"endpoint,omitempty"`
	Networks  []string `json:"networks,omitempty"`
	// State is self, active, via (through its location's leader),
	// conflict or bad record; Reason says why it is refused.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	InSync bool   `json:"in_sync"`
}

var (
	descFleetSites     = prometheus.NewDesc("wirelane_fleet_sites", "Site records the gateway's fleet agent knows, its own included.", []string{"tunnel"}, nil)
	descFleetInSync    = prometheus.NewDesc("wirelane_fleet_sites_in_sync", "Site records the gateway's device holds as they ask.", []string{"tunnel"}, nil)
	descFleetConflicts = prometheus.NewDesc("wirelane_fleet_conflicts", "Site records refused: conflicts and bad records.", []string{"tunnel"}, nil)
	descFleetStore     = prometheus.NewDesc("wirelane_fleet_store_reachable", "1 while the fleet's store answers, 0 while the gateway keeps its last state.", []string{"tunnel"}, nil)
	descFleetAgent     = prometheus.NewDesc("wirelane_fleet_agent_running", "1 while the gateway's fleet agent runs.", []string{"tunnel"}, nil)
)

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// collectFleet sends the fleet metrics of a gateway tunnel.
func collectFleet(ch chan<- prometheus.Metric, t *Tunnel) {
	f := t.Fleet
	send(ch, descFleetSites, prometheus.GaugeValue, float64(f.Known), t.Name)
	send(ch, descFleetInSync, prometheus.GaugeValue, float64(f.InSync), t.Name)
	send(ch, descFleetConflicts, prometheus.GaugeValue, float64(f.Conflicts), t.Name)
	send(ch, descFleetStore, prometheus.GaugeValue, b2f(f.StoreReachable), t.Name)
	send(ch, descFleetAgent, prometheus.GaugeValue, b2f(f.AgentRunning), t.Name)
}
