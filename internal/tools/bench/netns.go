package bench

// Real TUN devices in network namespaces, measured with iperf3. The
// topology is the one the kernel's own WireGuard tests use:
//
//	root namespace: daemon A, daemon B, their UDP sockets on 127.0.0.1
//	     | TUN A moved into nsA              | TUN B moved into nsB
//	nsA: 10.88.E.1/24, iperf3 client  ---->  nsB: 10.88.E.2/24, iperf3 server
//
// One pair of namespaces per engine (E is its number), all set up before
// the first measurement; each repeat then runs every test on every engine
// in turn, rotating which engine goes first. The "veth" engine is a plain
// veth pair at the same MTU between its two namespaces: the bound.
//
// Daemons (wireguard-go, wirelaned) run in the foreground as children of
// this process and are stopped by their process ids; deleting a namespace
// removes the TUN moved into it.

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// netnsMTU is the MTU of every tunnel and veth interface.
const netnsMTU = 1420

// netnsSetupSteps counts the progress steps before the measurements.
const netnsSetupSteps = 2

// netnsTest is one iperf3 client invocation, or a flood ping.
type netnsTest struct {
	name string
	args []string
	udp  bool
	ping bool // ping -f instead of iperf3: request/response, one in flight
	// procs > 0: that many iperf3 clients at once, each its own process
	// with one stream (-Z) against its own server, as the kernel's
	// WireGuard selftest (netns.sh) runs parallel streams; the figure is
	// their sum. iperf3 before 3.16 runs all of -P's streams on one
	// thread, client and server.
	procs int
}

var netnsTests = []netnsTest{
	{CaseTCP1, []string{"-P", "1"}, false, false, 0},
	{CaseTCP4, []string{"-P", "4"}, false, false, 0},
	{CaseTCP4Procs, []string{"-Z"}, false, false, netnsSplitServers},
	{CaseTCP32, []string{"-P", "32"}, false, false, 0},
	{CaseUDP, []string{"-u", "-b", "0", "-l", "1392"}, true, false, 0},
	{CasePing, nil, false, true, 0},
}

// netnsSplitServers is how many extra iperf3 servers each pair runs, on
// ports netnsSplitPort+1 on, for the tests with separate processes.
const (
	netnsSplitServers = 4
	netnsSplitPort    = 5210
)

// netnsEngines lists veth first, then the tunnel engines of cfg.
func netnsEngines(cfg Config) []string {
	return append([]string{EngineVeth}, cfg.Engines...)
}

// cmdTimeout bounds every helper command.
const cmdTimeout = 60 * time.Second

// run runs a command in namespace ns ("" = this one) and returns its
// combined output; the error names the command.
func run(ns string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%q: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// lockedBuffer is a bytes.Buffer that a running process writes while the
// harness reads it.
type lockedBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// child is a background process started by the harness.
type child struct {
	cmd  *exec.Cmd
	out  lockedBuffer
	done chan struct{}
}

func startChild(env []string, args ...string) (*child, error) { return startChildIn("", env, args...) }

// startChildIn is startChild in working directory dir ("" = this one).
func startChildIn(dir string, env []string, args ...string) (*child, error) {
	c := &child{cmd: exec.Command(args[0], args[1:]...), done: make(chan struct{})}
	c.cmd.Dir = dir
	c.cmd.Env = append(os.Environ(), env...)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	c.cmd.WaitDelay = time.Second
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %q: %w", strings.Join(args, " "), err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// stop ends the process by its id (SIGTERM, then SIGKILL after 3 s).
func (c *child) stop() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(os.Interrupt)
	select {
	case <-c.done:
	case <-time.After(3 * time.Second):
		c.cmd.Process.Kill()
		<-c.done
	}
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// netnsPair is one engine's pair of namespaces and what runs in them.
type netnsPair struct {
	engine     string
	nsA, nsB   string
	ifA, ifB   string
	addrA      string // without prefix length
	addrB      string
	children   []*child
	namespaces []string
	unregister func() // from addCleanup
}

// teardown stops the children in reverse order (the iperf3 server, then
// the daemons) and deletes the namespaces with what was moved into them.
func (p *netnsPair) teardown() {
	p.unregister()
	for i := len(p.children) - 1; i >= 0; i-- {
		p.children[i].stop()
	}
	for _, ns := range p.namespaces {
		run("", "ip", "netns", "del", ns)
	}
}

// freeUDPPort returns a UDP port on 127.0.0.1 that was free a moment ago.
func freeUDPPort() (int, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// daemonArgs returns the command line of an engine's daemon for ifname.
func daemonArgs(engine string, bins netnsBins, ifname string) ([]string, error) {
	switch engine {
	case EngineWireguardGo:
		return []string{bins.wireguardGo, "-f", ifname}, nil
	case EngineWirelane:
		return []string{bins.wirelaned, "-f", ifname}, nil
	case EngineWirelaneRef:
		return []string{bins.wirelanedRef, "-f", ifname}, nil
	}
	return nil, fmt.Errorf("no daemon for engine %q", engine)
}

// netnsBins are the daemon binaries: wirelanedRef is wirelaned built with
// -tags wirelane_refmode, whose devices take the locked ref path
// (internal/sys/refmode); the product binary has no way to ask for it.
type netnsBins struct{ wireguardGo, wirelaned, wirelanedRef string }

// setupPair builds engine number idx's namespaces and link.
func setupPair(engine string, idx int, tag string, bins netnsBins, keyDir string) (p *netnsPair, err error) {
	p = &netnsPair{
		engine: engine,
		nsA:    fmt.Sprintf("wlb%s-%da", tag, idx), nsB: fmt.Sprintf("wlb%s-%db", tag, idx),
		ifA: fmt.Sprintf("wlb%s%da", tag, idx), ifB: fmt.Sprintf("wlb%s%db", tag, idx),
		addrA: fmt.Sprintf("10.88.%d.1", idx), addrB: fmt.Sprintf("10.88.%d.2", idx),
	}
	p.unregister = addCleanup(p.teardown)
	defer func() {
		if err != nil {
			p.teardown()
			err = fmt.Errorf("%s: %w", engine, err)
		}
	}()
	for _, ns := range []string{p.nsA, p.nsB} {
		if _, err := run("", "ip", "netns", "add", ns); err != nil {
			return p, err
		}
		p.namespaces = append(p.namespaces, ns)
		if _, err := run(ns, "ip", "link", "set", "lo", "up"); err != nil {
			return p, err
		}
	}
	if engine == EngineVeth {
		if _, err := run("", "ip", "link", "add", p.ifA, "type", "veth", "peer", "name", p.ifB); err != nil {
			return p, err
		}
	} else {
		if err := p.startTunnel(bins, keyDir); err != nil {
			return p, err
		}
	}
	for _, side := range []struct{ ifname, ns, addr string }{{p.ifA, p.nsA, p.addrA}, {p.ifB, p.nsB, p.addrB}} {
		steps := [][]string{
			{"", "ip", "link", "set", side.ifname, "netns", side.ns},
			{side.ns, "ip", "addr", "add", side.addr + "/24", "dev", side.ifname},
			{side.ns, "ip", "link", "set", side.ifname, "mtu", strconv.Itoa(netnsMTU), "up"},
		}
		for _, s := range steps {
			if _, err := run(s[0], s[1:]...); err != nil {
				return p, err
			}
		}
	}
	var pingErr error
	for try := 0; try < 10; try++ {
		if _, pingErr = run(p.nsA, "ping", "-c", "1", "-W", "1", p.addrB); pingErr == nil {
			break
		}
	}
	if pingErr != nil {
		return p, fmt.Errorf("tunnel carries no ping: %w", pingErr)
	}
	srv, err := startChild(nil, "ip", "netns", "exec", p.nsB, "iperf3", "-s", "-B", p.addrB)
	if err != nil {
		return p, err
	}
	p.children = append(p.children, srv)
	servers := []*child{srv}
	for k := 1; k <= netnsSplitServers; k++ {
		c, err := startChild(nil, "ip", "netns", "exec", p.nsB, "iperf3", "-s", "-B", p.addrB, "-p", strconv.Itoa(netnsSplitPort+k))
		if err != nil {
			return p, err
		}
		p.children = append(p.children, c)
		servers = append(servers, c)
	}
	time.Sleep(200 * time.Millisecond)
	for _, c := range servers {
		if c.exited() {
			return p, fmt.Errorf("iperf3 server exited: %s", c.out.String())
		}
	}
	return p, nil
}

// startTunnel starts both daemons, waits for their UAPI sockets and
// configures them with wg(8): each the other's peer at 127.0.0.1.
func (p *netnsPair) startTunnel(bins netnsBins, keyDir string) error {
	var pubs [2][]byte
	var keyFiles [2]string
	var ports [2]int
	for i, ifname := range []string{p.ifA, p.ifB} {
		args, err := daemonArgs(p.engine, bins, ifname)
		if err != nil {
			return err
		}
		c, err := startChild([]string{"LOG_LEVEL=error"}, args...)
		if err != nil {
			return err
		}
		p.children = append(p.children, c)
		if err := waitUAPI(c, ifname, args); err != nil {
			return err
		}
		k, err := newKeyPair()
		if err != nil {
			return err
		}
		pubs[i] = k.pub
		keyFiles[i] = filepath.Join(keyDir, ifname+".key")
		if err := os.WriteFile(keyFiles[i], []byte(base64.StdEncoding.EncodeToString(k.priv)+"\n"), 0o600); err != nil {
			return err
		}
		if ports[i], err = freeUDPPort(); err != nil {
			return err
		}
	}
	ifs := [2]string{p.ifA, p.ifB}
	addrs := [2]string{p.addrA, p.addrB}
	for i := range 2 {
		o := 1 - i
		if _, err := run("", "wg", "set", ifs[i], "private-key", keyFiles[i], "listen-port", strconv.Itoa(ports[i]),
			"peer", base64.StdEncoding.EncodeToString(pubs[o]),
			"endpoint", fmt.Sprintf("127.0.0.1:%d", ports[o]), "allowed-ips", addrs[o]+"/32"); err != nil {
			return err
		}
	}
	return nil
}

// iperf runs one client test from nsA to nsB for d (whole seconds, at
// least one).
func (p *netnsPair) iperf(t netnsTest, d time.Duration) (iperfResult, error) {
	res, err := iperfIn(p.nsA, p.addrB, t.args, t.udp, d)
	if err != nil {
		return res, fmt.Errorf("%s %s: %w", p.engine, t.name, err)
	}
	return res, nil
}

// iperfProcs runs t.procs iperf3 clients at once from nsA, each its own
// process against its own server in nsB, for d, and returns the sum of
// the servers' rates. When one fails, all are run again (up to three
// times), so that the sum is always of clients that ran together.
func (p *netnsPair) iperfProcs(t netnsTest, d time.Duration) (iperfResult, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	var last error
	for try := 0; try < 3; try++ {
		outs := make([]string, t.procs)
		errs := make([]error, t.procs)
		var wg sync.WaitGroup
		for k := range t.procs {
			args := append([]string{"iperf3", "-c", p.addrB, "-J", "-t", strconv.Itoa(secs),
				"-p", strconv.Itoa(netnsSplitPort + 1 + k)}, t.args...)
			wg.Go(func() { outs[k], errs[k] = run(p.nsA, args...) })
		}
		wg.Wait()
		var sum iperfResult
		last = nil
		for k := range t.procs {
			res, perr := parseIperf([]byte(outs[k]), false)
			if perr != nil {
				last = errors.Join(errs[k], perr)
				break
			}
			sum.bitsPerSecond += res.bitsPerSecond
		}
		if last == nil {
			return sum, nil
		}
		time.Sleep(300 * time.Millisecond)
	}
	return iperfResult{}, fmt.Errorf("%s %s: %w", p.engine, t.name, last)
}

// iperfIn runs one iperf3 client in namespace ns against the server on
// addr for d (whole seconds, at least one), with extra arguments.
func iperfIn(ns, addr string, extra []string, udp bool, d time.Duration) (iperfResult, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	args := append([]string{"iperf3", "-c", addr, "-J", "-t", strconv.Itoa(secs)}, extra...)
	var last error
	for try := 0; try < 3; try++ { // the server is busy for a moment after each test
		out, err := run(ns, args...)
		res, perr := parseIperf([]byte(out), udp)
		if perr == nil {
			return res, nil
		}
		last = errors.Join(err, perr)
		time.Sleep(300 * time.Millisecond)
	}
	return iperfResult{}, last
}

// floodPing sends echo requests from nsA to nsB for d (whole seconds, at
// least one), each as soon as the previous answer arrived (ping -f), and
// returns the round trips per second.
func (p *netnsPair) floodPing(d time.Duration) (float64, error) {
	rt, err := floodPingIn(p.nsA, p.addrB, d)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", p.engine, CasePing, err)
	}
	return rt, nil
}

// floodPingIn runs ping -f from namespace ns to addr for d (whole
// seconds, at least one) and returns the round trips per second.
func floodPingIn(ns, addr string, d time.Duration) (float64, error) {
	secs := max(1, int(d.Round(time.Second)/time.Second))
	out, err := run(ns, "ping", "-f", "-q", "-w", strconv.Itoa(secs), addr)
	res, perr := parsePing([]byte(out))
	if perr != nil {
		return 0, errors.Join(err, perr)
	}
	return res.roundTripsPerSecond(), nil
}

// buildDaemons builds wireguard-go, wirelaned and the ref-mode wirelaned
// into dir, unless cfg names binaries.
func buildDaemons(cfg Config, dir string) (netnsBins, error) {
	bins := netnsBins{wireguardGo: cfg.WireguardGoBin, wirelaned: cfg.WirelanedBin, wirelanedRef: cfg.WirelanedRefBin}
	mod, err := run("", "go", "env", "GOMOD")
	if err != nil {
		return bins, err
	}
	root := filepath.Dir(strings.TrimSpace(mod))
	build := func(out, pkg string, flags ...string) error {
		cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, pkg)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %w: %s", pkg, err, strings.TrimSpace(string(b)))
		}
		return nil
	}
	if bins.wireguardGo == "" {
		bins.wireguardGo = filepath.Join(dir, "wireguard-go")
		if err := build(bins.wireguardGo, "golang.zx2c4.com/wireguard"); err != nil {
			return bins, err
		}
	}
	if bins.wirelaned == "" {
		bins.wirelaned = filepath.Join(dir, "wirelaned")
		if err := build(bins.wirelaned, "./cmd/wirelaned"); err != nil {
			return bins, err
		}
	}
	if bins.wirelanedRef == "" && slices.Contains(netnsEngines(cfg), EngineWirelaneRef) {
		bins.wirelanedRef = filepath.Join(dir, "wirelaned-ref")
		if err := build(bins.wirelanedRef, "./cmd/wirelaned", "-tags", "wirelane_refmode"); err != nil {
			return bins, err
		}
	}
	return bins, nil
}

// netnsTag makes this process's namespace and interface names unique
// among concurrent runs.
func netnsTag() string { return fmt.Sprintf("%04d", os.Getpid()%10000) }

// netnsSection sets up every engine's namespaces, then alternates iperf3
// runs and flood pings between them.
func netnsSection(r *Report, cfg Config, p *progress) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root to create namespaces, TUN devices and veth pairs", ErrSkipped)
	}
	for _, tool := range []string{"ip", "wg", "iperf3", "ping", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: needs %s on PATH", ErrSkipped, tool)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("%w: needs /dev/net/tun: %v", ErrSkipped, err)
	}
	dir, err := os.MkdirTemp("", "wirelane-bench-")
	if err != nil {
		return err
	}
	defer addCleanup(func() { os.RemoveAll(dir) })()
	defer os.RemoveAll(dir)

	engines := netnsEngines(cfg)
	p.step("netns: build daemons")
	var bins netnsBins
	if len(engines) > 1 {
		if bins, err = buildDaemons(cfg, dir); err != nil {
			return err
		}
	}
	p.step("netns: set up namespaces and tunnels")
	tag := netnsTag()
	var pairs []*netnsPair
	defer func() {
		for _, pr := range pairs {
			pr.teardown()
		}
	}()
	for i, e := range engines {
		pr, err := setupPair(e, i, tag, bins, dir)
		if err != nil {
			r.Note("netns: %v (engine left out)", err)
			continue
		}
		pairs = append(pairs, pr)
	}
	if len(pairs) == 0 {
		return errors.New("no engine could be set up")
	}
	for rep := 0; rep < cfg.Repeats; rep++ {
		for _, t := range netnsTests {
			for i := range pairs {
				pr := pairs[(i+rep)%len(pairs)]
				p.step(fmt.Sprintf("netns %s %s, repeat %d/%d", t.name, pr.engine, rep+1, cfg.Repeats))
				if t.ping {
					rt, err := pr.floodPing(cfg.Duration)
					if err != nil {
						return err
					}
					r.Add(SectionNetns, t.name, MetricRoundTrips, pr.engine, HigherIsBetter, rt)
					continue
				}
				iperf := pr.iperf
				if t.procs > 0 {
					iperf = pr.iperfProcs
				}
				res, err := iperf(t, cfg.Duration)
				if err != nil {
					return err
				}
				r.Add(SectionNetns, t.name, MetricGbps, pr.engine, HigherIsBetter, res.bitsPerSecond/1e9)
				if t.udp {
					r.Add(SectionNetns, t.name, MetricLoss, pr.engine, LowerIsBetter, res.lostPercent)
				}
			}
		}
	}
	return nil
}
