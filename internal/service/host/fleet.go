package host

// Gateways in a fleet: their agent runs in `wirelane gateway up` (the
// foreground process that lives as long as the gateway), not in the
// service; the service shows the agent's state from its status file and
// refuses to bring such a gateway up itself, which would start it without
// its agent.

import (
	"errors"
	"syscall"

	"github.com/wirelane/wirelane/internal/control/service"
	"github.com/wirelane/wirelane/internal/tunnel/fleet"
	"github.com/wirelane/wirelane/internal/tunnel/gateway"
)

// fleetOf reads the fleet agent's status of gateway interface iface; nil
// when no agent ever ran it.
func fleetOf(iface string) *service.FleetStatus {
	st, found, err := fleet.ReadStatus(iface)
	if err != nil || !found {
		return nil
	}
	f := &service.FleetStatus{Prefix: st.Prefix, Site: st.Site, StoreReachable: st.StoreReachable, StoreError: st.StoreError,
		Published: st.Published, PublishError: st.PublishError, Known: st.Known, InSync: st.InSync, Conflicts: st.Conflicts,
		Sites: []service.FleetSite{}}
	if st.PID > 0 {
		err := syscall.Kill(st.PID, 0)
		f.AgentRunning = err == nil || errors.Is(err, syscall.EPERM)
	}
	for _, s := range st.Sites {
		f.Sites = append(f.Sites, service.FleetSite{Name: s.Name, PublicKey: s.PublicKey, Location: s.Location, Endpoint: s.Endpoint,
			Networks: s.Networks, State: s.State, Reason: s.Reason, InSync: s.InSync})
	}
	return f
}

// refuseFleet is the error for Up of a gateway file with a [fleet] table.
func refuseFleet(path string) error {
	g, err := gateway.LoadFile(path)
	if err != nil || g.Fleet == nil {
		return nil
	}
	return &service.ConfigError{File: path, Msg: "this gateway is in fleet " + g.Fleet.Prefix + ": its agent runs in `wirelane gateway up " + path + "` (or the wirelane-fleet@ unit), which the service does not start"}
}
