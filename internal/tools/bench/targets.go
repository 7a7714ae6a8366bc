package bench

import (
	"fmt"
	"math"
)

// TargetState is whether a target was reached.
type TargetState int

// Target states.
const (
	NotMeasured TargetState = iota
	Met
	NotMet
)

// Target is one of the project's performance goals, judged on a report.
type Target struct {
	Name     string
	Want     string // the goal in words, e.g. ">= 2.00x wireguard-go"
	Measured string // the measured ratio or value
	State    TargetState
}

// Status returns "met", "not met" or "not measured".
func (t Target) Status() string {
	switch t.State {
	case Met:
		return "met"
	case NotMet:
		return "not met"
	}
	return "not measured"
}

// MaxSteadyAllocsPerPacket is the allocation rate below which the data path
// counts as allocation-free: less than one allocation per 100 packets, the
// remainder being timers and bookkeeping that do not grow with traffic.
const MaxSteadyAllocsPerPacket = 0.01

// MaxSendPathGrowth is how much the borrowed route's CPU cost per batch
// may grow from 1 to 8 sending threads and still count as flat: a quarter,
// for the noise of a shared machine.
const MaxSendPathGrowth = 1.25

// Targets judges the report against the project's goals.
func (r *Report) Targets() []Target {
	var ts []Target
	ratioAtLeast := func(name, section, cas, metric, engine, base string, min float64) {
		t := Target{Name: name, Want: fmt.Sprintf(">= %.2fx %s", min, base)}
		if v, ok := r.Ratio(section, cas, metric, engine, base); ok {
			t.Measured = fmt.Sprintf("%.2fx", v)
			t.State = judge(v >= min)
		}
		ts = append(ts, t)
	}
	ratioAtMost := func(name, section, cas, metric, engine, base string, max float64) {
		t := Target{Name: name, Want: fmt.Sprintf("<= %.2fx %s", max, base)}
		if v, ok := r.Ratio(section, cas, metric, engine, base); ok {
			t.Measured = fmt.Sprintf("%.2fx", v)
			t.State = judge(v <= max)
		}
		ts = append(ts, t)
	}
	gainAtLeast := func(name, section, cas, metric string, pct float64) {
		t := Target{Name: name, Want: fmt.Sprintf(">= %+.0f%% over %s", pct, EngineWirelaneRef)}
		if v, ok := r.Ratio(section, cas, metric, EngineWirelane, EngineWirelaneRef); ok {
			t.Measured = fmt.Sprintf("%+.1f%%", (v-1)*100)
			t.State = judge((v-1)*100 >= pct)
		}
		ts = append(ts, t)
	}

	ratioAtLeast("netns TCP 1 stream", "netns", CaseTCP1, MetricGbps, EngineWirelane, EngineWireguardGo, 2)
	ratioAtLeast("netns TCP 1 stream of plain veth", "netns", CaseTCP1, MetricGbps, EngineWirelane, EngineVeth, 0.5)
	ratioAtLeast("netns TCP 4 streams", "netns", CaseTCP4, MetricGbps, EngineWirelane, EngineWireguardGo, 3)
	ratioAtLeast("netns TCP 32 streams", "netns", CaseTCP32, MetricGbps, EngineWirelane, EngineWireguardGo, 3)
	ratioAtLeast("netns flood ping round trips", "netns", CasePing, MetricRoundTrips, EngineWirelane, EngineWireguardGo, MinPingRatio)
	ts = append(ts, r.netTargets()...)
	ratioAtLeast("in-process MTU packets", "inproc", CaseMTU, MetricGbps, EngineWirelane, EngineWireguardGo, 2)
	ratioAtLeast("in-process small packets", "inproc", CaseSmall, MetricMpps, EngineWirelane, EngineWireguardGo, 1.5)
	for _, dir := range peersDirections {
		for _, n := range []int{100, 1000} {
			ratioAtLeast(fmt.Sprintf("%d active peers, %s", n, dir), SectionPeers, peersCase(n, dir), MetricGbps, EngineWirelane, EngineWireguardGo, 2)
			// Judged on the worst repeat: no peer below half its share, ever.
			t := Target{Name: fmt.Sprintf("slowest of %d peers, %s", n, dir), Want: fmt.Sprintf(">= %.2f of its fair share, every repeat", MinFairShare)}
			if m := r.Find(SectionPeers, peersCase(n, dir), MetricFairness, EngineWirelane); m != nil && !math.IsNaN(m.Min()) {
				t.Measured = formatNum(m.Min()) + " (worst repeat)"
				t.State = judge(m.Min() >= MinFairShare)
			}
			ts = append(ts, t)
		}
	}
	for _, cas := range []string{CaseMTU, CaseSmall, CaseSmallOne} {
		t := Target{Name: "zero steady-state allocs/packet, " + cas, Want: fmt.Sprintf("< %g allocs/packet", MaxSteadyAllocsPerPacket)}
		if m := r.Find("inproc", cas, MetricAllocs, EngineWirelane); m != nil && !math.IsNaN(m.Median()) {
			t.Measured = formatNum(m.Median()) + " allocs/packet"
			t.State = judge(m.Median() < MaxSteadyAllocsPerPacket)
		}
		ts = append(ts, t)
	}
	gainAtLeast("noref over ref, in-process MTU", "inproc", CaseMTU, MetricGbps, 4)
	gainAtLeast("noref over ref, in-process small", "inproc", CaseSmall, MetricMpps, 4)
	// One packet in flight: each batch is one packet, so the route that
	// ref mode builds and locks per batch is paid per packet, as the
	// kernel's reference was.
	gainAtLeast("noref over ref, in-process 64 B, 1 in flight", "inproc", CaseSmallOne, MetricMpps, 4)
	gainAtLeast("noref over ref, netns TCP 1 stream", "netns", CaseTCP1, MetricGbps, 4)
	{
		// Flat: the borrowed route costs a batch no more with 8 threads
		// sending at once than with 1 (within MaxSendPathGrowth).
		most := sendPathThreads[len(sendPathThreads)-1]
		t := Target{Name: "noref send path flat, 1 to " + fmt.Sprint(most) + " threads", Want: fmt.Sprintf("<= %.2fx CPU ns/batch", MaxSendPathGrowth)}
		one := r.Find(SectionSendPath, sendPathCase(1), MetricCPUNsPerBatch, EngineWirelane)
		many := r.Find(SectionSendPath, sendPathCase(most), MetricCPUNsPerBatch, EngineWirelane)
		if one != nil && many != nil && one.Median() > 0 && !math.IsNaN(many.Median()) {
			v := many.Median() / one.Median()
			t.Measured = fmt.Sprintf("%.2fx", v)
			t.State = judge(v <= MaxSendPathGrowth)
		}
		ts = append(ts, t)
	}
	ratioAtLeast("handshakes/s per core", "handshake", CaseHandshake, MetricHandshakes, EngineWirelane, EngineWireguardGo, 1)
	ratioAtMost("memory/peer (heap)", "memory", CasePeers, MetricHeapPerPeer, EngineWirelane, EngineWireguardGo, 1)
	ratioAtMost("memory/peer (heap+stacks)", "memory", CasePeers, MetricTotalPerPeer, EngineWirelane, EngineWireguardGo, 1)
	return ts
}

func judge(ok bool) TargetState {
	if ok {
		return Met
	}
	return NotMet
}
