package host

import (
	"runtime"
	"testing"

	"github.com/wirelane/wirelane/internal/control/service"
)

// TestOVPNCountersCarryThreads: an OpenVPN tunnel runs in the service's
// process, so its wirelane_engine_gomaxprocs gauge is this process's
// GOMAXPROCS, for a client and for a server.
func TestOVPNCountersCarryThreads(t *testing.T) {
	var c ovpnCounters
	for _, kind := range []service.Kind{service.KindOpenVPNClient, service.KindOpenVPNServer} {
		found := false
		for _, ec := range c.counters("t", kind, nil) {
			if ec.Name == "engine_gomaxprocs" {
				found = true
				if ec.Value != float64(runtime.GOMAXPROCS(0)) || ec.Tunnel != "t" || ec.Help == "" {
					t.Errorf("%s: %+v, want GOMAXPROCS %d", kind, ec, runtime.GOMAXPROCS(0))
				}
			}
		}
		if !found {
			t.Errorf("%s: no engine_gomaxprocs", kind)
		}
	}
}
