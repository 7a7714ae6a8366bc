package ovpntunnel

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"sort"
	"time"

	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/internal/tunnel/interrupt"
	"github.com/wirelane/wirelane/ovpn/server"
	"github.com/wirelane/wirelane/tun"
)

// ServeOptions is what `wirelane ovpn serve` was asked to do.
type ServeOptions struct {
	// File is the server configuration.
	File string
	// Dev names the TUN device: "" takes the file's dev, and "tun" (or
	// none in the file) lets the kernel pick tunN.
	Dev string
	// Verbose logs protocol details to stderr.
	Verbose bool
	// Context, when set, stops the server once done, as Ctrl-C does; the
	// signals are then the caller's (nil: interrupt.Signals stop it).
	Context context.Context
	// Reloader, when set, reloads the running server from File on
	// request (the service's reload); the control socket (`wirelane
	// reload`) does the same without it.
	Reloader *Reloader
	// OnServer, when set, receives the server once it exists (a host reads
	// its Stats for metrics); OnEvent, when set, every client's arrival and
	// departure.
	OnServer func(*server.Server)
	OnEvent  func(server.Event)
	// Hosted says the process is the service (wirelaned): the file's
	// user and group are not applied, with a warning (privileges.go).
	Hosted bool
}

// Serve runs an OpenVPN server until it is interrupted, and returns the
// exit status.
func Serve(o ServeOptions) int {
	file := o.File
	log := protocolLogger(o.Verbose)
	procs.Current().LogThreads(log)
	warnf := func(format string, args ...any) { fmt.Fprintf(stderr, "wirelane ovpn serve: "+format+"\n", args...) }
	noDump(warnf)
	cfg, err := server.ParseConfigFile(file)
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn serve: %v\n", err)
		return 1
	}
	target, err := dropTarget(file, &cfg.Common)
	if err != nil && !o.Hosted {
		fmt.Fprintf(stderr, "wirelane ovpn serve: %v\n", err)
		return 1
	}
	if code := unlockKey("serve", file, &cfg.Common); code != 0 {
		return code
	}
	for _, w := range secretWarnings(file, &cfg.Common) {
		warnf("%s", w)
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(stderr, "wirelane ovpn serve: %s: %s\n", file, w)
	}
	ifname := o.Dev
	if ifname == "" {
		ifname = cfg.Dev
	}
	if ifname == "" || ifname == "tun" {
		ifname = "tun%d"
	}
	mtu := cfg.MTU
	if mtu == 0 {
		mtu = 1500
	}
	d, err := tun.CreateTUN(ifname, mtu)
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn serve: %v\n", err)
		return 1
	}
	defer d.Close()
	name, _ := d.Name()
	s, err := server.New(cfg, server.Options{Logger: log, Events: func(e server.Event) {
		c := e.Client
		switch e.Kind {
		case server.ClientConnected:
			progress("client %q connected from %s: address %s, peer-id %d, %v", c.CommonName, c.Remote, bothString(c.Address, c.Address6), c.PeerID, c.Cipher)
		case server.ClientDisconnected:
			progress("client %q (%s) left: %s", c.CommonName, bothString(c.Address, c.Address6), e.Reason)
		case server.ClientWarning:
			warnf("client %q (%s): %s", c.CommonName, bothString(c.Address, c.Address6), e.Reason)
		}
		if o.OnEvent != nil {
			o.OnEvent(e)
		}
	}})
	if err != nil {
		fmt.Fprintf(stderr, "wirelane ovpn serve: %v\n", err)
		return 1
	}
	if o.OnServer != nil {
		o.OnServer(s)
	}
	nc, err := openLink(name, log)
	if err == nil {
		err = nc.up(s.TunnelAddress(), s.TunnelAddress6(), mtu)
	}
	for _, r := range cfg.Routes {
		if err != nil {
			break
		}
		err = nc.addRoute(r, netip.Addr{})
	}
	if err != nil {
		s.Close()
		fmt.Fprintf(stderr, "wirelane ovpn serve: %v\n", err)
		return 1
	}
	defer nc.teardown()
	progress("device %s: %s, mtu %d, up", name, bothString(s.TunnelAddress(), s.TunnelAddress6()), mtu)
	progress("listening on %s %s; clients get addresses from %s; Ctrl-C stops", cfg.Proto, s.Addr(), bothString(cfg.Network, cfg.Network6))

	abs, _ := filepath.Abs(file)
	started := time.Now()
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
	ctlPath := ""
	if ctl != nil {
		ctlPath = ctl.path
	}
	rx := &serverReload{file: file, name: name, s: s, nc: nc}
	pub, err := publishStatus(func() TunnelStatus {
		st := TunnelStatus{Kind: KindServer, Interface: name, Config: abs, Remote: s.Addr().String(), Proto: string(cfg.Proto), Control: ctlPath,
			Address: prefixString(s.TunnelAddress()), Address6: prefixString(s.TunnelAddress6()), Since: started,
			TUNErrors: s.Stats().TUNErrors.Load(), SocketSendErrors: s.Stats().SocketSendErrors.Load()}
		s.Stats().FailedHandshakes.Each(func(reason string, n uint64) {
			if n > 0 {
				if st.HandshakesFailed == nil {
					st.HandshakesFailed = map[string]uint64{}
				}
				st.HandshakesFailed[reason] = n
			}
		})
		for _, c := range s.Clients() {
			st.RxBytes += c.RxBytes
			st.TxBytes += c.TxBytes
			st.Clients = append(st.Clients, ClientStatus{CommonName: c.CommonName, Remote: c.Remote.String(),
				Address: addrString(c.Address), Address6: addrString(c.Address6), PeerID: c.PeerID, Cipher: c.Cipher.String(), KeyID: c.KeyID, Since: c.Since,
				RxBytes: c.RxBytes, TxBytes: c.TxBytes})
		}
		sort.Slice(st.Clients, func(i, j int) bool { return st.Clients[i].PeerID < st.Clients[j].PeerID })
		return st
	}, statusInterval)
	if err != nil {
		progress("status not published: %v", err)
	}
	defer pub.close()
	if err := dropPrivileges(target, o.Hosted, "", pub, warnf); err != nil {
		s.Close()
		fmt.Fprintf(stderr, "wirelane ovpn serve: %v\n", err)
		return 1
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
	attached := make(chan error, 1)
	go func() { attached <- s.AttachTUN(d) }()
	for {
		select {
		case req := <-reloads:
			p, err := rx.reload(req.dry)
			if err != nil {
				progress("reload failed: %v", err)
			}
			req.reply <- reloadReply{p, err}
		case <-ctx.Done():
			progress("shutting down (telling clients to reconnect later)")
			s.Close()
			<-attached
			return 0
		case err := <-attached:
			s.Close()
			fmt.Fprintf(stderr, "wirelane ovpn serve: %v\n", err)
			return 1
		}
	}
}

// bothString joins the valid ones of a tunnel's IPv4 and IPv6 addresses
// (or prefixes) for messages.
func bothString[T interface {
	IsValid() bool
	String() string
}](v4, v6 T) string {
	switch {
	case !v6.IsValid():
		return v4.String()
	case !v4.IsValid():
		return v6.String()
	}
	return v4.String() + " and " + v6.String()
}

// protocolLogger is where the OpenVPN client and server log: stderr with
// -v, nowhere otherwise.
func protocolLogger(verbose bool) *slog.Logger {
	if !verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(stderr, nil))
}
