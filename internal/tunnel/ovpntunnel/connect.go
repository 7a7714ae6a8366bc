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
// the device kept up (reconnect.go). Every step is a progress line on
// stderr and an event for a program (phases.go); credentials the file
// asks for and does not hold are typed on the terminal (prompt.go).
// Serve runs ovpn/server on a TUN device carrying the server's tunnel
// address.
//
// Exit status: 0 after a clean shutdown, 1 when the tunnel failed or
// ended for good (AUTH_FAILED, HALT, the retry directives gave up), 2 for
// a usage error (a file that asks for credentials the options do not
// give, with no terminal to type them on).
package ovpntunnel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/internal/tunnel/interrupt"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/tun"
)

// stderr takes the progress lines and warnings, as openvpn's log does,
// so stdout stays free for scripts; tests replace it.
var stderr io.Writer = os.Stderr

func progress(format string, args ...any) {
	fmt.Fprintf(stderr, "ovpn: "+format+"\n", args...)
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
	// MTU of the TUN device, 576 to 65535; 0 takes a pushed tun-mtu,
	// else the file's, else 1500 (mtu.go).
	MTU int
	// AuthFile holds the username and password lines for auth-user-pass
	// (the username line alone: the password is asked for).
	// Without it (and without credentials in the file) they are asked
	// for on the terminal.
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
	// OnEvent, when set, receives every phase of the tunnel as it
	// happens (phases.go): those of ovpn/client's Dial (RESOLVE to
	// GET_CONFIG, each failure with Err set) and Connect's own
	// (ASSIGN_IP, ADD_ROUTES, CONNECTED, RECONNECTING, EXITING), one at
	// a time and in order; Elapsed counts from the start of the current
	// connection attempt. It must not block for long.
	OnEvent func(client.Event)
	// Context, when set, ends the tunnel once it is done, as Ctrl-C does;
	// the signals are then the caller's, not caught (nil: Ctrl-C and the
	// other interrupt.Signals end it).
	Context context.Context
	// Credentials, when set, is asked for the credentials the file needs
	// and does not hold, instead of the terminal (a service asks its
	// client) for what the request wants (the username, unless the
	// request gives it, and password; a challenge's response). An error
	// ends the tunnel.
	Credentials func(CredentialRequest) (user, pass, response string, err error)
	// Reloader, when set, reloads the running client from File on
	// request (the service's reload; reload_client.go); the control
	// socket (`wirelane reload`) does the same without it.
	Reloader *Reloader
	// Hosted says the process is the service (wirelaned): the file's
	// user and group are not applied, with a warning (privileges.go).
	Hosted bool
}

// Connect runs an OpenVPN client until it is interrupted or the tunnel
// ends for good, and returns the exit status.
func Connect(o ConnectOptions) int {
	file := o.File
	log := protocolLogger(o.Verbose)
	procs.Current().LogThreads(log)
	noDump(warn)
	cfg, err := config.ParseFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	target, err := dropTarget(file, &cfg.Common)
	if err != nil && !o.Hosted {
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	if code := unlockKeyWith("connect", file, &cfg.Common, o.Credentials); code != 0 {
		return code
	}
	for _, w := range secretWarnings(file, &cfg.Common, o.AuthFile) {
		warn("%s", w)
	}
	cfgBlock := o.BlockIPv6 || cfg.BlockIPv6
	if o.Verbose {
		for _, w := range cfg.Warnings {
			msg := w.Message
			if msg == "" {
				msg = "ignored"
			}
			warn("%s:%d: %s: %s", file, w.Line, w.Directive, msg)
		}
	} else {
		for _, l := range warningsSummary(file, cfg.Warnings, o.DNS) {
			warn("%s", l)
		}
	}
	ph := newPhases(o.OnEvent)
	// One AuthToken for every session of the tunnel: a reconnect
	// authenticates with the token the server pushed (authtoken.go).
	opts := client.Options{Logger: log, Retry: true, OnEvent: ph.event, OnWarning: func(m string) { warn("%s", m) },
		AuthToken: new(client.AuthToken), PushMTU: pushMTULimit(o.MTU, cfg)}
	if code := credentials(o, cfg, &opts); code != 0 {
		return code
	}
	ifname := o.Dev
	if ifname == "" {
		ifname = cfg.Dev
	}
	switch ifname {
	case "", "tun":
		ifname = "tun%d"
	}

	// With a context, the signals are the caller's (a service must not
	// stop its tunnels on a SIGPIPE from a client that hung up).
	var ctx context.Context
	var stop context.CancelFunc
	if o.Context != nil {
		ctx, stop = context.WithCancel(o.Context)
	} else {
		ctx, stop = interrupt.NotifyContext(context.Background())
	}
	defer stop()
	ph.restart()
	sess, err := client.Dial(ctx, cfg, opts)
	for round := 0; round < maxChallenges; round++ {
		var ch *client.ChallengeError
		if !errors.As(err, &ch) {
			break
		}
		// A dynamic challenge (CRV1): ask, and dial again with the answer.
		if code := answerChallenge(o, cfg, &opts, ch); code != 0 {
			return code
		}
		ph.restart()
		sess, err = client.Dial(ctx, cfg, opts)
	}
	if err != nil {
		if ctx.Err() != nil {
			ph.report(client.StateExiting, "interrupted", nil)
			return 1
		}
		ph.stopped(err)
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	push := sess.Pushed()
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
				RxBytes: st.RxBytes, TxBytes: st.TxBytes, DroppedControl: st.DroppedControl, DroppedData: st.DroppedData,
				DroppedCompressed: st.DroppedCompressed, DecompressFailed: st.DecompressFailed, SocketSendErrors: sess.SocketSendErrors()}
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
		if err := dropPrivileges(target, o.Hosted, "", pub, warn); err != nil {
			sess.Close()
			pub.close()
			fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
			return 1
		}
		ph.report(client.StateConnected, connectedLine(sess, "", ph.elapsed()), nil)
		return waitSession(ctx, sess, ph, pub.close)
	}
	mtu, mtuNote := tunMTU(o.MTU, cfg, push.TunMTU)
	if mtuNote != "" {
		progress("%s", mtuNote)
	}
	raw, err := tun.CreateTUN(ifname, mtu)
	if err != nil {
		sess.Close()
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	d := &countedTUN{Device: raw} // tunerrors.go
	name, _ := d.Name()
	nc, err := openLink(name, log)
	if err == nil {
		err = nc.up(push.Local, push.Local6, mtu)
	}
	if err != nil {
		sess.Close()
		d.Close()
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	ph.report(client.StateAssignIP, fmt.Sprintf("device %s: %s, mtu %d, up", name, bothString(push.Local, push.Local6), mtu), nil)
	dns := &dnsApplier{ifname: name, mode: o.DNS, local: cfg.DHCPOptions, res: newResolvconf(log), progress: progress, warn: warn}
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
		p, err := installRoutes(nc, sess.RemoteAddr().Addr(), push, block.Load() != nil)
		if err != nil {
			sess.Close()
			teardown()
			fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
			return 1
		}
		ph.report(client.StateAddRoutes, routesLine(p, parseRedirect(push)), nil)
	}
	if err := dns.apply(push); err != nil {
		sess.Close()
		teardown()
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	rl := o.Reloader
	if rl == nil {
		rl = NewReloader()
	}
	reloads, detach := rl.attach()
	defer detach()
	ctl, err := openControl(controlPath(), rl)
	if err != nil {
		progress("no reload through `wirelane reload`: %v", err)
	}
	defer ctl.close()
	withControl := func(f func() TunnelStatus) func() TunnelStatus {
		return func() TunnelStatus {
			st := f()
			st.TUNErrors = d.count()
			if ctl != nil {
				st.Control = ctl.path
			}
			return st
		}
	}
	pub, err := publishStatus(withControl(snapshot(name)), statusInterval)
	if err != nil {
		progress("status not published: %v", err)
	}
	if err := dropPrivileges(target, o.Hosted, dns.holder(), pub, warn); err != nil {
		sess.Close()
		pub.close()
		teardown()
		fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
		return 1
	}
	go pumpFromTUN(d, &cur, &block)
	// The session's receive goroutines write to the device themselves,
	// a receive batch per write, so the device can coalesce it (GRO).
	sess.DeliverTo(d, tun.Offset)
	ph.report(client.StateConnected, connectedLine(sess, name, ph.elapsed()), nil)
	progress("tunnel up; press Ctrl-C to disconnect")
	r := &reconnector{ctx: ctx, cfg: cfg, opts: forgetPassword(cfg, opts), ph: ph, dev: d, nc: nc, dns: dns, routes: !o.NoRoutes, cur: &cur, applied: push,
		blockCfg: cfgBlock, block: &block, blockCmd: o.BlockIPv6, file: file, reloads: reloads,
		reask: func(opts *client.Options) int { return credentials(o, cfg, opts) }}
	return r.run(func() { pub.close(); teardown() })
}

// maxChallenges bounds the dynamic challenges answered in a row.
const maxChallenges = 3

// answerChallenge asks the response to a dynamic challenge (the
// terminal, or ConnectOptions.Credentials: the service's auth event) and
// makes the next Dial send it (as the file's or the typed credentials).
// It returns an exit status (0: answered).
func answerChallenge(o ConnectOptions, cfg *config.Config, opts *client.Options, ch *client.ChallengeError) int {
	ask := func() (string, string, string, error) {
		return promptCredentials(stdin, stderr, CredentialRequest{Challenge: ch.Text, Echo: ch.Echo})
	}
	if o.Credentials != nil {
		ask = func() (string, string, string, error) {
			return o.Credentials(CredentialRequest{Challenge: ch.Text, Echo: ch.Echo})
		}
	}
	_, _, resp, err := ask()
	if errors.Is(err, errNotTerminal) {
		fmt.Fprintf(stderr, "wirelane ovpn connect: the server asks a challenge (%q); run on a terminal to answer it\n", ch.Text)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn connect: reading the challenge response: %v\n", err)
		return 1
	}
	user, pass := ch.Answer(resp)
	if cfg.Username != "" {
		cfg.Username, cfg.Password = user, pass
	}
	opts.Username, opts.Password = user, pass
	return 0
}

// forgetPassword returns opts without the typed (or --auth-file)
// password and static-challenge answer when the file says auth-nocache:
// reconnects then use the server's auth-token, or ask again.
func forgetPassword(cfg *config.Config, opts client.Options) client.Options {
	if cfg.AuthNoCache {
		opts.Password, opts.ChallengeResponse = "", ""
	}
	return opts
}

// credentials fills opts with the username and password (and the
// static-challenge response) when the file asks for them: from
// --auth-file, else typed on the terminal (or ConnectOptions.Credentials).
// A file that gives the username only (config.Config.AsksPassword) has
// its password asked for, as OpenVPN 2.6 prompts for it. It returns a
// non-zero exit status when they cannot be had.
func credentials(o ConnectOptions, cfg *config.Config, opts *client.Options) int {
	req := CredentialRequest{Password: cfg.AuthUserPass && (cfg.Username == "" || cfg.AsksPassword()),
		Challenge: cfg.StaticChallenge, Echo: cfg.StaticChallengeEcho}
	if cfg.AsksPassword() {
		req.Username = cfg.Username
	}
	if !req.Password && req.Challenge == "" {
		return 0
	}
	if req.Password && o.AuthFile != "" {
		b, err := os.ReadFile(o.AuthFile)
		if err != nil {
			fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
			return 1
		}
		user, pass, err := config.ParseUserPass(string(b))
		if err != nil {
			fmt.Fprintf(stderr, "wirelane ovpn connect: %s: %v\n", o.AuthFile, err)
			return 1
		}
		// The auth file's credentials replace the file's; with its
		// username only, the password is still asked for.
		opts.Username, opts.Password = user, pass
		req.Password, req.Username = pass == "", user
	}
	if !req.Password && req.Challenge == "" {
		return 0
	}
	ask := func() (string, string, string, error) { return promptCredentials(stdin, stderr, req) }
	if o.Credentials != nil {
		ask = func() (string, string, string, error) { return o.Credentials(req) }
	}
	user, pass, resp, err := ask()
	if errors.Is(err, errNotTerminal) {
		what := "auth-user-pass without credentials; pass --auth-file FILE (username line, password line) or run on a terminal to type them"
		switch {
		case req.Password && req.Username != "":
			what = fmt.Sprintf("auth-user-pass with the username %q and no password; pass --auth-file FILE (username line, password line) or run on a terminal to type it", req.Username)
		case !req.Password:
			what = fmt.Sprintf("static-challenge %q: the response must be typed; run on a terminal", cfg.StaticChallenge)
		}
		fmt.Fprintf(stderr, "wirelane ovpn connect: %s uses %s\n", o.File, what)
		return 2
	}
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn connect: reading credentials: %v\n", err)
		return 1
	}
	if req.Password {
		if req.Username != "" {
			user = req.Username // the file's (or auth file's); an answer does not change it
		}
		opts.Username, opts.Password = user, pass
	}
	opts.ChallengeResponse = resp
	return 0
}

// connectedLine is the CONNECTED progress line: the tunnel's addresses,
// the server and how long it took.
func connectedLine(s *client.Session, dev string, took time.Duration) string {
	push := s.Pushed()
	on := ""
	if dev != "" {
		on = " on " + dev
	}
	return fmt.Sprintf("connected: %s%s via %s (%s), cipher %v, peer-id %s, in %.1f s",
		bothString(push.Local, push.Local6), on, s.RemoteAddr(), s.Transport(), s.Cipher(), peerIDString(push), took.Seconds())
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
func waitSession(ctx context.Context, sess *client.Session, ph *phases, teardown func()) int {
	select {
	case <-ctx.Done():
		ph.report(client.StateExiting, "disconnecting (telling the server)", nil)
		sess.Close()
		teardown()
		return 0
	case <-sess.Done():
		ph.report(client.StateExiting, fmt.Sprintf("session ended: %v", sess.Err()), nil)
		teardown()
		return 1
	}
}

// pumpFromTUN sends what the device reads into the current session's
// tunnel, a device batch per WritePackets call, through the one TUN pump
// (tun.Reader: the first buffer takes any packet, the others are sized for
// the device's MTU and follow it after a dropped read; only what
// tun.ReadFatal calls fatal ends it). While block-ipv6 is in force (block
// holds a blocker), IPv6 packets are answered on the device instead
// (block6.go), the replies of a batch in one write.
func pumpFromTUN(d tun.Device, cur *atomic.Pointer[client.Session], block *atomic.Pointer[block6]) {
	const offset = tun.Offset
	var rc tun.ReaderConfig
	if c, ok := d.(*countedTUN); ok {
		rc.Dropped = c.readDropped
	}
	rd := tun.NewReader(d, rc)
	n := len(rd.Buffers())
	pkts := make([][]byte, n)
	var replyBufs, replies [][]byte // allocated when block-ipv6 first answers
	for {
		got, err := rd.Read()
		if err != nil {
			return
		}
		b := block.Load()
		k, r := 0, 0
		for i := 0; i < got; i++ {
			p := rd.Packet(i)
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
	}
}
