package service

// A tunnel's engine counters as `wirelane show` prints them: the troubles
// only (drops, refused handshakes, failed TUN and socket calls), one line
// per kind, values at zero left out, so that a healthy tunnel prints no
// line at all. The handshakes that went well, the route publications and
// the engine's gauges are for /metrics.

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The kinds of trouble CounterLines prints, in its order, and the metrics
// (with the wirelane_ prefix) each is made of. A metric with a label
// prints its label values (reason, op) beside their counts; one without
// prints its count.
var counterLineKinds = []struct {
	what    string
	metrics []string
}{
	{"dropped", []string{"wirelane_wireguard_dropped_packets_total", "wirelane_openvpn_dropped_packets_total"}},
	{"rejected handshakes", []string{"wirelane_wireguard_handshakes_rejected_total"}},
	{"failed handshakes", []string{"wirelane_openvpn_handshakes_rejected_total"}},
	{"tun errors", []string{"wirelane_tun_errors_total"}},
	{"socket errors", []string{"wirelane_socket_errors_total"}},
}

// CounterLines returns the lines `wirelane show` prints of a tunnel's
// engine counters (GET /v1/tunnels/{name}/counters): "dropped: malformed
// 20, unknown_index 5", "rejected handshakes: mac1 3", "failed handshakes:
// verify 1" (an OpenVPN server's), "tun errors: 2", "socket errors: send
// 1"; within a line by label value. Counters at zero are left out, and so
// is a line with none left: no trouble, no line.
func CounterLines(cs []Counter) []string {
	var out []string
	for _, k := range counterLineKinds {
		var parts []string
		var total float64
		for _, c := range cs {
			if c.Value <= 0 || !slices.Contains(k.metrics, c.Name) {
				continue
			}
			if label := counterLabel(c); label != "" {
				parts = append(parts, fmt.Sprintf("%s %s", label, formatCount(c.Value)))
			} else {
				total += c.Value
			}
		}
		if len(parts) == 0 && total == 0 {
			continue
		}
		sort.Strings(parts)
		if total > 0 {
			parts = append([]string{formatCount(total)}, parts...)
		}
		out = append(out, k.what+": "+strings.Join(parts, ", "))
	}
	return out
}

// counterLabel is what tells a counter from the others of its metric: its
// reason, op or outcome label ("" when it has none).
func counterLabel(c Counter) string {
	for _, l := range []string{"reason", "op", "outcome"} {
		if v := c.Labels[l]; v != "" {
			return v
		}
	}
	return ""
}

// formatCount prints a counter's value (counters are whole numbers).
func formatCount(v float64) string { return fmt.Sprintf("%.0f", v) }
