package service

// GET /v1/tunnels/{name}/counters: one tunnel's engine counters as JSON,
// the same values /metrics exports (CounterSource), for a client that
// does not parse the exposition (a tray showing a tunnel's errors).

import (
	"fmt"
	"net/http"
)

// Counter is one engine counter of a tunnel: the metric's name (with its
// wirelane_ prefix), its labels besides tunnel, and its value.
type Counter struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// tunnelCounters answers GET /v1/tunnels/{name}/counters: 404 for no
// such tunnel, [] for one that is not running or whose engine keeps none.
func (s *Server) tunnelCounters(w http.ResponseWriter, name string) {
	if _, ok := s.host.Get(name); !ok {
		writeError(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("no tunnel named %q", name)})
		return
	}
	out := []Counter{}
	if cs, ok := s.host.(CounterSource); ok {
		for _, ec := range cs.EngineCounters() {
			if ec.Tunnel != name || engineMetric(ec) == nil {
				continue // another tunnel's, or one /metrics would not show either
			}
			c := Counter{Name: "wirelane_" + ec.Name, Value: ec.Value}
			for _, l := range ec.Labels {
				if c.Labels == nil {
					c.Labels = map[string]string{}
				}
				c.Labels[l[0]] = l[1]
			}
			out = append(out, c)
		}
	}
	writeJSON(w, http.StatusOK, out)
}
