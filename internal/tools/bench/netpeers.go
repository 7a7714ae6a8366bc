package bench

// Many peers behind one gateway, through namespaces: the gateway is an
// engine's daemon with a real TUN and a real UDP socket; the peers are N
// WireGuard identities of this process (netpeersSide) whose one UDP
// socket lives in a second namespace, joined to the gateway's by a veth
// pair.
//
//	nsP (peers): pV 10.90.0.2/24              nsG (gateway): gV 10.90.0.1/24
//	  one socket, N source addresses  ==veth==>  daemon (wirelaned or wireguard-go)
//	  10.91.0.1+i (AnyIP); one sender            UDP :51820, N peers configured,
//	  seals each peer's 1420-byte packet         TUN 10.89.0.1/16 --> kernel -->
//	  (from 10.89.1.0+i to 10.89.0.1:9)          sink: UDP socket 10.89.0.1:9 in
//	  with its session, sendmmsg batches         this process, counts per source
//
// Each peer is a closed loop of its own (peerLoop): at most
// netpeersWindow(N) of its packets in flight between the sender and the
// sink, written off after Config.LossTimeout without a delivery. So every
// peer offers the same load and a peer the gateway serves slowly gets no
// more than its window through: its share of the deliveries is the
// gateway's fairness. The figures are the gateway's: what the sink
// received in the window (packets of 1420 bytes as they crossed the TUN),
// the daemon's own CPU time (user+system from /proc/PID/stat) per GB, and
// the slowest peer's deliveries as a fraction of the fair share (total/N);
// beside them the peer side's CPU per GB and, per run, where packets were
// dropped (the two sockets' drops, Wirelane's own drop counters).
//
// The peer side costs the same for every gateway engine (the same code,
// the same process, the same two CPUs), which narrows the ratio between
// the gateways compared with the gateways alone; it is kept as cheap as
// real traffic allows (netpeers_side.go).
//
// Every repeat runs each gateway engine once per peer count, rotating
// which goes first; the peer side is made afresh for each run, with new
// handshakes (the gateways and their peer configuration stay).

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/control/uapi"
)

// SectionNetpeers is the many-peers-behind-a-gateway section.
const SectionNetpeers = "netpeers"

// MetricSlowestShare is the slowest peer's deliveries over the fair share.
const MetricSlowestShare = "slowest peer of fair share"

// MetricGatewayCPUPerGB is the gateway's own CPU seconds per GB carried (the
// daemon's through namespaces; in process, the process less the harness
// senders' thread).
const MetricGatewayCPUPerGB = "gateway CPU s/GB"

// MetricPeersCPUPerGB is the harness process's CPU seconds per GB in the
// netpeers section: the peer side (one sender sealing for all N peers,
// the sink, the handshakes' socket). The peers share the machine's CPUs with the gateway, so when the
// two CPU figures together fill the machine, the peers bound the
// throughput of every gateway alike and the Gbit/s ratio is narrower than
// the gateways' own.
const MetricPeersCPUPerGB = "peers CPU s/GB"

// maxNetPeers is the most peers the netpeers section addresses (peer i
// is 10.89.1.0 + i, below the gateway's 10.89.0.0/16 broadcast address).
const maxNetPeers = 65000

// netpeersReported are the peer counts the targets name.
var netpeersReported = []int{100, 1000}

// netpeersCase names the case of n peers.
func netpeersCase(n int) string { return fmt.Sprintf("%d peers via gateway", n) }

// Fixed addresses: each engine has its own pair of namespaces, so all can
// use the same ones.
var (
	netpeersGW       = netip.MustParseAddr("10.89.0.1") // the gateway's TUN, and the sink
	netpeersPeerBase = netip.MustParseAddr("10.89.1.0") // peer i is this + i
)

const (
	netpeersGWLink   = "10.90.0.1"
	netpeersPeerLink = "10.90.0.2"
	netpeersPort     = 51820
	netpeersSinkPort = 9 // the packets' destination port (ipv4UDPPacket)
)

// netpeersEngines are the gateway engines: wireguard-go and wirelane, as
// far as cfg names them.
func netpeersEngines(cfg Config) []string {
	var out []string
	for _, e := range cfg.Engines {
		if e == EngineWireguardGo || e == EngineWirelane {
			out = append(out, e)
		}
	}
	return out
}

// netpeersCountsOf returns the peer counts cfg runs.
func netpeersCountsOf(cfg Config) []int { return cfg.NetPeers }

// netpeersMinLossTimeout is the least loss timeout of the section. About
// 2,000 packets in flight take a gateway that carries 0.5 Gbit/s (1,000
// peers on a busy machine) some 45 ms to work off, near the suite's 50 ms:
// write-offs then came while the packets were still queued, sent new
// windows behind them and overflowed the gateway's socket (7,000-42,000
// drops a window for both engines at 17:43); at 200 ms there were none.
const netpeersMinLossTimeout = 200 * time.Millisecond

// netpeersWindow is each peer's closed-loop window with n peers: about
// DefaultWindow packets in flight over all of them, at least 2 each.
// Before 2026-12-02 17:45 the floor was 4, which at 1,000 peers put 4,000
// packets in flight: more than either gateway worked off within the loss
// timeout, so write-offs sent new windows behind packets still queued,
// the gateways' sockets overflowed (about 10,000 drops a second) and the
// peers whose runs were dropped again and again backed off
// (docs/benchmarks-history.md).
func netpeersWindow(n int) int { return max(2, DefaultWindow/max(n, 1)) }

// peerAddr returns peer i's tunnel address.
func peerAddr(i int) netip.Addr {
	return addrAdd(netpeersPeerBase, i)
}

// peerIndex returns the peer whose tunnel address is a, if it is one of n.
func peerIndex(a netip.Addr, n int) (int, bool) {
	a = a.Unmap()
	if !a.Is4() {
		return 0, false
	}
	b, x := netpeersPeerBase.As4(), a.As4()
	base := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v := uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3])
	if v < base || v-base >= uint32(n) {
		return 0, false
	}
	return int(v - base), true
}

// slowestShare returns the smallest count over the fair share (the mean);
// NaN-free: 0 when nothing was delivered at all.
func slowestShare(counts []uint64) float64 {
	if len(counts) == 0 {
		return 0
	}
	var total, least uint64
	least = counts[0]
	for _, c := range counts {
		total += c
		least = min(least, c)
	}
	if total == 0 {
		return 0
	}
	return float64(least) / (float64(total) / float64(len(counts)))
}

// inNetns runs fn on an OS thread that has entered the named network
// namespace (ip netns add NAME), so that sockets fn creates live there.
// The thread returns to this process's namespace afterwards; if it cannot,
// it stays locked and is discarded when the goroutine ends.
func inNetns(name string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		target, err := unix.Open(filepath.Join("/var/run/netns", name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open namespace %s: %w", name, err)
			return
		}
		err = unix.Setns(target, unix.CLONE_NEWNET)
		unix.Close(target)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace %s: %w", name, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace %s: %w", name, err))
			return // the thread stays locked and ends with the goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// waitUAPI waits until the daemon c serves wg(8) on ifname's UAPI socket.
func waitUAPI(c *child, ifname string, args []string) error {
	sock := uapi.SocketPath(ifname)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			if _, err := run("", "wg", "show", ifname); err == nil {
				return nil
			}
		}
		if c.exited() {
			return fmt.Errorf("daemon %q exited: %s", strings.Join(args, " "), strings.TrimSpace(c.out.String()))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon %q: no UAPI socket %s within 15s", strings.Join(args, " "), sock)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gateway is one engine's gateway namespace, daemon and peer namespace,
// with the keys of the most peers any run uses.
type gateway struct {
	engine     string
	nsG, nsP   string
	ifname     string
	daemon     *child
	pub        []byte    // the gateway's public key
	peers      []keyPair // the peers' keys, configured on the gateway
	namespaces []string
	unregister func() // from addCleanup
}

func (g *gateway) teardown() {
	g.unregister()
	if g.daemon != nil {
		g.daemon.stop()
	}
	for _, ns := range g.namespaces {
		run("", "ip", "netns", "del", ns)
	}
}

// setupGateway builds engine number idx's namespaces, starts its daemon
// in the gateway namespace and configures it with peers peers.
func setupGateway(engine string, idx int, tag string, bins netnsBins, dir string, peers int) (g *gateway, err error) {
	g = &gateway{
		engine: engine,
		nsG:    fmt.Sprintf("wlb%s-np%dg", tag, idx), nsP: fmt.Sprintf("wlb%s-np%dp", tag, idx),
		ifname: fmt.Sprintf("wlb%sg%d", tag, idx),
	}
	g.unregister = addCleanup(g.teardown)
	defer func() {
		if err != nil {
			g.teardown()
			err = fmt.Errorf("netpeers %s: %w", engine, err)
		}
	}()
	for _, ns := range []string{g.nsG, g.nsP} {
		if _, err := run("", "ip", "netns", "add", ns); err != nil {
			return g, err
		}
		g.namespaces = append(g.namespaces, ns)
		if _, err := run(ns, "ip", "link", "set", "lo", "up"); err != nil {
			return g, err
		}
	}
	vG, vP := fmt.Sprintf("wlb%sv%dg", tag, idx), fmt.Sprintf("wlb%sv%dp", tag, idx)
	steps := [][]string{
		{"", "ip", "link", "add", vG, "netns", g.nsG, "type", "veth", "peer", "name", vP, "netns", g.nsP},
		{g.nsG, "ip", "addr", "add", netpeersGWLink + "/24", "dev", vG},
		{g.nsP, "ip", "addr", "add", netpeersPeerLink + "/24", "dev", vP},
		{g.nsG, "ip", "link", "set", vG, "up"},
		{g.nsP, "ip", "link", "set", vP, "up"},
		// The peers' source addresses: all local in the peer namespace
		// (AnyIP), reached from the gateway's through the veth pair.
		{g.nsP, "ip", "route", "add", "local", netpeersEndpointNet, "dev", "lo"},
		{g.nsG, "ip", "route", "add", netpeersEndpointNet, "via", netpeersPeerLink, "dev", vG},
	}
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			return g, err
		}
	}
	args, err := daemonArgs(engine, bins, g.ifname)
	if err != nil {
		return g, err
	}
	args = append([]string{"ip", "netns", "exec", g.nsG}, args...)
	if g.daemon, err = startChild([]string{"LOG_LEVEL=error"}, args...); err != nil {
		return g, err
	}
	if err := waitUAPI(g.daemon, g.ifname, args); err != nil {
		return g, err
	}
	k, err := newKeyPair()
	if err != nil {
		return g, err
	}
	g.pub = k.pub
	var conf strings.Builder
	fmt.Fprintf(&conf, "[Interface]\nPrivateKey = %s\nListenPort = %d\n", base64.StdEncoding.EncodeToString(k.priv), netpeersPort)
	for i := range peers {
		pk, err := newKeyPair()
		if err != nil {
			return g, err
		}
		g.peers = append(g.peers, pk)
		fmt.Fprintf(&conf, "\n[Peer]\nPublicKey = %s\nAllowedIPs = %s/32\n", base64.StdEncoding.EncodeToString(pk.pub), peerAddr(i))
	}
	file := filepath.Join(dir, g.ifname+".conf")
	if err := os.WriteFile(file, []byte(conf.String()), 0o600); err != nil {
		return g, err
	}
	steps = [][]string{
		{"", "wg", "setconf", g.ifname, file},
		{g.nsG, "ip", "addr", "add", netpeersGW.String() + "/16", "dev", g.ifname},
		{g.nsG, "ip", "link", "set", g.ifname, "mtu", strconv.Itoa(netnsMTU), "up"},
	}
	for _, s := range steps {
		if _, err := run(s[0], s[1:]...); err != nil {
			return g, err
		}
	}
	return g, nil
}

// netpeersResult is one run's figures.
type netpeersResult struct {
	gbps, cpuPerGB, slowest float64
	peersCPUPerGB           float64 // this process's CPU (peers and sink) per GB
	senderCPUPerGB          float64 // of it, the sender thread's (sealing, sendmmsg and the kernel's delivery into the gateway's socket)
	writeOffs               uint64
	extra                   uint64 // delivered beyond what the peers sent: duplicates
	// Where packets were lost in the window: drops of the gateway's UDP
	// socket and of the sink's (/proc/net/udp in the gateway namespace),
	// and the gateway's own drop counters by reason (Wirelane's UAPI
	// wirelane_counters; none for wireguard-go).
	gwSockDrops, sinkDrops uint64
	backlogDrops           uint64 // the kernel's per-CPU input backlog (/proc/net/softnet_stat, all namespaces)
	stray                  uint64 // sink datagrams from no peer of the run (late ones of an earlier run)
	gwDrops                map[string]uint64
	// The slowest peer: its index, write-offs, and the median peer's.
	slowPeer                   int
	slowOffs, medianOffs       uint64
	slowDelivered, meanPerPeer float64
}

// run runs n peers against g: the peer side up (sessions by real
// handshakes), the sink in the gateway namespace, every peer delivering,
// Warmup, then the measured window.
func (g *gateway) run(n int, cfg Config) (res netpeersResult, err error) {
	if n > len(g.peers) {
		return res, fmt.Errorf("%d peers asked, %d configured", n, len(g.peers))
	}
	var sink *net.UDPConn
	if err := inNetns(g.nsG, func() error {
		var err error
		sink, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netpeersGW, netpeersSinkPort)))
		return err
	}); err != nil {
		return res, fmt.Errorf("sink: %w", err)
	}
	defer sink.Close()
	// As root, past net.core.rmem_max: the sink must not be where packets
	// are lost.
	if rc, err := sink.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20) })
	}
	side, err := newNetpeersSide(g.nsP, g.peers, n, g.pub, sink, netpeersWindow(n), max(cfg.LossTimeout, netpeersMinLossTimeout))
	if err != nil {
		return res, fmt.Errorf("peer side: %w", err)
	}
	defer side.stop()
	if err := side.handshake(30*time.Second + time.Duration(n)*20*time.Millisecond); err != nil {
		return res, err
	}
	time.Sleep(20 * time.Millisecond) // the last keepalives confirm their sessions
	side.start()
	deadline := time.Now().Add(20*time.Second + time.Duration(n)*20*time.Millisecond)
	for {
		silent := 0
		for i := range side.loops {
			if side.loops[i].delivered.Load() == 0 {
				silent++
			}
		}
		if silent == 0 {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d of %d peers delivered nothing through the gateway", silent, n)
		}
		if g.daemon.exited() {
			return res, fmt.Errorf("gateway daemon exited: %s", strings.TrimSpace(g.daemon.out.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Peers whose first packets were lost before their handshake have
	// backed their write-off wait off to as much as maxWriteOffWait; the
	// warm-up outlasts that.
	time.Sleep(cfg.Warmup + maxWriteOffWait)

	before, after := make([]uint64, n), make([]uint64, n)
	offs0, offs1 := make([]uint64, n), make([]uint64, n)
	gwSock0, sink0 := g.udpDrops()
	backlog0 := backlogDrops()
	gwDrops0 := g.drops()
	cpu0, err := procCPU(g.daemon.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	self0, err := takeSnapshot()
	if err != nil {
		return res, err
	}
	snd0 := side.cpuNs.Load()
	t0 := time.Now()
	for i := range side.loops {
		before[i] = side.loops[i].delivered.Load()
		offs0[i] = side.loops[i].offs.Load()
	}
	timeline := sampleTimeline(side, cfg.Duration)
	for i := range side.loops {
		after[i] = side.loops[i].delivered.Load()
		offs1[i] = side.loops[i].offs.Load()
	}
	elapsed := time.Since(t0)
	snd1 := side.cpuNs.Load()
	cpu1, err := procCPU(g.daemon.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	self1, err := takeSnapshot()
	if err != nil {
		return res, err
	}
	gwSock1, sink1 := g.udpDrops()
	backlog1 := backlogDrops()
	gwDrops1 := g.drops()
	if err := side.err(); err != nil {
		return res, err
	}
	var total uint64
	for i := range after {
		after[i] -= before[i]
		offs1[i] -= offs0[i]
		total += after[i]
		res.writeOffs += offs1[i]
	}
	bytes := float64(total) * netnsMTU
	res.gbps = bytes * 8 / elapsed.Seconds() / 1e9
	if bytes > 0 {
		res.cpuPerGB = (cpu1 - cpu0).Seconds() / (bytes / 1e9)
		res.peersCPUPerGB = (self1.cpu - self0.cpu).Seconds() / (bytes / 1e9)
		res.senderCPUPerGB = time.Duration(snd1-snd0).Seconds() / (bytes / 1e9)
	}
	res.slowest = slowestShare(after)
	for i := range after {
		if after[i] < after[res.slowPeer] {
			res.slowPeer = i
		}
	}
	res.slowOffs, res.slowDelivered = offs1[res.slowPeer], float64(after[res.slowPeer])
	res.meanPerPeer = float64(total) / float64(n)
	sorted := slices.Clone(offs1)
	slices.Sort(sorted)
	res.medianOffs = sorted[n/2]
	res.gwSockDrops, res.sinkDrops = gwSock1-gwSock0, sink1-sink0
	res.backlogDrops = backlog1 - backlog0
	res.stray = side.stray.Load()
	for k, v := range gwDrops1 {
		if d := v - gwDrops0[k]; d != 0 && gwDrops0 != nil {
			if res.gwDrops == nil {
				res.gwDrops = map[string]uint64{}
			}
			res.gwDrops[k] = d
		}
	}
	for i := range side.loops {
		if d, s := side.loops[i].delivered.Load(), side.loops[i].sent.Load(); d > s {
			res.extra += d - s
		}
	}
	if dir := os.Getenv(netpeersDumpEnv); dir != "" {
		if err := dumpTimeline(dir, fmt.Sprintf("%s-%d-%s.csv", g.engine, n, time.Now().UTC().Format("150405")), timeline, offs1); err != nil {
			return res, err
		}
	}
	return res, nil
}

// netpeersDumpEnv names a directory into which every netpeers run writes
// its peers' deliveries over time (ENGINE-N-HHMMSS.csv): one line per
// peer, its number, its write-offs in the window, then its deliveries in
// each timelineStep of the window. For finding out why a peer was slow;
// unset, nothing is sampled.
const netpeersDumpEnv = "WIRELANE_BENCH_NETPEERS_DUMP"

// timelineStep is the sampling interval of the dumped timelines.
const timelineStep = 100 * time.Millisecond

// sampleTimeline waits d; with netpeersDumpEnv set it samples every
// peer's deliveries every timelineStep meanwhile.
func sampleTimeline(side *netpeersSide, d time.Duration) [][]uint64 {
	if os.Getenv(netpeersDumpEnv) == "" {
		time.Sleep(d)
		return nil
	}
	snap := func() []uint64 {
		v := make([]uint64, len(side.loops))
		for i := range v {
			v[i] = side.loops[i].delivered.Load()
		}
		return v
	}
	end := time.Now().Add(d)
	out := [][]uint64{snap()}
	for time.Now().Before(end) {
		time.Sleep(min(timelineStep, time.Until(end)))
		out = append(out, snap())
	}
	return out
}

// dumpTimeline writes the timeline (cumulative samples) as per-step
// deliveries, one line per peer.
func dumpTimeline(dir, name string, samples [][]uint64, offs []uint64) error {
	if len(samples) < 2 {
		return nil
	}
	var b strings.Builder
	for i := range samples[0] {
		fmt.Fprintf(&b, "%d,%d", i, offs[i])
		for k := 1; k < len(samples); k++ {
			fmt.Fprintf(&b, ",%d", samples[k][i]-samples[k-1][i])
		}
		b.WriteByte('\n')
	}
	return os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644)
}

// udpDrops returns the drop counts of the gateway's UDP sockets (port
// netpeersPort, IPv4 and IPv6) and of the sink's (port netpeersSinkPort)
// from /proc/net/udp and udp6 in the gateway namespace; 0 when unreadable.
func (g *gateway) udpDrops() (gw, sink uint64) {
	for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		out, err := run(g.nsG, "cat", f)
		if err != nil {
			continue
		}
		a, b := parseUDPDrops(out, netpeersPort, netpeersSinkPort)
		gw += a
		sink += b
	}
	return gw, sink
}

// backlogDrops returns the packets the kernel dropped because a CPU's
// input backlog (netdev_max_backlog; a veth delivers through it) was
// full: the second column of /proc/net/softnet_stat, summed over CPUs.
func backlogDrops() uint64 {
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0
	}
	var n uint64
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			if v, err := strconv.ParseUint(f[1], 16, 32); err == nil {
				n += v
			}
		}
	}
	return n
}

// parseUDPDrops sums the drops column (the last) of the /proc/net/udp
// lines whose local port is portA and portB.
func parseUDPDrops(table string, portA, portB int) (a, b uint64) {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 13 || !strings.Contains(f[1], ":") {
			continue
		}
		port, err := strconv.ParseUint(f[1][strings.LastIndexByte(f[1], ':')+1:], 16, 16)
		if err != nil {
			continue
		}
		d, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil {
			continue
		}
		switch int(port) {
		case portA:
			a += d
		case portB:
			b += d
		}
	}
	return a, b
}

// drops returns the gateway daemon's own counters (Wirelane answers a
// get=1 with wirelane_counters=1; wireguard-go does not: nil).
func (g *gateway) drops() map[string]uint64 {
	if g.engine != EngineWirelane {
		return nil
	}
	c, err := net.DialTimeout("unix", uapi.SocketPath(g.ifname), 2*time.Second)
	if err != nil {
		return nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("get=1\n" + uapi.CountersRequest + "\n\n")); err != nil {
		return nil
	}
	out := map[string]uint64{}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "errno=") {
			break
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok || !strings.HasPrefix(k, uapi.CounterPrefix) {
			continue
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			out[strings.TrimPrefix(k, uapi.CounterPrefix)] = n
		}
	}
	return out
}

// gsoNote says when the peers sent with UDP GSO (netpeersGSOEnv).
func gsoNote() string {
	if os.Getenv(netpeersGSOEnv) == "1" {
		return " (peers sending with UDP GSO)"
	}
	return ""
}

// formatDrops writes a gateway's own drop counters of a window, those
// that moved, sorted by name.
func formatDrops(d map[string]uint64, engine string) string {
	if engine != EngineWirelane {
		return "not counted (" + engine + ")"
	}
	var parts []string
	for k, v := range d {
		if strings.HasPrefix(k, "dropped_") || strings.HasPrefix(k, "handshakes_rejected_") || strings.HasSuffix(k, "_errors") || k == "cookie_replies_sent" {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// procCPU returns the user+system CPU time of process pid so far.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	ticks, err := parseProcStatCPU(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// parseProcStatCPU returns utime+stime (fields 14 and 15, in clock ticks)
// of a /proc/PID/stat line. The command name (field 2) is in parentheses
// and may hold spaces and parentheses itself, so fields are counted from
// the last ')'.
func parseProcStatCPU(b []byte) (uint64, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("utime %q, stime %q: %w", f[11], f[12], err)
	}
	if ut+st < ut {
		return 0, errors.New("utime + stime overflows")
	}
	return ut + st, nil
}

// netpeersSteps counts the progress steps of the section.
func netpeersSteps(cfg Config) int {
	return netnsSetupSteps + cfg.Repeats*len(netpeersCountsOf(cfg))*len(netpeersEngines(cfg))
}

// netpeersSection sets up one gateway per engine and alternates them over
// the peer counts.
func netpeersSection(r *Report, cfg Config, p *progress) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root to create namespaces, TUN devices and veth pairs", ErrSkipped)
	}
	for _, tool := range []string{"ip", "wg", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: needs %s on PATH", ErrSkipped, tool)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("%w: needs /dev/net/tun: %v", ErrSkipped, err)
	}
	engines := netpeersEngines(cfg)
	if len(engines) == 0 {
		return fmt.Errorf("%w: needs wireguard-go or wirelane among the engines", ErrSkipped)
	}
	dir, err := os.MkdirTemp("", "wirelane-bench-np-")
	if err != nil {
		return err
	}
	defer addCleanup(func() { os.RemoveAll(dir) })()
	defer os.RemoveAll(dir)
	p.step("netpeers: build daemons")
	c := cfg
	c.Engines = engines
	bins, err := buildDaemons(c, dir)
	if err != nil {
		return err
	}
	counts := netpeersCountsOf(cfg)
	most := 0
	for _, n := range counts {
		most = max(most, n)
	}
	p.step("netpeers: set up gateways")
	tag := netnsTag()
	var gws []*gateway
	defer func() {
		for _, g := range gws {
			g.teardown()
		}
	}()
	for i, e := range engines {
		g, err := setupGateway(e, i, tag, bins, dir, most)
		if err != nil {
			r.Note("%v (engine left out)", err)
			continue
		}
		gws = append(gws, g)
	}
	if len(gws) == 0 {
		return errors.New("no gateway could be set up")
	}
	for rep := 0; rep < cfg.Repeats; rep++ {
		for _, n := range counts {
			cas := netpeersCase(n)
			for i := range gws {
				g := gws[(i+rep)%len(gws)]
				p.step(fmt.Sprintf("netpeers %s %s, repeat %d/%d", cas, g.engine, rep+1, cfg.Repeats))
				res, err := g.run(n, cfg)
				if err != nil {
					return fmt.Errorf("%s %s: %w", g.engine, cas, err)
				}
				r.Add(SectionNetpeers, cas, MetricGbps, g.engine, HigherIsBetter, res.gbps)
				r.Add(SectionNetpeers, cas, MetricGatewayCPUPerGB, g.engine, LowerIsBetter, res.cpuPerGB)
				r.Add(SectionNetpeers, cas, MetricSlowestShare, g.engine, HigherIsBetter, res.slowest)
				r.Add(SectionNetpeers, cas, MetricPeersCPUPerGB, g.engine, LowerIsBetter, res.peersCPUPerGB)
				if res.stray > 0 {
					r.Note("netpeers %s %s repeat %d: the sink received %d late packets of an earlier run's peers (not counted)", cas, g.engine, rep+1, res.stray)
				}
				if res.extra > 0 {
					r.Note("netpeers %s %s repeat %d: the sink received %d packets more than the peers generated (duplicates)", cas, g.engine, rep+1, res.extra)
				}
				r.Note("netpeers %s %s repeat %d: peers' sender thread %.2f CPU s/GB of the peers' %.2f%s", cas, g.engine, rep+1, res.senderCPUPerGB, res.peersCPUPerGB, gsoNote())
				if res.writeOffs > 0 || res.gwSockDrops > 0 || res.sinkDrops > 0 || res.backlogDrops > 0 || len(res.gwDrops) > 0 {
					r.Note("netpeers %s %s repeat %d: %d write-offs of in-flight packets (loss); drops in the window: gateway UDP socket %d, sink socket %d, input backlog %d, gateway's own %s; slowest peer #%d: %.0f packets (mean %.0f), %d write-offs (median peer %d)",
						cas, g.engine, rep+1, res.writeOffs, res.gwSockDrops, res.sinkDrops, res.backlogDrops, formatDrops(res.gwDrops, g.engine), res.slowPeer, res.slowDelivered, res.meanPerPeer, res.slowOffs, res.medianOffs)
				}
			}
		}
	}
	return nil
}
