package bench

import "fmt"

// ratioTarget judges median(engine)/median(base) >= least for one metric.
func (r *Report) ratioTarget(name, section, cas, metric, engine, base string, least float64) Target {
	t := Target{Name: name, Want: fmt.Sprintf(">= %.2fx %s", least, base)}
	if v, ok := r.Ratio(section, cas, metric, engine, base); ok {
		t.Measured = fmt.Sprintf("%.2fx", v)
		t.State = judge(v >= least)
	}
	return t
}

// leastTarget judges the smallest sample of engine's metric >= least:
// every repeat must reach it.
func (r *Report) leastTarget(name, section, cas, metric, engine string, least float64) Target {
	t := Target{Name: name, Want: fmt.Sprintf(">= %.2f in every repeat", least)}
	if m := r.Find(section, cas, metric, engine); m != nil && len(m.Samples) > 0 {
		t.Measured = "min " + formatNum(m.Min()) + " (median " + formatNum(m.Median()) + ")"
		t.State = judge(m.Min() >= least)
	}
	return t
}

// Targets of the netpeers and openvpn sections (issue #22).
const (
	// MinNetpeersRatio is Wirelane's gateway throughput over
	// wireguard-go's with many peers.
	MinNetpeersRatio = 2
	// MinSlowestShare is the least fraction of its fair share the slowest
	// peer may get.
	MinSlowestShare = 0.5
	// MinOpenVPNRatio is Wirelane's OpenVPN throughput over OpenVPN 2.6's.
	MinOpenVPNRatio = 5
	// MinPingRatio is the request/response target: round trips per second
	// over the baseline's.
	MinPingRatio = 2
)

// netTargets judges the netpeers and openvpn sections.
func (r *Report) netTargets() []Target {
	var ts []Target
	for _, n := range netpeersReported {
		cas := netpeersCase(n)
		ts = append(ts,
			r.ratioTarget("netpeers "+cas, SectionNetpeers, cas, MetricGbps, EngineWirelane, EngineWireguardGo, MinNetpeersRatio),
			r.leastTarget("netpeers "+cas+", slowest peer's share", SectionNetpeers, cas, MetricSlowestShare, EngineWirelane, MinSlowestShare))
	}
	for _, c := range openvpnCases {
		if c.ping {
			ts = append(ts, r.ratioTarget("openvpn "+c.name, SectionOpenVPN, c.name, MetricRoundTrips, EngineWirelane, EngineOpenVPN, MinPingRatio))
			continue
		}
		ts = append(ts, r.ratioTarget("openvpn "+c.name, SectionOpenVPN, c.name, MetricGbps, EngineWirelane, EngineOpenVPN, MinOpenVPNRatio))
	}
	return ts
}
