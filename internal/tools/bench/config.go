package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Sections of the suite, in the order Run executes them.
const (
	SectionInproc    = "inproc"
	SectionPeers     = "peers"
	SectionNetns     = "netns"
	SectionHandshake = "handshake"
	SectionMemory    = "memory"
	SectionBound     = "bound"
	SectionSendPath  = "sendpath"
)

// AllSections lists every section in run order.
var AllSections = []string{SectionInproc, SectionPeers, SectionNetns, SectionNetpeers, SectionOpenVPN, SectionHandshake, SectionMemory, SectionBound, SectionSendPath}

// Cases and metrics, as they appear in the table.
const (
	CaseMTU       = "1420 B"
	CaseSmall     = "64 B"
	CaseSmallOne  = "64 B, 1 in flight"
	CaseTCP1      = "TCP x1"
	CaseTCP4      = "TCP x4"
	CaseTCP4Procs = "TCP x4, 4 processes"
	CaseTCP32     = "TCP x32"
	CaseUDP       = "UDP 1392 B"
	CasePing      = "flood ping"
	CaseHandshake = "full handshake"
	CasePeers     = "peers via UAPI"
	CaseSeal      = "seal 1420 B"
	CaseOpen      = "open 1420 B"

	MetricGbps          = "Gbit/s"
	MetricMpps          = "Mpkt/s"
	MetricCPUPerGB      = "CPU s/GB"
	MetricAllocs        = "allocs/packet"
	MetricLoss          = "loss %"
	MetricHandshakes    = "handshakes/s/core"
	MetricHeapPerPeer   = "heap B/peer"
	MetricTotalPerPeer  = "heap+stack B/peer"
	MetricGBps1         = "GB/s 1 core"
	MetricGBpsAll       = "GB/s all cores"
	MetricCPUNsPerBatch = "CPU ns/batch"
	MetricRoundTrips    = "round trips/s"
)

// Config selects what Run measures and for how long.
type Config struct {
	// Duration is the measured window of one throughput run.
	Duration time.Duration
	// Warmup runs after the tunnel carries its first packet and before the
	// window opens.
	Warmup time.Duration
	// Repeats is how many times each engine is measured per case; engines
	// alternate within every repeat.
	Repeats int
	// Sections to run (see AllSections).
	Sections []string
	// Handshakes is the number of full handshakes timed per repeat.
	Handshakes int
	// Peers is the number of peers added for the memory measurement.
	Peers int
	// ActivePeers are the peer counts of the many-peers section, each a
	// case with every peer active at once.
	ActivePeers []int
	// NetPeers are the peer counts of the netpeers section.
	NetPeers []int
	// Engines compared in process; default wireguard-go, wirelane,
	// wirelane-ref.
	Engines []string
	// WireguardGoBin, WirelanedBin and WirelanedRefBin are daemon binaries
	// for the netns section; empty means build them into a temporary
	// directory. WirelanedRefBin is wirelaned built with
	// -tags wirelane_refmode (the wirelane-ref engine).
	WireguardGoBin, WirelanedBin, WirelanedRefBin string
	// Quick marks a smoke run (reported in the notes).
	Quick bool
	// OpenLoop runs the in-process generator without flow control, as
	// fast as the sending engine reads (the method before the closed
	// loop); false: closed loop with Window packets in flight at most.
	OpenLoop bool
	// Window is the most packets the closed-loop generator keeps in
	// flight (handed to the sender, not yet delivered by the receiver).
	Window int
	// LossTimeout is how long the closed-loop generator waits without a
	// delivery before it writes off the packets in flight as lost.
	LossTimeout time.Duration
}

// DefaultConfig is a full run: about five minutes on two cores.
func DefaultConfig() Config {
	return Config{
		Duration:    3 * time.Second,
		Warmup:      500 * time.Millisecond,
		Repeats:     5,
		Sections:    AllSections,
		Handshakes:  2000,
		Peers:       10000,
		ActivePeers: []int{100, 1000},
		NetPeers:    []int{100, 1000},
		Engines:     []string{EngineWireguardGo, EngineWirelane, EngineWirelaneRef},

		Window:      DefaultWindow,
		LossTimeout: DefaultLossTimeout,
	}
}

// QuickConfig is a smoke run of a few seconds: every figure is produced
// once, too briefly to mean anything but "the harness works".
func QuickConfig() Config {
	c := DefaultConfig()
	c.Duration = 150 * time.Millisecond
	c.Warmup = 50 * time.Millisecond
	c.Repeats = 1
	c.Handshakes = 100
	c.Peers = 500
	c.ActivePeers = []int{20, 200} // 1,000 handshakes alone take seconds on a busy machine
	c.NetPeers = []int{100}
	c.Quick = true
	return c
}

// GeneratorMode describes the in-process generator this configuration
// runs, for the report.
func (c Config) GeneratorMode() string {
	one := fmt.Sprintf("; %q: closed loop, one packet in flight", CaseSmallOne)
	if c.OpenLoop {
		return "open loop (unlimited: the sender reads as fast as it can, excess is dropped by the loopback socket)" + one
	}
	return fmt.Sprintf("closed loop (at most %d packets in flight; written off as lost after %v without a delivery)", c.Window, c.LossTimeout) + one
}

// Has reports whether the section is selected.
func (c Config) Has(section string) bool {
	for _, s := range c.Sections {
		if s == section {
			return true
		}
	}
	return false
}

// Validate checks the configuration for values that cannot run.
func (c Config) Validate() error {
	if c.Duration <= 0 {
		return fmt.Errorf("duration %v: must be positive", c.Duration)
	}
	if c.Warmup < 0 {
		return fmt.Errorf("warmup %v: must not be negative", c.Warmup)
	}
	if c.Repeats < 1 {
		return fmt.Errorf("repeats %d: must be at least 1", c.Repeats)
	}
	if c.Handshakes < 1 {
		return fmt.Errorf("handshakes %d: must be at least 1", c.Handshakes)
	}
	if !c.OpenLoop && c.Window < 1 {
		return fmt.Errorf("window %d: must be at least 1 packet (or run open loop)", c.Window)
	}
	if !c.OpenLoop && c.LossTimeout <= 0 {
		return fmt.Errorf("loss timeout %v: must be positive", c.LossTimeout)
	}
	for _, n := range c.ActivePeers {
		if n < 1 || n > MaxActivePeers {
			return fmt.Errorf("active peers %d: must be 1..%d", n, MaxActivePeers)
		}
	}
	if c.Peers < 1 {
		return fmt.Errorf("peers %d: must be at least 1", c.Peers)
	}
	for _, n := range c.NetPeers {
		if n < 1 || n > maxNetPeers {
			return fmt.Errorf("netpeers count %d: must be 1 to %d", n, maxNetPeers)
		}
	}
	for _, e := range c.Engines {
		if _, err := engineByName(e); err != nil {
			return err
		}
	}
	return nil
}

// ParseSections parses a comma-separated list of section names such as
// "inproc,bound". Empty items are ignored; an unknown name is an error that
// names its position. An empty list selects every section.
func ParseSections(s string) ([]string, error) {
	var out []string
	pos := 0
	for _, item := range strings.Split(s, ",") {
		name := strings.TrimSpace(item)
		if name != "" {
			known := false
			for _, k := range AllSections {
				if k == name {
					known = true
				}
			}
			if !known {
				return nil, fmt.Errorf("section %q at offset %d: unknown (want some of %s)", name, pos, strings.Join(AllSections, ","))
			}
			dup := false
			for _, o := range out {
				dup = dup || o == name
			}
			if !dup {
				out = append(out, name)
			}
		}
		pos += len(item) + 1
	}
	if len(out) == 0 {
		return AllSections, nil
	}
	return out, nil
}

// ParseCounts parses a comma-separated list of positive counts such as
// "100,1000". An empty item or one that is not a positive whole number is
// an error that names its position; the list must not be empty.
func ParseCounts(s string) ([]int, error) {
	var out []int
	pos := 0
	for _, item := range strings.Split(s, ",") {
		t := strings.TrimSpace(item)
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("count %q at offset %d: want a whole number of at least 1", t, pos)
		}
		out = append(out, n)
		pos += len(item) + 1
	}
	return out, nil
}
