// Package ovpntunnel holds the `wirelane ovpn` commands:
//
//	wirelane ovpn connect [--dev NAME] [--mtu N] [--auth-file FILE] [--no-routes] [--dns auto|off] [--block-ipv6] [-v] FILE.ovpn
//	wirelane ovpn serve [--dev NAME] [-v] CONFIG
//
// Connect dials an OpenVPN server with ovpn/client, creates a TUN device,
// gives it the pushed address and routes through netlink, registers the
// pushed DNS servers with resolvconf (dns.go) and moves
// packets until Ctrl-C (or another of interrupt.Signals), then tells the server and removes
// what it added. When a session ends the way OpenVPN's client restarts
// after (ping-restart, a transport error, RESTART), it reconnects with
// the device kept up (reconnect.go). Serve runs ovpn/server on a TUN device carrying the
// server's tunnel address.
//
// Exit status: 0 after a clean shutdown, 1 when the tunnel failed or
// ended for good (AUTH_FAILED, HALT), 2 for a usage error.
package ovpntunnel

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/internal/tunnel/interrupt"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/tun"
)

// Output streams; tests replace them.
var (
	stdout io.Writer = os.Stdout
	stderr io.Writer = os.Stderr
)

const connectUsage = `Usage: wirelane ovpn connect [flags] FILE.ovpn

Connects to the OpenVPN server of a client configuration file, brings up a
TUN device with the pushed address and routes, registers the pushed DNS
servers and search domains with resolvconf(8) when it is installed (as
wg-quick does), and keeps the tunnel up until Ctrl-C. Needs root
(CAP_NET_ADMIN).`

// DescribeFlags, when set, is called by Connect and Serve with their usage
// text and flag set instead of running: cmd/wirelane builds its man page
// and shell completions from them, so those cannot drift from the flags.
var DescribeFlags func(usage string, fs *flag.FlagSet)

// newFlags returns a flag set that prints usage text plus the flags.
func newFlags(name, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printUsage(fs.Output(), usage, fs) }
	return fs
}

// printUsage prints usage and the flags in the style of every wirelane
// command's --help: long flags with two dashes, one-letter ones with one.
func printUsage(w io.Writer, usage string, fs *flag.FlagSet) {
	fmt.Fprintln(w, usage)
	fmt.Fprintln(w, "\nFlags:")
	fs.VisitAll(func(f *flag.Flag) {
		kind, text := flag.UnquoteUsage(f)
		name := "--" + f.Name
		if len(f.Name) == 1 {
			name = "-" + f.Name
		}
		if kind != "" {
			name += " " + strings.ToUpper(kind)
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" {
			text += " (default " + d + ")"
		}
		fmt.Fprintf(w, "  %s\n        %s\n", name, text)
	})
}

// parseArgs parses flags placed before or after the one positional
// argument. It returns the argument, or an exit status (0 after --help,
// which prints the usage on standard output).
func parseArgs(fs *flag.FlagSet, usage string, args []string) (string, int, bool) {
	if DescribeFlags != nil {
		DescribeFlags(usage, fs)
		return "", 0, false
	}
	fs.SetOutput(io.Discard) // errors and --help are printed below
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout, usage, fs)
				return "", 0, false
			}
			fmt.Fprintf(stderr, "%s: %v\n", fs.Name(), err)
			printUsage(stderr, usage, fs)
			return "", 2, false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(pos) != 1 {
		fmt.Fprintf(stderr, "%s: want exactly one file argument, got %d\n", fs.Name(), len(pos))
		printUsage(stderr, usage, fs)
		return "", 2, false
	}
	return pos[0], 0, true
}

func progress(format string, args ...any) {
	fmt.Fprintf(stdout, "ovpn: "+format+"\n", args...)
}

// warn prints a warning that does not stop the command.
func warn(format string, args ...any) {
	fmt.Fprintf(stderr, "wirelane ovpn connect: "+format+"\n", args...)
}

// Connect implements `wirelane ovpn connect`. It returns the exit status.
func Connect(args []string) int {
	fs := newFlags("wirelane ovpn connect", connectUsage)
	dev := fs.String("dev", "", "TUN interface name (default: the file's dev, tun means the kernel picks tunN)")
	mtu := fs.Int("mtu", 1500, "TUN MTU")
	authFile := fs.String("auth-file", "", "`file` with the username and password lines for auth-user-pass")
	noRoutes := fs.Bool("no-routes", false, "do not install pushed routes (addresses only)")
	blockFlag := fs.Bool("block-ipv6", false, "answer IPv6 packets into the tunnel with ICMPv6 no-route instead of sending them (as the block-ipv6 directive; with redirect-gateway, global IPv6 is routed into the tunnel)")
	dnsFlag := fs.String("dns", "auto", "pushed DNS servers: auto (register them with resolvconf when it is installed, else warn) or off")
	verbose := fs.Bool("v", false, "log protocol details to stderr")
	file, code, ok := parseArgs(fs, connectUsage, args)
	if !ok {
		return code
	}
	if *mtu < 576 || *mtu > 65535 {
		fmt.Fprintf(stderr, "wirelane ovpn connect: --mtu %d out of range 576..65535\n", *mtu)
		return 2
	}
	dnsMode, err := parseDNSMode(*dnsFlag)
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 2
	}
	logf := func(string, ...any) {}
	if *verbose {
		logf = func(format string, a ...any) {
			fmt.Fprintf(stderr, time.Now().Format("15:04:05.000 ")+format+"\n", a...)
		}
	}
	cfg, err := config.ParseFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	cfgBlock := *blockFlag || cfg.BlockIPv6
	for _, w := range cfg.Warnings {
		logf("%s: %s", file, w)
	}
	opts := client.Options{Logger: protocolLogger(*verbose)}
	if cfg.AuthUserPass && cfg.Username == "" {
		if *authFile == "" {
			fmt.Fprintf(stderr, "wirelane ovpn connect: %s uses auth-user-pass without credentials; pass --auth-file FILE (username line, password line)\n", file)
			return 2
		}
		b, err := os.ReadFile(*authFile)
		if err != nil {
			fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
			return 1
		}
		lines := strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n")
		if len(lines) < 2 || lines[0] == "" {
			fmt.Fprintf(stderr, "wirelane ovpn connect: %s: want a username line and a password line\n", *authFile)
			return 1
		}
		opts.Username, opts.Password = lines[0], lines[1]
	}
	ifname := *dev
	if ifname == "" {
		ifname = cfg.Dev
	}
	switch ifname {
	case "", "tun":
		ifname = "tun%d"
	}

	ctx, stop := interrupt.NotifyContext(context.Background())
	defer stop()
	for i, r := range cfg.Remotes {
		progress("remote %d of %d: %s %s", i+1, len(cfg.Remotes), r.Proto, r.Address())
	}
	progress("connecting (TLS handshake, key exchange, push) ...")
	sess, err := client.Dial(ctx, cfg, opts)
	if err != nil {
		if ctx.Err() != nil {
			progress("interrupted")
			return 1
		}
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	push := sess.Pushed()
	progress("connected: %s, cipher %v, peer-id %s%s", ipv4String(push), sess.Cipher(), peerIDString(push), ipv6String(push))
	if !push.Local.IsValid() && !push.Local6.IsValid() {
		sess.Close()
		fmt.Fprintln(stderr, "wirelane ovpn connect: the server pushed no address (ifconfig or ifconfig-ipv6)")
		return 1
	}

	abs, _ := filepath.Abs(file)
	// cur is the running session; reconnects replace it while the device
	// stays.
	var cur atomic.Pointer[client.Session]
	cur.Store(sess)
	snapshot := func(iface string) func() TunnelStatus {
		return func() TunnelStatus {
			sess := cur.Load()
			st := sess.Stats()
			return TunnelStatus{Kind: KindClient, Interface: iface, Config: abs, Remote: sess.RemoteAddr().String(),
				Proto: sess.Transport(), Cipher: sess.Cipher().String(), Address: prefixString(sess.Pushed().Local), Address6: prefixString(sess.Pushed().Local6), Since: st.Since,
				RxBytes: st.RxBytes, TxBytes: st.TxBytes}
		}
	}
	if ifname == "null" {
		progress("dev null: no TUN device; the tunnel carries no traffic")
		if len(push.DNS) > 0 {
			progress("pushed DNS servers %s not applied (no device)", joinAddrs(push.DNS))
		}
		pub, err := publishStatus(snapshot(""), statusInterval)
		if err != nil {
			progress("status not published: %v", err)
		}
		return waitSession(ctx, sess, pub.close)
	}
	d, err := tun.CreateTUN(ifname, *mtu)
	if err != nil {
		sess.Close()
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	name, _ := d.Name()
	nc, err := openLink(name, logf)
	if err == nil {
		err = nc.up(push.Local, push.Local6, *mtu)
	}
	if err != nil {
		sess.Close()
		d.Close()
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	progress("device %s: %s, mtu %d, up", name, bothString(push.Local, push.Local6), *mtu)
	dns := &dnsApplier{ifname: name, mode: dnsMode, local: cfg.DHCPOptions, res: newResolvconf(logf), progress: progress, warn: warn}
	teardown := func() {
		dns.remove()
		nc.teardown()
		d.Close()
		progress("removed routes and %s", name)
	}
	var block atomic.Pointer[block6] // read by the TUN reader, replaced on reconnect
	block.Store(newBlock6(cfgBlock, push))
	if b := block.Load(); b != nil {
		progress("block-ipv6: IPv6 packets into the tunnel are answered with ICMPv6 no-route from %s, not sent", b.src)
	}
	if !*noRoutes {
		if err := installRoutes(nc, sess.RemoteAddr().Addr(), push, block.Load() != nil); err != nil {
			sess.Close()
			teardown()
			fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
			return 1
		}
	}
	dns.apply(push)
	pub, err := publishStatus(snapshot(name), statusInterval)
	if err != nil {
		progress("status not published: %v", err)
	}
	go pumpFromTUN(d, &cur, &block)
	// The session's receive goroutines write to the device themselves,
	// a receive batch per write, so the device can coalesce it (GRO).
	sess.DeliverTo(d, tunOffset)
	progress("tunnel up; press Ctrl-C to disconnect")
	r := &reconnector{ctx: ctx, cfg: cfg, opts: opts, dev: d, nc: nc, dns: dns, routes: !*noRoutes, cur: &cur, applied: push,
		blockCfg: cfgBlock, block: &block}
	return r.run(func() { pub.close(); teardown() })
}

func peerIDString(p *control.PushReply) string {
	if !p.HasPeerID {
		return "none (DATA_V1)"
	}
	return fmt.Sprint(p.PeerID)
}

// ipv4String describes the pushed IPv4 address and gateway for the
// progress output.
func ipv4String(p *control.PushReply) string {
	if !p.Local.IsValid() {
		return "IPv6 only"
	}
	return fmt.Sprintf("address %s, gateway %s", p.Local, p.Remote)
}

// ipv6String describes the pushed IPv6 address for the progress output
// ("" when none was pushed).
func ipv6String(p *control.PushReply) string {
	switch {
	case !p.Local6.IsValid():
		return ""
	case p.Remote6.IsValid():
		return fmt.Sprintf(", IPv6 %s (remote %s)", p.Local6, p.Remote6)
	default:
		return fmt.Sprintf(", IPv6 %s", p.Local6)
	}
}

// prefixString is p as text, "" when invalid.
func prefixString(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

// addrString is a as text, "" when invalid.
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// waitSession waits for a signal or the end of the session.
func waitSession(ctx context.Context, sess *client.Session, teardown func()) int {
	select {
	case <-ctx.Done():
		progress("disconnecting (telling the server)")
		sess.Close()
		teardown()
		return 0
	case <-sess.Done():
		progress("session ended: %v", sess.Err())
		teardown()
		return 1
	}
}

// tunBatch bounds how many packets one device read or write moves; a TSO
// super-packet splits into up to about 45 segments at MTU 1500, and a
// smaller batch would drop it (tun.ErrTooManySegments).
const tunBatch = 128

// tunOffset is the room before each packet for the virtio-net header of
// Linux TUN devices with offloads.
const tunOffset = 16

// pumpFromTUN sends what the device reads into the current session's
// tunnel, a device batch per WritePackets call. While block-ipv6 is in
// force (block holds a blocker), IPv6 packets are answered on the device
// instead (block6.go), the replies of a batch in one write.
//
// The first buffer takes any packet (up to 64 KiB); the others, which the
// segments of a TSO train and gathered single packets land in, are sized
// for the device's MTU. That keeps the batch at about 250 KiB instead of
// 8 MiB, and lets the device gather single packets into one read (its
// gathering is for buffers of at most 16 KiB). A read that failed for a
// packet (one that fit no buffer, say after the MTU was raised) drops it,
// and the buffers grow to the MTU the device has now.
func pumpFromTUN(d tun.Device, cur *atomic.Pointer[client.Session], block *atomic.Pointer[block6]) {
	const offset = tunOffset
	n := min(max(d.BatchSize(), 1), tunBatch)
	bufs := make([][]byte, n)
	pkts := make([][]byte, n)
	sizes := make([]int, n)
	bufs[0] = make([]byte, offset+65535)
	size := segmentBufSize(d)
	for i := 1; i < n; i++ {
		bufs[i] = make([]byte, size)
	}
	var replyBufs, replies [][]byte // allocated when block-ipv6 first answers
	for {
		got, err := d.Read(bufs, sizes, offset)
		b := block.Load()
		k, r := 0, 0
		for i := 0; i < got; i++ {
			p := bufs[i][offset : offset+sizes[i]]
			if b != nil && len(p) > 0 && p[0]>>4 == 6 {
				if replyBufs == nil {
					replyBufs, replies = make([][]byte, n), make([][]byte, n)
					for j := range replyBufs {
						replyBufs[j] = make([]byte, offset+icmp6MaxLen)
					}
				}
				if m := icmp6Unreachable(replyBufs[r][offset:], p, b.src); m > 0 {
					replies[r] = replyBufs[r][:offset+m]
					r++
				}
				continue
			}
			pkts[k] = p
			k++
		}
		if k > 0 {
			// Between sessions the packets go to a closed one and are
			// dropped.
			_ = cur.Load().WritePackets(pkts[:k])
		}
		if r > 0 {
			_, _ = d.Write(replies[:r], offset)
		}
		switch {
		case err == nil || errors.Is(err, tun.ErrTooManySegments):
		case tun.ReadFatal(err):
			return
		default:
			if s := segmentBufSize(d); s > size {
				size = s
				for i := 1; i < n; i++ {
					bufs[i] = make([]byte, size)
				}
			}
		}
	}
}

// segmentBufSize is the size of pumpFromTUN's buffers after the first:
// the device's MTU (at least 1500) after the offset.
func segmentBufSize(d tun.Device) int {
	m, err := d.MTU()
	if err != nil || m < 1500 {
		m = 1500
	}
	return tunOffset + min(m, 65535)
}
