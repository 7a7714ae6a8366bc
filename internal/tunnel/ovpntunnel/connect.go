// Package ovpntunnel brings OpenVPN tunnels up and down: what
// `wirelane ovpn connect` and `wirelane ovpn serve` run once cmd/wirelane
// has parsed their flags (ConnectOptions, ServeOptions).
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
// ended for good (AUTH_FAILED, HALT), 2 for a usage error (a file that
// asks for credentials the options do not give).
package ovpntunnel

import (
	"context"
	"errors"
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

func progress(format string, args ...any) {
	fmt.Fprintf(stdout, "ovpn: "+format+"\n", args...)
}

// warn prints a warning that does not stop the command.
func warn(format string, args ...any) {
	fmt.Fprintf(stderr, "wirelane ovpn connect: "+format+"\n", args...)
}

// ConnectOptions is what `wirelane ovpn connect` was asked to do.
type ConnectOptions struct {
	// File is the client configuration (.ovpn).
	File string
	// Dev names the TUN device: "" takes the file's dev, and "tun" (or
	// none in the file) lets the kernel pick tunN.
	Dev string
	// MTU of the TUN device, 576 to 65535.
	MTU int
	// AuthFile holds the username and password lines for auth-user-pass.
	AuthFile string
	// NoRoutes installs no pushed routes (addresses only).
	NoRoutes bool
	// BlockIPv6 answers IPv6 packets into the tunnel with ICMPv6 no-route
	// instead of sending them, as the block-ipv6 directive does.
	BlockIPv6 bool
	// DNS says what to do with pushed DNS servers.
	DNS DNSMode
	// Verbose logs protocol details to stderr.
	Verbose bool
}

// Connect runs an OpenVPN client until it is interrupted or the tunnel
// ends for good, and returns the exit status.
func Connect(o ConnectOptions) int {
	file := o.File
	logf := func(string, ...any) {}
	if o.Verbose {
		logf = func(format string, a ...any) {
			fmt.Fprintf(stderr, time.Now().Format("15:04:05.000 ")+format+"\n", a...)
		}
	}
	cfg, err := config.ParseFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	cfgBlock := o.BlockIPv6 || cfg.BlockIPv6
	for _, w := range cfg.Warnings {
		logf("%s: %s", file, w)
	}
	opts := client.Options{Logger: protocolLogger(o.Verbose)}
	if cfg.AuthUserPass && cfg.Username == "" {
		if o.AuthFile == "" {
			fmt.Fprintf(stderr, "wirelane ovpn connect: %s uses auth-user-pass without credentials; pass --auth-file FILE (username line, password line)\n", file)
			return 2
		}
		b, err := os.ReadFile(o.AuthFile)
		if err != nil {
			fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
			return 1
		}
		lines := strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n")
		if len(lines) < 2 || lines[0] == "" {
			fmt.Fprintf(stderr, "wirelane ovpn connect: %s: want a username line and a password line\n", o.AuthFile)
			return 1
		}
		opts.Username, opts.Password = lines[0], lines[1]
	}
	ifname := o.Dev
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
	d, err := tun.CreateTUN(ifname, o.MTU)
	if err != nil {
		sess.Close()
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	name, _ := d.Name()
	nc, err := openLink(name, logf)
	if err == nil {
		err = nc.up(push.Local, push.Local6, o.MTU)
	}
	if err != nil {
		sess.Close()
		d.Close()
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	progress("device %s: %s, mtu %d, up", name, bothString(push.Local, push.Local6), o.MTU)
	dns := &dnsApplier{ifname: name, mode: o.DNS, local: cfg.DHCPOptions, res: newResolvconf(logf), progress: progress, warn: warn}
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
	if !o.NoRoutes {
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
	r := &reconnector{ctx: ctx, cfg: cfg, opts: opts, dev: d, nc: nc, dns: dns, routes: !o.NoRoutes, cur: &cur, applied: push,
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
