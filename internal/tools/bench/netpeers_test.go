package bench

import (
	"math"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestPeerAddrAndIndex(t *testing.T) {
	for _, i := range []int{0, 1, 255, 256, 999} {
		a := peerAddr(i)
		got, ok := peerIndex(a, 1000)
		if !ok || got != i {
			t.Errorf("peerIndex(peerAddr(%d) = %v) = %d, %v", i, a, got, ok)
		}
	}
	if got := peerAddr(256).String(); got != "10.89.2.0" {
		t.Errorf("peerAddr(256) = %s, want 10.89.2.0", got)
	}
	for _, a := range []string{"10.89.0.1", "10.89.0.255", "10.89.4.232", "::1", "10.90.1.0"} {
		if i, ok := peerIndex(netip.MustParseAddr(a), 1000); ok {
			t.Errorf("peerIndex(%s) = %d, want none of 1000 peers", a, i)
		}
	}
	if i, ok := peerIndex(netip.MustParseAddr("::ffff:10.89.1.5"), 10); !ok || i != 5 {
		t.Errorf("IPv4-mapped peer address: %d, %v", i, ok)
	}
}

func TestSlowestShare(t *testing.T) {
	for _, tc := range []struct {
		counts []uint64
		want   float64
	}{
		{nil, 0},
		{[]uint64{0, 0}, 0},
		{[]uint64{10, 10, 10}, 1},
		{[]uint64{5, 15}, 0.5},     // fair share 10
		{[]uint64{0, 100, 200}, 0}, // a starved peer
	} {
		if got := slowestShare(tc.counts); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("slowestShare(%v) = %v, want %v", tc.counts, got, tc.want)
		}
	}
}

func TestNetpeersWindow(t *testing.T) {
	for n, want := range map[int]int{0: DefaultWindow, 1: DefaultWindow, 100: DefaultWindow / 100, 1000: 2, 100000: 2} {
		if got := netpeersWindow(n); got != want {
			t.Errorf("netpeersWindow(%d) = %d, want %d", n, got, want)
		}
	}
}

const procStatSample = "4242 (wireguard-go) S 1 4242 4242 0 -1 4194560 1234 0 0 0 731 229 0 0 20 0 9 0 123456 1234567 890 18446744073709551615 1 1 0 0 0 0 0 0 2143420159 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

func TestParseProcStatCPU(t *testing.T) {
	got, err := parseProcStatCPU([]byte(procStatSample))
	if err != nil || got != 731+229 {
		t.Errorf("parseProcStatCPU = %d, %v; want 960", got, err)
	}
	// A command name with spaces and a parenthesis is skipped whole.
	odd := strings.Replace(procStatSample, "(wireguard-go)", "(a) b (c)", 1)
	if got, err := parseProcStatCPU([]byte(odd)); err != nil || got != 960 {
		t.Errorf("odd command name: %d, %v; want 960", got, err)
	}
	for _, bad := range []string{"", "4242 wireguard-go S 1", "1 (x) S 1 2 3", strings.Replace(procStatSample, " 731 ", " -1 ", 1),
		strings.Replace(procStatSample, " 731 229 ", " 18446744073709551615 1 ", 1)} {
		if _, err := parseProcStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseProcStatCPU(%q): no error", bad)
		}
	}
}

func FuzzParseProcStatCPU(f *testing.F) {
	f.Add([]byte(procStatSample))
	f.Add([]byte("1 ((()) R 0 0 0 0 0 0 0 0 0 0 5 6"))
	f.Add([]byte(")"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseProcStatCPU(b)
		if err == nil && !strings.Contains(string(b), ")") {
			t.Errorf("parsed %d from a line without the command name's ')'", v)
		}
	})
}

func TestNetTargets(t *testing.T) {
	r := &Report{}
	cas := netpeersCase(100)
	for _, v := range []float64{1, 1.2, 0.8} {
		r.Add(SectionNetpeers, cas, MetricGbps, EngineWireguardGo, HigherIsBetter, v)
	}
	for _, v := range []float64{2.5, 2.2, 1.9} {
		r.Add(SectionNetpeers, cas, MetricGbps, EngineWirelane, HigherIsBetter, v)
	}
	for _, v := range []float64{0.4, 0.6, 0.7} {
		r.Add(SectionNetpeers, cas, MetricSlowestShare, EngineWirelane, HigherIsBetter, v)
	}
	r.Add(SectionOpenVPN, "UDP, TCP up", MetricGbps, EngineWirelane, HigherIsBetter, 4.4)
	r.Add(SectionOpenVPN, "UDP, TCP up", MetricGbps, EngineOpenVPN, HigherIsBetter, 0.8)
	r.Add(SectionOpenVPN, "UDP, TCP down", MetricGbps, EngineWirelane, HigherIsBetter, 4)
	r.Add(SectionOpenVPN, "UDP, TCP down", MetricGbps, EngineOpenVPN, HigherIsBetter, 1)
	r.Add(SectionOpenVPN, "TCP, flood ping", MetricRoundTrips, EngineWirelane, HigherIsBetter, 9000)
	r.Add(SectionOpenVPN, "TCP, flood ping", MetricRoundTrips, EngineOpenVPN, HigherIsBetter, 4000)
	r.Add(SectionNetns, CaseTCP1, MetricGbps, EngineVeth, HigherIsBetter, 10)
	r.Add(SectionNetns, CaseTCP1, MetricGbps, EngineWirelane, HigherIsBetter, 5.1)
	r.Add(SectionNetns, CaseTCP32, MetricGbps, EngineWirelane, HigherIsBetter, 5.9)
	r.Add(SectionNetns, CaseTCP32, MetricGbps, EngineWireguardGo, HigherIsBetter, 2)
	r.Add(SectionNetns, CasePing, MetricRoundTrips, EngineWirelane, HigherIsBetter, 7000)
	r.Add(SectionNetns, CasePing, MetricRoundTrips, EngineWireguardGo, HigherIsBetter, 4400)
	got := map[string]Target{}
	for _, tg := range r.Targets() {
		got[tg.Name] = tg
	}
	for name, want := range map[string]struct {
		state    TargetState
		measured string
	}{
		"netpeers 100 peers via gateway":                        {Met, "2.20x"},
		"netpeers 100 peers via gateway, slowest peer's share":  {NotMet, "min 0.4000 (median 0.6000)"}, // one repeat below 0.5
		"netpeers 1000 peers via gateway":                       {NotMeasured, ""},
		"netpeers 1000 peers via gateway, slowest peer's share": {NotMeasured, ""},
		"openvpn UDP, TCP up":                                   {Met, "5.50x"},
		"openvpn UDP, TCP down":                                 {NotMet, "4.00x"},
		"openvpn TCP, TCP up":                                   {NotMeasured, ""},
		"openvpn TCP, flood ping":                               {Met, "2.25x"},
		"netns TCP 1 stream of plain veth":                      {Met, "0.51x"},
		"netns TCP 32 streams":                                  {NotMet, "2.95x"},
		"netns TCP 4 streams":                                   {NotMeasured, ""},
		"netns flood ping round trips":                          {NotMet, "1.59x"},
	} {
		tg, ok := got[name]
		if !ok {
			t.Errorf("no target %q", name)
			continue
		}
		if tg.State != want.state || tg.Measured != want.measured {
			t.Errorf("target %q: %s (%q), want %v (%q)", name, tg.Status(), tg.Measured, want.state, want.measured)
		}
	}
	// The OpenVPN rows are compared with OpenVPN 2.6, not wireguard-go.
	for _, rw := range r.rows() {
		if rw.section == SectionOpenVPN && rw.cas == "UDP, TCP up" && rw.engine == EngineWirelane && rw.vsWG != "5.50x" {
			t.Errorf("openvpn row ratio %q, want 5.50x (against %s)", rw.vsWG, EngineOpenVPN)
		}
	}
}

func TestParseCounts(t *testing.T) {
	got, err := ParseCounts(" 100,1000 ")
	if err != nil || len(got) != 2 || got[0] != 100 || got[1] != 1000 {
		t.Errorf("ParseCounts(100,1000) = %v, %v", got, err)
	}
	for in, want := range map[string]string{"": `"" at offset 0`, "100,,5": `"" at offset 4`, "10,x": `"x" at offset 3`, "0": `"0"`, "-3": `"-3"`} {
		if _, err := ParseCounts(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseCounts(%q) error %v, want it to name %s", in, err, want)
		}
	}
	cfg := QuickConfig()
	cfg.NetPeers = []int{maxNetPeers + 1}
	if err := cfg.Validate(); err == nil {
		t.Error("a netpeers count past the address range validates")
	}
}

func FuzzParseCounts(f *testing.F) {
	for _, s := range []string{"100,1000", "", "1,,2", " 7 ", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseCounts(s)
		if err != nil {
			return
		}
		if len(got) != strings.Count(s, ",")+1 {
			t.Errorf("ParseCounts(%q) = %v: not one count per item", s, got)
		}
		for _, n := range got {
			if n < 1 {
				t.Errorf("ParseCounts(%q) = %v: a count below 1", s, got)
			}
		}
	})
}

// needNetSections skips a test of the netpeers or openvpn section unless
// asked for: each builds binaries and runs real daemons for about a
// minute on two cores.
func needNetSections(t *testing.T, tools ...string) {
	t.Helper()
	if os.Getenv("WIRELANE_BENCH_NET") == "" {
		t.Skip("builds daemons and runs them for about a minute: set WIRELANE_BENCH_NET=1")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and TUN devices")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s on PATH", tool)
		}
	}
}

// quickSection runs one section in quick mode, checks that every planned
// progress step was taken and that nothing is left behind.
func quickSection(t *testing.T, section string) *Report {
	t.Helper()
	cfg := QuickConfig()
	cfg.Duration = time.Second
	cfg.Sections = []string{section}
	steps := 0
	r, err := Run(cfg, "test", func(int, int, string) { steps++ })
	if err != nil {
		t.Fatal(err)
	}
	if want := plannedSteps(cfg); steps != want {
		t.Errorf("%d progress steps, planned %d", steps, want)
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), "wlb"+netnsTag()+"-") {
		t.Errorf("namespaces left behind:\n%s", out)
	}
	return r
}

func TestNetpeersQuick(t *testing.T) {
	needNetSections(t, "ip", "wg", "go")
	r := quickSection(t, SectionNetpeers)
	cas := netpeersCase(QuickConfig().NetPeers[0])
	for _, e := range []string{EngineWireguardGo, EngineWirelane} {
		for _, metric := range []string{MetricGbps, MetricGatewayCPUPerGB, MetricPeersCPUPerGB} {
			if m := r.Find(SectionNetpeers, cas, metric, e); m == nil || !(m.Median() > 0) || math.IsInf(m.Median(), 0) {
				t.Errorf("%s %s %s: %v", e, cas, metric, m)
			}
		}
		if m := r.Find(SectionNetpeers, cas, MetricSlowestShare, e); m == nil || !(m.Median() >= 0 && m.Median() <= 1) {
			t.Errorf("%s %s slowest share: %v, want within 0..1", e, cas, m)
		}
	}
}

func TestOpenVPNQuick(t *testing.T) {
	needNetSections(t, "ip", "openvpn", "iperf3", "ping", "go")
	r := quickSection(t, SectionOpenVPN)
	for _, c := range openvpnCases {
		metric := MetricGbps
		if c.ping {
			metric = MetricRoundTrips
		}
		for _, im := range openvpnImpls {
			if m := r.Find(SectionOpenVPN, c.name, metric, im.engine); m == nil || !(m.Median() > 0) || math.IsInf(m.Median(), 0) {
				t.Errorf("%s %s: %v", im.engine, c.name, m)
			}
		}
	}
}

// TestGenTUNDuplicatesDoNotStallTheLoop: a receiver that counts more
// packets than its sender handed out (duplicates through a gateway) leaves
// nothing in flight; before, the count wrapped and Read spun for ever.
func TestGenTUNDuplicatesDoNotStallTheLoop(t *testing.T) {
	pkt, err := ipv4UDPPacket(100, peerAddr(0), netpeersGW)
	if err != nil {
		t.Fatal(err)
	}
	snd, rcv := newGenTUN("s", 1420, pkt, nil), newGenTUN("r", 1420, nil, nil)
	snd.closeLoop(rcv, 4, time.Hour)
	defer snd.Close()
	snd.start()
	bufs, sizes := make([][]byte, 4), make([]int, 4)
	for i := range bufs {
		bufs[i] = make([]byte, 200)
	}
	if n, err := snd.Read(bufs, sizes, 0); n != 4 || err != nil {
		t.Fatalf("first Read = %d, %v; want the whole window", n, err)
	}
	dup := [][]byte{pkt}
	for range 10 { // 10 deliveries of 4 packets sent
		rcv.Write(dup, 0)
	}
	if n, err := snd.Read(bufs, sizes, 0); n != 4 || err != nil {
		t.Fatalf("Read after duplicates = %d, %v; want the whole window again", n, err)
	}
}

func TestCleanupsRunOnInterruptOnce(t *testing.T) {
	ran := map[string]int{}
	removeA := addCleanup(func() { ran["a"]++ })
	addCleanup(func() { ran["b"]++ })
	removeA() // torn down the ordinary way: not again on Interrupt
	Interrupt()
	Interrupt()
	if ran["a"] != 0 || ran["b"] != 1 {
		t.Errorf("cleanups ran %v, want only b, once", ran)
	}
	// Registered after the interrupt: run at once, nothing left behind.
	addCleanup(func() { ran["c"]++ })
	if ran["c"] != 1 {
		t.Errorf("cleanup registered after Interrupt ran %d times, want 1", ran["c"])
	}
	cleanups.mu.Lock()
	cleanups.done = false // later tests of this package set up namespaces again
	cleanups.mu.Unlock()
}

func TestNetpeersEndpoint(t *testing.T) {
	for i, want := range map[int]string{0: "10.91.0.1", 254: "10.91.0.255", 255: "10.91.1.0", 999: "10.91.3.232"} {
		if got := netpeersEndpoint(i).String(); got != want {
			t.Errorf("netpeersEndpoint(%d) = %s, want %s", i, got, want)
		}
	}
	if !netip.MustParsePrefix(netpeersEndpointNet).Contains(netpeersEndpoint(maxNetPeers - 1)) {
		t.Errorf("the last peer's endpoint %s is outside %s", netpeersEndpoint(maxNetPeers-1), netpeersEndpointNet)
	}
}

// TestPeerLoopCredit: a peer may send its window, no more until
// deliveries come back (and only once the room is a whole run); packets in
// flight with nothing delivered for the loss timeout are written off (then
// after twice the wait), and written-off packets that arrive after all are
// given back.
func TestPeerLoopCredit(t *testing.T) {
	const window, timeout = 4, 50 * time.Millisecond
	var l peerLoop
	t0 := time.Unix(1000, 0)
	if c := l.credit(t0, window, 1, timeout); c != window {
		t.Fatalf("fresh loop: credit %d, want %d", c, window)
	}
	l.sent.Store(4)
	l.progressAt = t0
	if c := l.credit(t0.Add(10*time.Millisecond), window, 1, timeout); c != 0 {
		t.Fatalf("full window: credit %d, want 0", c)
	}
	l.delivered.Store(3)
	if c := l.credit(t0.Add(20*time.Millisecond), window, 1, timeout); c != 3 {
		t.Fatalf("3 delivered: credit %d, want 3", c)
	}
	l.sent.Store(7)
	l.progressAt = t0.Add(20 * time.Millisecond)
	if c := l.credit(t0.Add(69*time.Millisecond), window, 1, timeout); c != 0 || l.offs.Load() != 0 {
		t.Fatalf("before the timeout: credit %d, %d write-offs; want 0, 0", c, l.offs.Load())
	}
	if c := l.credit(t0.Add(70*time.Millisecond), window, 1, timeout); c != window || l.offs.Load() != 1 {
		t.Fatalf("at the timeout: credit %d, %d write-offs; want %d, 1", c, l.offs.Load(), window)
	}
	// Sent again, lost again: the next write-off waits twice as long.
	l.sent.Store(11)
	l.progressAt = t0.Add(70 * time.Millisecond)
	if c := l.credit(t0.Add(169*time.Millisecond), window, 1, timeout); c != 0 {
		t.Fatalf("second wait, before 100ms: credit %d, want 0", c)
	}
	if c := l.credit(t0.Add(170*time.Millisecond), window, 1, timeout); c != window || l.offs.Load() != 2 {
		t.Fatalf("second wait at 100ms: credit %d, %d write-offs; want %d, 2", c, l.offs.Load(), window)
	}
	// All 8 written-off packets arrive late: nothing is in flight but the
	// 0 sent since, and the wait is back to the timeout.
	l.delivered.Store(11)
	if c := l.credit(t0.Add(171*time.Millisecond), window, 1, timeout); c != window || l.writtenOff != 0 || l.wait != 0 {
		t.Fatalf("late arrivals: credit %d, written off %d, wait %v; want %d, 0, 0", c, l.writtenOff, l.wait, window)
	}
	// With a run of the whole window, a peer waits until all of it is
	// delivered, and a lost packet is written off after the timeout.
	var w peerLoop
	w.sent.Store(4)
	w.progressAt = t0
	w.delivered.Store(3)
	if c := w.credit(t0.Add(time.Millisecond), window, window, timeout); c != 0 {
		t.Fatalf("run of 4, 3 delivered: credit %d, want 0", c)
	}
	if c := w.credit(t0.Add(51*time.Millisecond), window, window, timeout); c != window || w.offs.Load() != 1 {
		t.Fatalf("run of 4, one lost: credit %d, %d write-offs; want %d, 1", c, w.offs.Load(), window)
	}
	// Duplicates (more delivered than sent) leave nothing in flight.
	l.delivered.Store(20)
	if c := l.credit(t0.Add(172*time.Millisecond), window, 1, timeout); c != window {
		t.Fatalf("duplicates: credit %d, want %d", c, window)
	}
}

func TestParseUDPDrops(t *testing.T) {
	table := `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  126: 0100590A:0009 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 55501 2 0000000000000000 17
  900: 00000000:CA6C 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 55502 2 0000000000000000 1234
  901: 00000000:CA6D 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 55503 2 0000000000000000 99
`
	gw, sink := parseUDPDrops(table, netpeersPort, netpeersSinkPort)
	if gw != 1234 || sink != 17 {
		t.Errorf("parseUDPDrops = %d, %d; want 1234, 17", gw, sink)
	}
	if gw, sink := parseUDPDrops("garbage\n\n1: x y", netpeersPort, netpeersSinkPort); gw != 0 || sink != 0 {
		t.Errorf("garbage: %d, %d", gw, sink)
	}
}

// TestGSOCmsgsLayout: the UDP_SEGMENT control message follows IP_PKTINFO
// where the kernel's CMSG_NXTHDR looks for it.
func TestGSOCmsgsLayout(t *testing.T) {
	var c gsoCmsgs
	if off := int(unsafe.Offsetof(c.seg)); off != unix.CmsgSpace(unix.SizeofInet4Pktinfo) {
		t.Errorf("UDP_SEGMENT at offset %d, want %d", off, unix.CmsgSpace(unix.SizeofInet4Pktinfo))
	}
	if got, want := int(unsafe.Sizeof(c)), unix.CmsgSpace(unix.SizeofInet4Pktinfo)+unix.CmsgSpace(2); got != want {
		t.Errorf("control data %d bytes, want %d", got, want)
	}
	if netpeersDatagram != 1452 || gsoSegments*netpeersDatagram > 65535-28 {
		t.Errorf("datagram %d bytes, %d per GSO message: want 1452, within 64 KiB", netpeersDatagram, gsoSegments)
	}
}
