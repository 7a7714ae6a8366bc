// Package demo implements `wirelane demo`: a WireGuard tunnel between two
// fresh network namespaces, built, exercised and torn down by one command.
//
// Topology (the one WireGuard's own kernel tests use):
//
//	host namespace:  daemon A (UDP 127.0.0.1:PA)   daemon B (UDP 127.0.0.1:PB)
//	                     |  TUN wldemoNa moved          |  TUN wldemoNb moved
//	namespace A:     wldemoNa 192.168.241.1/24
//	namespace B:                                    wldemoNb 192.168.241.2/24
//
// The daemons and their UDP sockets stay in the host namespace and talk over
// its loopback; only the TUN interfaces move. So no veth pair, bridge or
// route is needed, the host's own interfaces are never touched, and the
// only way from A to B is through the tunnel.
//
// Run's pipeline: keys -> namespaces -> devices started and configured through the engine
// -> move TUNs, address, up -> first ping (handshake) -> ping -> TCP
// throughput -> cleanup (always, also on error or cancellation, unless
// Keep).
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
	"github.com/wirelane/wirelane/internal/tunnel/wgtunnel"
)

// Addresses inside the tunnel (the ones WireGuard's kernel tests use).
var (
	AddrA = netip.MustParseAddr("192.168.241.1") // namespace A's tunnel address
	AddrB = netip.MustParseAddr("192.168.241.2") // namespace B's tunnel address
)

// Options configures Run.
type Options struct {
	// Duration is the length of the throughput test (0 skips it).
	Duration time.Duration
	// MTU of the tunnel interfaces (0 = 1420).
	MTU int
	// Keep leaves namespaces, interfaces and daemons running and prints
	// how to use and remove them. The namespaces are then named ones.
	Keep bool
	// Out receives the human-readable account; nil = discard.
	Out io.Writer
	// Progress rewrites a live throughput line with '\r' (for terminals).
	Progress bool
	// Engine runs the two WireGuard devices in the host namespace (the
	// command line passes a wgtunnel.Daemon that logs nothing).
	Engine wgtunnel.Engine
}

// Report holds what Run measured.
type Report struct {
	IfA, IfB   string
	Handshake  time.Duration // from the first packet to a completed handshake
	Pings      []PingResult
	Throughput ThroughputResult
}

type side struct {
	ifname string
	ns     *Namespace
	key    wgquick.Key
	port   int
	addr   netip.Addr
}

// Run builds the tunnel, exercises it and cleans up. The error says which
// step failed; cleanup runs in every case (unless Keep and no error).
func Run(ctx context.Context, o Options) (rep *Report, err error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.MTU == 0 {
		o.MTU = 1420
	}
	if o.Engine == nil {
		return nil, errors.New("demo: no engine to run the devices")
	}
	if geteuid() != 0 {
		return nil, errors.New("wirelane demo must run as root: it creates network namespaces and TUN interfaces (try: sudo wirelane demo)")
	}
	out := o.Out
	tag := netNameTag()
	a := &side{ifname: "wldemo" + tag + "a", addr: AddrA}
	b := &side{ifname: "wldemo" + tag + "b", addr: AddrB}
	rep = &Report{IfA: a.ifname, IfB: b.ifname}

	var undo netcfg.Undo
	defer func() {
		if err != nil || !o.Keep {
			fmt.Fprintf(out, "cleanup: removing interfaces, daemons and namespaces\n")
			if cerr := undo.Rollback(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			for _, s := range []*side{a, b} {
				o.Engine.Stopped(s.ifname, 2*time.Second)
			}
		}
	}()

	// 1. Keys.
	for _, s := range []*side{a, b} {
		if s.key, err = wgquick.GeneratePrivateKey(); err != nil {
			return rep, fmt.Errorf("generate keys: %w", err)
		}
	}
	fmt.Fprintf(out, "keys: generated two key pairs\n  A public key %s\n  B public key %s\n", a.key.PublicKey().String(), b.key.PublicKey().String())

	// 2. Namespaces.
	for _, s := range []*side{a, b} {
		name := ""
		if o.Keep {
			name = "wl-demo-" + tag + "-" + s.ifname[len(s.ifname)-1:]
		}
		if s.ns, err = NewNamespace(name); err != nil {
			return rep, err
		}
		ns := s.ns
		undo.Push("namespace", ns.Close)
		if err := withConf(ns, func(c *netcfg.Conf) error { return c.SetUp("lo") }); err != nil {
			return rep, fmt.Errorf("bring up lo: %w", err)
		}
	}
	if o.Keep {
		fmt.Fprintf(out, "namespaces: %s and %s\n", a.ns.Name, b.ns.Name)
	} else {
		fmt.Fprintf(out, "namespaces: two fresh anonymous network namespaces, A and B\n")
	}

	// 3. Daemons, configured over UAPI while still in the host namespace.
	if a.port, b.port, err = freeUDPPorts(); err != nil {
		return rep, err
	}
	for _, s := range []*side{a, b} {
		peer := b
		if s == b {
			peer = a
		}
		if err := o.Engine.Start(ctx, s.ifname); err != nil {
			return rep, fmt.Errorf("start daemon for %s: %w", s.ifname, err)
		}
		s := s
		undo.Push("link "+s.ifname, func() error { return deleteLinkAnywhere(s) })
		priv := wgtypes.Key(s.key)
		port := s.port
		cfg := wgtypes.Config{
			PrivateKey: &priv, ListenPort: &port, ReplacePeers: true,
			Peers: []wgtypes.PeerConfig{{
				PublicKey:         wgtypes.Key(peer.key.PublicKey()),
				Endpoint:          &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: peer.port},
				ReplaceAllowedIPs: true,
				AllowedIPs:        []net.IPNet{{IP: peer.addr.AsSlice(), Mask: net.CIDRMask(32, 32)}},
			}},
		}
		if err := o.Engine.Configure(s.ifname, cfg); err != nil {
			return rep, fmt.Errorf("configure %s: %w", s.ifname, err)
		}
		host, err := netcfg.New()
		if err != nil {
			return rep, err
		}
		err = host.SetMTU(s.ifname, o.MTU)
		if err == nil {
			err = host.MoveToNetns(s.ifname, s.ns.Handle)
		}
		host.Close()
		if err != nil {
			return rep, fmt.Errorf("move %s into its namespace: %w", s.ifname, err)
		}
		if err := withConf(s.ns, func(c *netcfg.Conf) error {
			if err := c.AddAddress(s.ifname, netip.PrefixFrom(s.addr, 24)); err != nil {
				return err
			}
			return c.SetUp(s.ifname)
		}); err != nil {
			return rep, fmt.Errorf("set up %s: %w", s.ifname, err)
		}
	}
	fmt.Fprintf(out, "tunnel: %s %s/24 (A, UDP 127.0.0.1:%d) <-> %s %s/24 (B, UDP 127.0.0.1:%d), MTU %d\n",
		a.ifname, a.addr, a.port, b.ifname, b.addr, b.port, o.MTU)

	// 4. The first packet starts the handshake.
	start := time.Now()
	first, err := Ping(ctx, a.ns, b.addr, 1, 0, 5*time.Second)
	if err != nil {
		return rep, err
	}
	if len(first) == 0 || !first[0].OK {
		return rep, fmt.Errorf("no reply from %s through the tunnel within 5s (no handshake?)", b.addr)
	}
	dev, err := o.Engine.Device(a.ifname)
	if err != nil {
		return rep, fmt.Errorf("read %s: %w", a.ifname, err)
	}
	if len(dev.Peers) != 1 || dev.Peers[0].LastHandshakeTime.Unix() <= 0 {
		return rep, fmt.Errorf("%s answered pings but reports no handshake", a.ifname)
	}
	rep.Handshake = time.Since(start) - first[0].RTT
	if hs := dev.Peers[0].LastHandshakeTime.Sub(start); hs > 0 && hs < time.Since(start) {
		rep.Handshake = hs
	}
	fmt.Fprintf(out, "handshake: completed %s after the first packet\n", roundDur(rep.Handshake))

	// 5. Ping.
	rep.Pings, err = Ping(ctx, a.ns, b.addr, 4, 200*time.Millisecond, 2*time.Second)
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(out, "ping %s from A: %s\n", b.addr, pingSummary(rep.Pings))
	if ok := countOK(rep.Pings); ok == 0 {
		return rep, fmt.Errorf("ping: no replies")
	}

	// 6. Throughput.
	if o.Duration > 0 {
		fmt.Fprintf(out, "throughput: TCP from A to B for %s\n", o.Duration)
		tick := time.Second
		if o.Progress {
			tick = 250 * time.Millisecond
		}
		progress := func(n uint64, el time.Duration) {
			rate := 0.0
			if el > 0 {
				rate = float64(n) * 8 / el.Seconds()
			}
			line := fmt.Sprintf("  %5.1fs  %10s  %s", el.Seconds(), wgquick.FormatBytes(n), formatRate(rate))
			if o.Progress {
				fmt.Fprintf(out, "\r%s\x1b[K", line)
			} else {
				fmt.Fprintln(out, line)
			}
		}
		rep.Throughput, err = Throughput(ctx, a.ns, b.ns, b.addr, o.Duration, tick, progress)
		if o.Progress {
			fmt.Fprint(out, "\r\x1b[K")
		}
		if err != nil {
			return rep, err
		}
		fmt.Fprintf(out, "throughput: %s in %.2fs = %s\n", wgquick.FormatBytes(rep.Throughput.Bytes),
			rep.Throughput.Duration.Seconds(), formatRate(rep.Throughput.BitsPerSecond()))
	}

	// 7. What `wirelane show` says about A.
	if dev, err = o.Engine.Device(a.ifname); err == nil {
		fmt.Fprintln(out)
		wgquick.FormatDevice(out, dev, time.Now())
		fmt.Fprintln(out)
	}
	if o.Keep {
		fmt.Fprintf(out, "kept running. Try:\n  ip netns exec %s ping %s\n  wirelane show %s\nRemove with (deleting an interface stops its daemon):\n  ip -n %s link delete %s; ip -n %s link delete %s; ip netns delete %s; ip netns delete %s\n",
			a.ns.Name, b.addr, a.ifname, a.ns.Name, a.ifname, b.ns.Name, b.ifname, a.ns.Name, b.ns.Name)
	}
	return rep, nil
}

// geteuid is os.Geteuid, replaceable by tests.
var geteuid = os.Geteuid

// netNameTag makes this process's interface and namespace names unique.
func netNameTag() string { return fmt.Sprint(os.Getpid() % 1000000) }

func withConf(ns *Namespace, f func(c *netcfg.Conf) error) error {
	c, err := netcfg.NewAt(ns.Handle)
	if err != nil {
		return err
	}
	defer c.Close()
	return f(c)
}

// deleteLinkAnywhere removes the side's interface from its namespace or,
// if it never got there, from the host namespace. The daemon exits when
// its interface goes.
func deleteLinkAnywhere(s *side) error {
	if s.ns != nil {
		err := withConf(s.ns, func(c *netcfg.Conf) error { return c.DeleteLink(s.ifname) })
		if err == nil || !errors.Is(err, netcfg.ErrNoLink) {
			return err
		}
	}
	c, err := netcfg.New()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.DeleteLink(s.ifname); err != nil && !errors.Is(err, netcfg.ErrNoLink) {
		return err
	}
	return nil
}

// freeUDPPorts returns two ports free just now on IPv4 and, where the
// host has IPv6, on IPv6 as well (the daemons listen on both).
func freeUDPPorts() (int, int, error) {
	var ports []int
	var hold []net.PacketConn
	defer func() {
		for _, c := range hold {
			c.Close()
		}
	}()
	for tries := 0; len(ports) < 2; tries++ {
		if tries == 50 {
			return 0, 0, errors.New("no free UDP port pair found")
		}
		c, err := net.ListenPacket("udp4", ":0")
		if err != nil {
			return 0, 0, err
		}
		hold = append(hold, c)
		p := c.LocalAddr().(*net.UDPAddr).Port
		c6, err := net.ListenPacket("udp6", fmt.Sprintf(":%d", p))
		if errors.Is(err, syscall.EADDRINUSE) {
			continue // taken on IPv6: try another
		}
		if err == nil {
			hold = append(hold, c6)
		}
		ports = append(ports, p)
	}
	return ports[0], ports[1], nil
}

func countOK(rs []PingResult) int {
	n := 0
	for _, r := range rs {
		if r.OK {
			n++
		}
	}
	return n
}

func pingSummary(rs []PingResult) string {
	var min, max, sum time.Duration
	n := 0
	for _, r := range rs {
		if !r.OK {
			continue
		}
		if n == 0 || r.RTT < min {
			min = r.RTT
		}
		if r.RTT > max {
			max = r.RTT
		}
		sum += r.RTT
		n++
	}
	s := fmt.Sprintf("%d/%d replies", n, len(rs))
	if n > 0 {
		s += fmt.Sprintf(", rtt min/avg/max = %s/%s/%s", roundDur(min), roundDur(sum/time.Duration(n)), roundDur(max))
	}
	return s
}

func roundDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	default:
		return d.Round(10 * time.Microsecond).String()
	}
}

// formatRate renders bits per second with a decimal unit, as network
// tools do ("1.23 Gbit/s").
func formatRate(bps float64) string {
	units := []string{"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"}
	i := 0
	for bps >= 1000 && i < len(units)-1 {
		bps /= 1000
		i++
	}
	return strings.TrimSpace(fmt.Sprintf("%.2f %s", bps, units[i]))
}
