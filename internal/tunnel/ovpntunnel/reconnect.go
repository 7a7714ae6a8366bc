package ovpntunnel

// Reconnecting `wirelane ovpn connect` the way OpenVPN's client restarts
// (SIGUSR1) while the TUN device stays up:
//
//	session ends -> AUTH_FAILED, HALT: exit (status 1)
//	             -> ping-restart, transport error (TCP reset, socket
//	                error), RESTART, the server's exit notification:
//	                wait (1 s; doubling after five failed attempts, up to
//	                300 s, like connect-retry) -> client.Dial (the
//	                remotes in order) -> failed: wait again
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
// addresses, and host names resolved then, each lookup bounded by 5 s) gets a
// host route outside the tunnel before the redial, so the attempt does not
// loop into the tunnel.

import (
	"context"
	"errors"
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

// Reconnect pacing, as OpenVPN's connect-retry defaults: 1 s between
// attempts, doubled after the fifth failure up to 300 s.
var (
	retryWait    = time.Second
	retryMaxWait = 300 * time.Second
)

const retryBeforeBackoff = 5

// reconnector keeps a client tunnel up across sessions. Its methods run on
// the connect command's goroutine.
type reconnector struct {
	ctx     context.Context
	cfg     *config.Config
	opts    client.Options
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
			progress("disconnecting (telling the server)")
			sess.Close()
			teardown()
			return 0
		case <-sess.Done():
		}
		err := sess.Err()
		if !restartable(err) {
			progress("session ended: %v", err)
			teardown()
			return 1
		}
		progress("session ended: %v; reconnecting", err)
		next := r.redial()
		if next == nil {
			progress("interrupted while reconnecting")
			teardown()
			return 0
		}
		if err := r.apply(next); err != nil {
			progress("reconfiguring the device failed: %v", err)
			next.Close()
			teardown()
			return 1
		}
		r.dns.apply(next.Pushed()) // replaced only when the pushed DNS changed
		next.DeliverTo(r.dev, tunOffset)
		r.cur.Store(next)
		progress("tunnel up again (%s)", next.RemoteAddr())
	}
}

// redial dials until a session comes up; nil when interrupted.
func (r *reconnector) redial() *client.Session {
	wait := retryWait
	for attempt := 1; ; attempt++ {
		select {
		case <-r.ctx.Done():
			return nil
		case <-time.After(wait):
		}
		if r.routes {
			rd := parseRedirect(r.applied)
			rd.v6 = redirects6(r.applied, r.block.Load() != nil) // global IPv6 routed into the tunnel
			if rd.v4 || rd.v6 {
				r.keepRemotesOutside(rd)
			}
		}
		progress("reconnecting, attempt %d ...", attempt)
		s, err := client.Dial(r.ctx, r.cfg, r.opts)
		if err == nil {
			push := s.Pushed()
			progress("connected: %s, cipher %v, peer-id %s%s", ipv4String(push), s.Cipher(), peerIDString(push), ipv6String(push))
			if push.Local.IsValid() || push.Local6.IsValid() {
				return s
			}
			s.Close()
			err = errors.New("the server pushed no address (ifconfig or ifconfig-ipv6)")
		}
		if r.ctx.Err() != nil {
			return nil
		}
		if attempt >= retryBeforeBackoff {
			wait = min(wait*2, retryMaxWait)
		}
		progress("reconnect attempt %d failed: %v; next in %v", attempt, err, wait)
	}
}

// keepRemotesOutside adds a host route outside the tunnel for every
// remote of a family that rd redirects (the default route points into the
// tunnel); host names are resolved now.
func (r *reconnector) keepRemotesOutside(rd redirect) {
	have := append(slices.Clone(r.outside), r.cur.Load().RemoteAddr().Addr())
	for _, a := range remotesOutside(r.ctx, r.cfg, rd, have, lookupHost, progress) {
		if err := r.nc.addHostRouteOutside(a); err != nil {
			progress("no host route for remote %s: %v", a, err)
			continue
		}
		r.outside = append(r.outside, a)
	}
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
			progress("device address %s", push.Local)
		} else {
			progress("device address %s removed (none pushed now)", old.Local)
		}
	}
	if push.Local6 != old.Local6 {
		if err := r.nc.replaceAddr(old.Local6, push.Local6); err != nil {
			return err
		}
		if push.Local6.IsValid() {
			progress("device IPv6 address %s", push.Local6)
		} else {
			progress("device IPv6 address %s removed (none pushed now)", old.Local6)
		}
	}
	r.applied = push
	if !r.routes {
		return nil
	}
	return installRoutes(r.nc, server, push, b != nil)
}
