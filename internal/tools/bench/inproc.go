package bench

// In-process throughput: two devices of one engine in this process, talking
// over real loopback UDP sockets, each on an in-memory TUN.
//
//	genTUN(A) --Read--> device A --UDP 127.0.0.1--> device B --Write--> genTUN(B)
//	 prepared packet,    seal, send   (kernel)       receive, open   counts packets,
//	 every buffer                                                    checks content
//
// Closed loop (the default), A's Read hands out packets only while fewer
// than Config.Window are in flight, that is read from A and not yet written
// to B: a sender cannot outrun its receiver and flood the loopback socket,
// so both engines are measured at the rate the whole tunnel sustains.
// Open loop (Config.OpenLoop), A's Read never waits. The case with one
// packet in flight is always a closed loop of one: request/response.
//
// One run: fresh key pairs and devices, peers configured through UAPI, the
// generator started, the first delivered packet awaited (handshake done),
// Warmup, then a window of Duration bracketed by snapshots of the clock,
// getrusage and runtime.MemStats. Figures are what B received in the window.

import (
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"time"
)

var (
	inprocSrc = netip.MustParseAddr("10.77.0.1")
	inprocDst = netip.MustParseAddr("10.77.0.2")
)

// inprocMTU is the TUN MTU in every in-process run.
const inprocMTU = 1420

// inprocCase is one packet size and generator.
type inprocCase struct {
	name string
	size int
	// oneInFlight runs the closed loop with a single packet in flight,
	// whatever Config says: request/response traffic, where every batch
	// through the tunnel holds one packet and so every per-batch cost
	// (the route among them) is a per-packet cost.
	oneInFlight bool
}

var inprocCases = []inprocCase{
	{name: CaseMTU, size: 1420},
	{name: CaseSmall, size: 64},
	{name: CaseSmallOne, size: 64, oneInFlight: true},
}

// config is cfg as this case runs it.
func (c inprocCase) config(cfg Config) Config {
	if c.oneInFlight {
		cfg.OpenLoop, cfg.Window = false, 1
		if cfg.LossTimeout <= 0 {
			cfg.LossTimeout = DefaultLossTimeout
		}
	}
	return cfg
}

// inprocResult is what one run measured.
type inprocResult struct {
	packets, bytes uint64
	generated      uint64
	window         time.Duration
	cpu            time.Duration
	mallocs        uint64
	writeOffs      uint64 // closed loop: timeouts that wrote in-flight packets off
	late           uint64 // closed loop: written-off packets that arrived after all
}

func (r inprocResult) gbps() float64 { return float64(r.bytes) * 8 / r.window.Seconds() / 1e9 }
func (r inprocResult) mpps() float64 { return float64(r.packets) / r.window.Seconds() / 1e6 }

// cpuPerGB is CPU seconds of the whole process per GB delivered.
func (r inprocResult) cpuPerGB() float64 { return r.cpu.Seconds() / (float64(r.bytes) / 1e9) }

func (r inprocResult) allocsPerPacket() float64 { return float64(r.mallocs) / float64(r.packets) }

// lossPct is the share of generated packets that did not arrive.
func (r inprocResult) lossPct() float64 {
	if r.generated == 0 || r.packets >= r.generated {
		return 0
	}
	return 100 * float64(r.generated-r.packets) / float64(r.generated)
}

// runInproc measures one engine at one packet size for one window of
// cfg.Duration after cfg.Warmup, with the generator cfg selects.
func runInproc(eng engine, size int, cfg Config) (res inprocResult, err error) {
	warmup, window := cfg.Warmup, cfg.Duration
	pkt, err := ipv4UDPPacket(size, inprocSrc, inprocDst)
	if err != nil {
		return res, err
	}
	ka, err := newKeyPair()
	if err != nil {
		return res, err
	}
	kb, err := newKeyPair()
	if err != nil {
		return res, err
	}
	runtime.GC() // leftovers of the previous run must not be collected on this one's bill

	ta := newGenTUN("wlbench-a", inprocMTU, pkt, nil)
	tb := newGenTUN("wlbench-b", inprocMTU, nil, pkt)
	if !cfg.OpenLoop {
		ta.closeLoop(tb, cfg.Window, cfg.LossTimeout)
	}
	da, err := eng.make(ta, ka.priv)
	if err != nil {
		return res, err
	}
	defer da.Close()
	db, err := eng.make(tb, kb.priv)
	if err != nil {
		return res, err
	}
	defer db.Close()
	defer ta.stop()

	pa, err := listenPort(da)
	if err != nil {
		return res, fmt.Errorf("%s sender: %w", eng.name, err)
	}
	pb, err := listenPort(db)
	if err != nil {
		return res, fmt.Errorf("%s receiver: %w", eng.name, err)
	}
	if err := da.IpcSet(peerConfig(kb.pub, pb, inprocDst)); err != nil {
		return res, fmt.Errorf("%s sender: configure peer: %w", eng.name, err)
	}
	if err := db.IpcSet(peerConfig(ka.pub, pa, inprocSrc)); err != nil {
		return res, fmt.Errorf("%s receiver: configure peer: %w", eng.name, err)
	}

	ta.start()
	deadline := time.Now().Add(10 * time.Second)
	for tb.rxPackets.Load() == 0 {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%s: no packet crossed the tunnel within 10s (handshake failed?)", eng.name)
		}
		time.Sleep(2 * time.Millisecond)
	}
	time.Sleep(warmup)

	p0, b0, g0, w0, l0 := tb.rxPackets.Load(), tb.rxBytes.Load(), ta.txPackets.Load(), ta.writeOffs(), ta.lateArrivals()
	s0, err := takeSnapshot()
	if err != nil {
		return res, err
	}
	time.Sleep(window)
	p1, b1, g1, w1, l1 := tb.rxPackets.Load(), tb.rxBytes.Load(), ta.txPackets.Load(), ta.writeOffs(), ta.lateArrivals()
	s1, err := takeSnapshot()
	if err != nil {
		return res, err
	}
	ta.stop()

	if bad := tb.rxBad.Load(); bad != 0 {
		return res, fmt.Errorf("%s: %d delivered packets differ from the generated packet", eng.name, bad)
	}
	res = inprocResult{
		packets:   p1 - p0,
		bytes:     b1 - b0,
		generated: g1 - g0,
		window:    s1.at.Sub(s0.at),
		cpu:       s1.cpu - s0.cpu,
		mallocs:   s1.mallocs - s0.mallocs,
		writeOffs: w1 - w0,
		late:      l1 - l0,
	}
	if res.packets == 0 {
		return res, fmt.Errorf("%s: no packet delivered during the %v window", eng.name, window)
	}
	return res, nil
}

// peerConfig is the UAPI text that adds one peer at 127.0.0.1:port whose
// allowed IP is addr/32.
func peerConfig(pub []byte, port uint16, addr netip.Addr) string {
	return fmt.Sprintf("public_key=%x\nendpoint=127.0.0.1:%d\nallowed_ip=%s/32\n", pub, port, addr)
}

// inprocSection runs every case for every engine, alternating engines
// within each repeat and rotating which goes first.
func inprocSection(r *Report, cfg Config, p *progress) error {
	engines := make([]engine, 0, len(cfg.Engines))
	for _, name := range cfg.Engines {
		e, err := engineByName(name)
		if err != nil {
			return err
		}
		engines = append(engines, e)
	}
	writeOffs, late := map[string]uint64{}, map[string]uint64{}
	for rep := 0; rep < cfg.Repeats; rep++ {
		for _, c := range inprocCases {
			for i := range engines {
				eng := engines[(i+rep)%len(engines)]
				p.step(fmt.Sprintf("inproc %s %s, repeat %d/%d", c.name, eng.name, rep+1, cfg.Repeats))
				res, err := runInproc(eng, c.size, c.config(cfg))
				if err != nil {
					return fmt.Errorf("inproc %s: %w", c.name, err)
				}
				r.Add(SectionInproc, c.name, MetricGbps, eng.name, HigherIsBetter, res.gbps())
				r.Add(SectionInproc, c.name, MetricMpps, eng.name, HigherIsBetter, res.mpps())
				r.Add(SectionInproc, c.name, MetricCPUPerGB, eng.name, LowerIsBetter, res.cpuPerGB())
				r.Add(SectionInproc, c.name, MetricAllocs, eng.name, LowerIsBetter, res.allocsPerPacket())
				r.Add(SectionInproc, c.name, MetricLoss, eng.name, LowerIsBetter, res.lossPct())
				writeOffs[eng.name] += res.writeOffs
				late[eng.name] += res.late
			}
		}
	}
	if !cfg.OpenLoop {
		var parts []string
		for _, e := range engines {
			parts = append(parts, fmt.Sprintf("%s %d (%d packets late)", e.name, writeOffs[e.name], late[e.name]))
		}
		r.Note("inproc write-offs (the generator waited %v without a delivery and gave up on the packets in flight; late: written off, then delivered after all), summed over all measured windows: %s", cfg.LossTimeout, strings.Join(parts, ", "))
	}
	return nil
}
