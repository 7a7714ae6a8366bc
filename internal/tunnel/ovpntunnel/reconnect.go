package ovpntunnel

// Reconnecting `wirelane ovpn connect` the way OpenVPN's client restarts
// (SIGUSR1) while the TUN device stays up:
//
//	session ends -> AUTH_FAILED, HALT: EXITING, exit (status 1)
//	             -> ping-restart, transport error (TCP reset, socket
//	                error), RESTART, the server's exit notification:
//	                RECONNECTING, wait 1 s -> client.Dial with Retry (the
//	                remotes in turn, pausing connect-retry between rounds,
//	                doubling after five, until connect-retry-max or
//	                resolv-retry give up: exit status 1); each address
//	                dialled gets its host route outside the tunnel first
//	                -> a session without an address: wait, dial again
//	                -> new session: same addresses (IPv4 and IPv6),
//	                   gateways, routes, redirect and server: nothing to
//	                   change; else readdress the device (each family on
//	                   its own) and replace the routes -> the resolvconf
//	                   record replaced when the pushed DNS changed (dns.go)
//	                   -> DeliverTo the device ->
//	                   the TUN reader sends into the new session
//
// Between sessions the device, its address and its routes stay: packets
// for the tunnel are dropped, none leave outside it. With
// redirect-gateway, every remote of a redirected family (literal
// addresses and host names as they resolve) gets a host route outside
// the tunnel before it is dialled, so the attempt does not loop into the
// tunnel.

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/tun"
)

// retryWait is the pause after a session ended before the redial, as
// OpenVPN's restart pause; tests shorten it.
var retryWait = time.Second

// reconnector keeps a client tunnel up across sessions. Its methods run on
// the connect command's goroutine.
type reconnector struct {
	ctx     context.Context
	cfg     *config.Config
	opts    client.Options // with Retry and OnEvent set
	ph      *phases
	dev     tun.Device
	nc      *netConf
	dns     *dnsApplier                     // the tunnel's resolvconf record
	routes  bool                            // install pushed routes (no --no-routes)
	cur     *atomic.Pointer[client.Session] // read by the TUN reader and the status snapshot
	applied *control.PushReply              // what the device and routes carry now
	outside []netip.Addr                    // host routes outside the tunnel already added
	// blockCfg is block-ipv6 from the configuration or the command line;
	// block is the blocker in force (nil: none), read by the TUN reader.
	blockCfg bool
	block    *atomic.Pointer[block6]
	// blockCmd is --block-ipv6 on the command line (a reload of the
	// file does not turn it off); file is the configuration reload
	// reads; reloads are its requests (reload_client.go).
	blockCmd bool
	file     string
	reloads  <-chan reloadReq
	// reask asks for the credentials again (the terminal or --auth-file)
	// before a redial that has neither a password (auth-nocache) nor an
	// auth-token; it returns credentials' exit status.
	reask func(*client.Options) int
}

// restartable reports whether OpenVPN's client would restart after a
// session that ended with err, rather than exit.
func restartable(err error) bool {
	return !errors.Is(err, client.ErrAuthFailed) && !errors.Is(err, client.ErrHalt) && !errors.Is(err, client.ErrClosed)
}

// run waits for Ctrl-C (status 0) or a session end that is not
// restartable (status 1), reconnecting in between; teardown removes the
// device and routes.
func (r *reconnector) run(teardown func()) int {
	for {
		sess := r.cur.Load()
		select {
		case <-r.ctx.Done():
			r.ph.report(client.StateExiting, "disconnecting (telling the server)", nil)
			sess.Close()
			teardown()
			return 0
		case req := <-r.reloads:
			p, err := r.reload(req.dry)
			if err != nil {
				progress("reload failed: %v", err)
			}
			req.reply <- reloadReply{p, err}
			continue
		case <-sess.Done():
		}
		err := sess.Err()
		if !restartable(err) {
			r.ph.report(client.StateExiting, fmt.Sprintf("session ended: %v", err), nil)
			teardown()
			return 1
		}
		r.ph.restart()
		r.ph.report(client.StateReconnect, fmt.Sprintf("session ended: %v; reconnecting", err), nil)
		next, err := r.redial(nextServer(r.cfg, sess, err))
		if next == nil {
			if r.ctx.Err() != nil {
				r.ph.report(client.StateExiting, "interrupted while reconnecting", nil)
				teardown()
				return 0
			}
			r.ph.stopped(err)
			fmt.Fprintf(stderr, "wirelane ovpn connect: %v\n", err)
			teardown()
			return 1
		}
		if err := r.apply(next); err != nil {
			progress("reconfiguring the device failed: %v", err)
			next.Close()
			teardown()
			return 1
		}
		if err := r.dns.apply(next.Pushed()); err != nil { // replaced only when the pushed DNS changed
			progress("%v", err)
			next.Close()
			teardown()
			return 1
		}
		next.DeliverTo(r.dev, tun.Offset)
		r.cur.Store(next)
		r.ph.report(client.StateConnected, connectedLine(next, r.nc.name, r.ph.elapsed()), nil)
		progress("tunnel up again (%s)", next.RemoteAddr())
	}
}

// redial dials until a session with an address comes up: nil and why
// when interrupted or when the retry directives give up.
func (r *reconnector) redial(cfg *config.Config) (*client.Session, error) {
	opts := r.opts
	if r.routes {
		rd := parseRedirect(r.applied)
		rd.v6 = redirects6(r.applied, r.block.Load() != nil) // global IPv6 routed into the tunnel
		if rd.v4 || rd.v6 {
			// Every address dialled first gets a host route outside the
			// tunnel (CONNECTING is reported on this goroutine, before the
			// socket sends).
			have := []netip.Addr{r.cur.Load().RemoteAddr().Addr()}
			next := opts.OnEvent
			opts.OnEvent = func(e client.Event) {
				if (e.State == client.StateConnecting || e.State == client.StateTCPConnect) && e.Err == nil && e.Addr.IsValid() {
					r.keepOutside(rd, e.Addr.Addr(), have)
				}
				if next != nil {
					next(e)
				}
			}
		}
	}
	for {
		select {
		case <-r.ctx.Done():
			return nil, r.ctx.Err()
		case <-time.After(retryWait):
		}
		dialOpts := opts
		if r.cfg.AuthNoCache && !opts.AuthToken.Held() && r.reask != nil {
			// auth-nocache forgot the password and the server gave no
			// token (or refused it): ask again, as OpenVPN does.
			if code := r.reask(&dialOpts); code != 0 {
				return nil, errors.New("auth-nocache: the credentials are needed again to reconnect")
			}
		}
		s, err := client.Dial(r.ctx, cfg, dialOpts)
		if err != nil {
			return nil, err
		}
		push := s.Pushed()
		if push.Local.IsValid() || push.Local6.IsValid() {
			return s, nil
		}
		s.Close()
		progress("the server pushed no address (ifconfig or ifconfig-ipv6); reconnecting")
	}
}

// nextServer is the configuration to redial with after a session ended
// with err: for RESTART,[N] (the server's explicit-exit-notify 2) its
// remote list starts after the one that session used, as OpenVPN's client
// moves on; otherwise cfg itself.
func nextServer(cfg *config.Config, ended *client.Session, err error) *config.Config {
	return nextServerFrom(cfg, ended.RemoteEntry(), err)
}

func nextServerFrom(cfg *config.Config, used config.Remote, err error) *config.Config {
	if !errors.Is(err, client.ErrRestartNext) || len(cfg.Remotes) < 2 {
		return cfg
	}
	i := slices.Index(cfg.Remotes, used)
	if i < 0 {
		return cfg
	}
	c := *cfg
	c.Remotes = append(slices.Clone(cfg.Remotes[i+1:]), cfg.Remotes[:i+1]...)
	return &c
}

// keepOutside adds a host route outside the tunnel for a, a remote's
// address, when rd redirects its family (the default route points into
// the tunnel) and it has none yet (have: the routes the tunnel set up).
func (r *reconnector) keepOutside(rd redirect, a netip.Addr, have []netip.Addr) {
	if (a.Is4() && !rd.v4) || (a.Is6() && !rd.v6) || slices.Contains(have, a) || slices.Contains(r.outside, a) {
		return
	}
	if err := r.nc.addHostRouteOutside(a); err != nil {
		progress("no host route for remote %s: %v", a, err)
		return
	}
	r.nc.log.Info("host route outside the tunnel", "remote", a)
	r.outside = append(r.outside, a)
}

// sameConfig reports whether sessions pushing a and b, served from
// serverA and serverB, need the same device addresses and routes.
func sameConfig(a, b *control.PushReply, serverA, serverB netip.Addr) bool {
	return a.Local == b.Local && a.Remote == b.Remote && a.Local6 == b.Local6 && a.Remote6 == b.Remote6 &&
		slices.Equal(a.Routes, b.Routes) && maps.Equal(a.RouteGateways, b.RouteGateways) &&
		parseRedirect(a) == parseRedirect(b) && a.BlockIPv6 == b.BlockIPv6 && serverA == serverB
}

// apply brings the device's addresses and routes in line with s's push.
func (r *reconnector) apply(s *client.Session) error {
	push, old := s.Pushed(), r.applied
	server := s.RemoteAddr().Addr()
	if sameConfig(push, old, server, r.cur.Load().RemoteAddr().Addr()) {
		return nil
	}
	b := newBlock6(r.blockCfg, push)
	r.block.Store(b)
	progress("the new session differs (%s%s, server %s): reconfiguring", ipv4String(push), ipv6String(push), server)
	r.nc.teardown()
	r.outside = nil
	if push.Local != old.Local {
		if err := r.nc.replaceAddr(old.Local, push.Local); err != nil {
			return err
		}
		if push.Local.IsValid() {
			r.ph.report(client.StateAssignIP, fmt.Sprintf("device address %s", push.Local), nil)
		} else {
			r.ph.report(client.StateAssignIP, fmt.Sprintf("device address %s removed (none pushed now)", old.Local), nil)
		}
	}
	if push.Local6 != old.Local6 {
		if err := r.nc.replaceAddr(old.Local6, push.Local6); err != nil {
			return err
		}
		if push.Local6.IsValid() {
			r.ph.report(client.StateAssignIP, fmt.Sprintf("device IPv6 address %s", push.Local6), nil)
		} else {
			r.ph.report(client.StateAssignIP, fmt.Sprintf("device IPv6 address %s removed (none pushed now)", old.Local6), nil)
		}
	}
	r.applied = push
	if !r.routes {
		return nil
	}
	p, err := installRoutes(r.nc, server, push, b != nil)
	if err == nil {
		r.ph.report(client.StateAddRoutes, routesLine(p, parseRedirect(push)), nil)
	}
	return err
}
