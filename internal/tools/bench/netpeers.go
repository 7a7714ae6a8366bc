package bench

// Many peers behind one gateway, through namespaces: the gateway is an
// engine's daemon with a real TUN and a real UDP socket; the peers are
// Wirelane devices in this process whose UDP sockets live in a second
// namespace, joined to the gateway's by a veth pair.
//
//	nsP (peers): pV 10.90.0.2/24              nsG (gateway): gV 10.90.0.1/24
//	  N devices in this process,  ==veth==>     daemon (wirelaned or wireguard-go)
//	  each its own key, UDP port                 UDP :51820, N peers configured,
//	  and in-memory TUN that                     TUN 10.89.0.1/16 --> kernel -->
//	  generates 1420-byte packets                sink: UDP socket 10.89.0.1:9 in
//	  from 10.89.1.0+i to 10.89.0.1:9            this process, counts per source
//
// Each peer's generator is a closed loop of its own (genTUN.closeLoop):
// at most netpeersWindow(N) of its packets in flight between its Read and
// the sink, written off after Config.LossTimeout without a delivery. So
// every peer offers the same load and a peer the gateway serves slowly
// gets no more than its window through: its share of the deliveries is
// the gateway's fairness. The figures are the gateway's: what the sink
// received in the window (packets of 1420 bytes as they crossed the TUN),
// the daemon's own CPU time (user+system from /proc/PID/stat) per GB, and
// the slowest peer's deliveries as a fraction of the fair share (total/N).
//
// The peers' side costs the same for every gateway engine (the same
// devices, the same process, the same two CPUs), which narrows the ratio
// between the gateways compared with the gateways alone.
//
// Every repeat runs each gateway engine once per peer count, rotating
// which goes first; the peer devices are created for each run and closed
// after it (the gateways and their peer configuration stay).

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device"
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
// netpeers section: the N peer devices (sealing and sending) and the
// sink. The peers share the machine's CPUs with the gateway, so when the
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

// netpeersWindow is each peer's closed-loop window with n peers: about
// DefaultWindow packets in flight over all of them, at least 4 each.
func netpeersWindow(n int) int { return max(4, DefaultWindow/max(n, 1)) }

// peerAddr returns peer i's tunnel address.
func peerAddr(i int) netip.Addr {
	b := netpeersPeerBase.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(i)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
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
	writeOffs               uint64
	extra                   uint64 // delivered beyond what the peers generated: duplicates
}

// netpeersRun runs n peers against g: devices up in the peer namespace,
// the sink in the gateway's, every peer delivering, Warmup, then the
// measured window.
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

	window := netpeersWindow(n)
	gens := make([]*genTUN, n)
	recvs := make([]*genTUN, n)
	for i := range n {
		pkt, err := ipv4UDPPacket(netnsMTU, peerAddr(i), netpeersGW)
		if err != nil {
			return res, err
		}
		gens[i] = newGenTUN(fmt.Sprintf("peer%d", i), netnsMTU, pkt, nil)
		recvs[i] = newGenTUN(fmt.Sprintf("sink%d", i), netnsMTU, nil, nil)
		gens[i].closeLoop(recvs[i], window, cfg.LossTimeout)
	}
	var devs []uapiDevice
	defer func() {
		// The TUNs first: a sender waiting in its closed loop for room
		// that no longer comes (the sink is closed) holds its device's
		// Close up until its TUN read returns.
		for _, t := range gens {
			t.stop()
			t.Close()
		}
		for _, d := range devs {
			d.Close()
		}
	}()
	gwPub := fmt.Sprintf("%x", g.pub)
	if err := inNetns(g.nsP, func() error {
		for i := range n {
			d, err := newPeerDevice(gens[i], g.peers[i].priv, window)
			if err != nil {
				return err
			}
			devs = append(devs, d)
			if err := d.IpcSet(fmt.Sprintf("public_key=%s\nendpoint=%s:%d\nallowed_ip=%s/32\n", gwPub, netpeersGWLink, netpeersPort, netpeersGW)); err != nil {
				return fmt.Errorf("peer %d: %w", i, err)
			}
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("peer devices: %w", err)
	}

	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); sinkLoop(sink, recvs) }()
	defer func() { sink.Close(); wg.Wait() }()

	for _, t := range gens {
		t.start()
	}
	deadline := time.Now().Add(20*time.Second + time.Duration(n)*20*time.Millisecond)
	for {
		silent := 0
		for _, r := range recvs {
			if r.rxPackets.Load() == 0 {
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

	before := make([]uint64, n)
	after := make([]uint64, n)
	var offs0, offs1 uint64
	cpu0, err := procCPU(g.daemon.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	self0, err := takeSnapshot()
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	for i, r := range recvs {
		before[i] = r.rxPackets.Load()
		offs0 += gens[i].writeOffs()
	}
	time.Sleep(cfg.Duration)
	for i, r := range recvs {
		after[i] = r.rxPackets.Load()
		offs1 += gens[i].writeOffs()
	}
	elapsed := time.Since(t0)
	cpu1, err := procCPU(g.daemon.cmd.Process.Pid)
	if err != nil {
		return res, err
	}
	self1, err := takeSnapshot()
	if err != nil {
		return res, err
	}
	var total uint64
	for i := range after {
		after[i] -= before[i]
		total += after[i]
	}
	bytes := float64(total) * netnsMTU
	res.gbps = bytes * 8 / elapsed.Seconds() / 1e9
	if bytes > 0 {
		res.cpuPerGB = (cpu1 - cpu0).Seconds() / (bytes / 1e9)
		res.peersCPUPerGB = (self1.cpu - self0.cpu).Seconds() / (bytes / 1e9)
	}
	res.slowest = slowestShare(after)
	res.writeOffs = offs1 - offs0
	for i, r := range recvs {
		if d := r.rxPackets.Load(); d > gens[i].txPackets.Load() {
			res.extra += d - gens[i].txPackets.Load()
		}
	}
	return res, nil
}

// smallBatchBind is conn.StdBind with a smaller batch. A device gives
// each receive goroutine a batch of 64 KiB landing buffers, 8 MiB at the
// ideal batch of 128: 1,000 peer devices took several GB. A peer receives
// only handshake responses and keepalives, and sends no more than its
// closed-loop window at once, so its window is batch enough.
type smallBatchBind struct {
	*conn.StdBind
	batch int
}

// BatchSize returns the smaller batch.
func (b smallBatchBind) BatchSize() int { return b.batch }

// newPeerDevice returns a Wirelane device that is up on t with key, its
// bind batched by batch packets (at most conn.IdealBatchSize).
func newPeerDevice(t *genTUN, key []byte, batch int) (uapiDevice, error) {
	batch = min(max(batch, 1), conn.IdealBatchSize)
	d := wirelaneDevice{device.NewDevice(t, smallBatchBind{conn.NewStdBind(), batch}, device.Options{})}
	if err := d.IpcSet("private_key=" + hex.EncodeToString(key) + "\nlisten_port=0\n"); err != nil {
		d.Close()
		return nil, fmt.Errorf("peer device: set private key: %w", err)
	}
	if err := d.Up(); err != nil {
		d.Close()
		return nil, fmt.Errorf("peer device: up: %w", err)
	}
	return d, nil
}

// sinkLoop reads datagrams from the sink until it is closed and counts
// each on its peer's receiving genTUN (which moves the peer's closed loop
// on). Datagrams from unknown sources are ignored.
func sinkLoop(sink *net.UDPConn, recvs []*genTUN) {
	pc := ipv4.NewPacketConn(sink)
	msgs := make([]ipv4.Message, 64)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, 2048)}
	}
	one := make([][]byte, 1)
	for {
		k, err := pc.ReadBatch(msgs, 0)
		if err != nil {
			return
		}
		for _, m := range msgs[:k] {
			ua, ok := m.Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			a, ok := netip.AddrFromSlice(ua.IP)
			if !ok {
				continue
			}
			if i, ok := peerIndex(a, len(recvs)); ok {
				one[0] = m.Buffers[0][:m.N]
				recvs[i].Write(one, 0)
			}
		}
	}
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
				if res.extra > 0 {
					r.Note("netpeers %s %s repeat %d: the sink received %d packets more than the peers generated (duplicates)", cas, g.engine, rep+1, res.extra)
				}
				if res.writeOffs > 0 {
					r.Note("netpeers %s %s repeat %d: %d write-offs of in-flight packets (loss)", cas, g.engine, rep+1, res.writeOffs)
				}
			}
		}
	}
	return nil
}
