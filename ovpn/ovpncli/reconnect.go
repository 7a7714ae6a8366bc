package ovpncli

// Reconnecting `wirelane ovpn connect` the way OpenVPN's client restarts
// (SIGUSR1) while the TUN device stays up:
//
//	session ends -> AUTH_FAILED, HALT: exit (status 1)
//	             -> ping-restart, transport error (TCP reset, socket
//	                error), RESTART, the server's exit notification:
//	                wait (1 s; doubling after five failed attempts, up to
//	                300 s, like connect-retry) -> client.Dial (the
//	                remotes in order) -> failed: wait again
//	                -> new session: same address, gateway, routes and
//	                   server: nothing to change; else readdress the device
//	                   and replace the routes -> DeliverTo the device ->
//	                   the TUN reader sends into the new session
//
// Between sessions the device, its address and its routes stay: packets
// for the tunnel are dropped, none leave outside it. With
// redirect-gateway, remotes given as literal addresses get a host route
// outside the tunnel before the redial, so the attempt does not loop into
// the tunnel.

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
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
	routes  bool                            // install pushed routes (no --no-routes)
	cur     *atomic.Pointer[client.Session] // read by the TUN reader and the status snapshot
	applied *control.PushReply              // what the device and routes carry now
	outside []netip.Addr                    // host routes outside the tunnel already added
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
		if r.routes && redirectsGateway(r.applied) {
			r.keepRemotesOutside()
		}
		progress("reconnecting, attempt %d ...", attempt)
		s, err := client.Dial(r.ctx, r.cfg, r.opts)
		if err == nil {
			push := s.Pushed()
			progress("connected: address %s, gateway %s, cipher %v, peer-id %s", push.Local, push.Remote, s.Cipher(), peerIDString(push))
			if push.Local.IsValid() {
				return s
			}
			s.Close()
			err = errors.New("the server pushed no IPv4 address (ifconfig)")
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
// remote given as an address (the default route points into the tunnel).
func (r *reconnector) keepRemotesOutside() {
	for _, rm := range r.cfg.Remotes {
		a, err := netip.ParseAddr(rm.Host)
		if err != nil || !a.Is4() || slices.Contains(r.outside, a) || a == r.cur.Load().RemoteAddr().Addr() {
			continue
		}
		if err := r.nc.addHostRouteOutside(a); err != nil {
			progress("no host route for remote %s: %v", a, err)
			continue
		}
		r.outside = append(r.outside, a)
	}
}

// apply brings the device's address and routes in line with s's push.
func (r *reconnector) apply(s *client.Session) error {
	push, old := s.Pushed(), r.applied
	server := s.RemoteAddr().Addr()
	if push.Local == old.Local && push.Remote == old.Remote && slices.Equal(push.Routes, old.Routes) &&
		redirectsGateway(push) == redirectsGateway(old) && server == r.cur.Load().RemoteAddr().Addr() {
		return nil
	}
	progress("the new session differs (address %s, gateway %s, server %s): reconfiguring", push.Local, push.Remote, server)
	r.nc.teardown()
	r.outside = nil
	if push.Local != old.Local {
		if err := r.nc.replaceAddr(old.Local, push.Local); err != nil {
			return err
		}
		progress("device address %s", push.Local)
	}
	r.applied = push
	if !r.routes {
		return nil
	}
	return installRoutes(r.nc, server, push)
}

// redirectsGateway reports whether push redirects the default route.
func redirectsGateway(push *control.PushReply) bool {
	for _, o := range push.Options {
		if f := strings.Fields(o); len(f) > 0 && f[0] == "redirect-gateway" {
			return true
		}
	}
	return false
}
