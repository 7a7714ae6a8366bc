package client

import (
	"cmp"
	"context"

	"github.com/wirelane/wirelane/internal/control/service"
)

// InterfaceCounters returns the engine counters of the tunnel of ts (a
// List answer) that runs on interface iface (`wirelane show` knows the
// tunnels by device); false when none of ts runs on it, or the service
// did not answer.
func (c *Client) InterfaceCounters(ctx context.Context, ts []service.Tunnel, iface string) ([]service.Counter, bool) {
	for _, t := range ts {
		if cmp.Or(t.Interface, t.Name) != iface || (t.State != service.StateUp && t.State != service.StateReconnecting) {
			continue
		}
		cs, err := c.Counters(ctx, t.Name)
		return cs, err == nil
	}
	return nil, false
}
