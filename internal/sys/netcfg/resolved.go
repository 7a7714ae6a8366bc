package netcfg

// systemd-resolved through its D-Bus API (org.freedesktop.resolve1(5)),
// the calls `resolvectl dns|domain|default-route|revert` make:
//
//	SetLinkDNS(ifindex, [(family, address bytes)])
//	SetLinkDomains(ifindex, [(domain, routing-only)])   "~." = (".", true)
//	SetLinkDefaultRoute(ifindex, bool)
//	RevertLink(ifindex)
//
// The system bus is the one DBUS_SYSTEM_BUS_ADDRESS names, else
// /run/dbus/system_bus_socket. Resolved counts as running when it owns
// its bus name (NameHasOwner never starts it through bus activation) and
// runs in the network namespace of the link: link indexes are per
// namespace, so a tunnel in another one would otherwise configure
// whichever of resolved's links has the same index.

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/godbus/dbus/v5"
	"golang.org/x/sys/unix"
)

const (
	resolvedName  = "org.freedesktop.resolve1"
	resolvedPath  = dbus.ObjectPath("/org/freedesktop/resolve1")
	resolvedIface = "org.freedesktop.resolve1.Manager"
	// resolvedTimeout bounds each call: resolved answers at once, and a
	// hung bus must not hang `up`.
	resolvedTimeout = 5 * time.Second
	// busTimeout bounds a whole connection, authentication included
	// (godbus closes it when its context ends).
	busTimeout = 20 * time.Second
)

// resolvedConn is a private connection to the system bus on which
// systemd-resolved answers.
type resolvedConn struct {
	conn   *dbus.Conn
	cancel context.CancelFunc
}

// connectResolved connects to the system bus and reports whether
// systemd-resolved is on it, serving the namespace whose nsfs inode is
// nsIno (0: unknown, not checked).
func connectResolved(nsIno uint64) (*resolvedConn, bool) {
	bctx, bcancel := context.WithTimeout(context.Background(), busTimeout)
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(bctx))
	if err != nil {
		bcancel()
		return nil, false
	}
	r := &resolvedConn{conn, bcancel}
	ctx, cancel := context.WithTimeout(context.Background(), resolvedTimeout)
	defer cancel()
	var has bool
	if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, resolvedName).Store(&has); err != nil || !has {
		r.close()
		return nil, false
	}
	if nsIno != 0 {
		// A PID from another PID namespace, or a /proc we may not read,
		// cannot be checked; resolvectl would not check either.
		var pid uint32
		if err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.GetConnectionUnixProcessID", 0, resolvedName).Store(&pid); err == nil {
			if theirs := nsInode(fmt.Sprintf("/proc/%d/ns/net", pid)); theirs != 0 && theirs != nsIno {
				r.close()
				return nil, false
			}
		}
	}
	return r, true
}

func (r *resolvedConn) close() {
	r.conn.Close()
	r.cancel()
}

func (r *resolvedConn) call(method string, args ...any) error {
	ctx, cancel := context.WithTimeout(context.Background(), resolvedTimeout)
	defer cancel()
	return r.conn.Object(resolvedName, resolvedPath).CallWithContext(ctx, resolvedIface+"."+method, 0, args...).Err
}

// resolvedAddr is the (iay) of SetLinkDNS.
type resolvedAddr struct {
	Family  int32
	Address []byte
}

// resolvedDomain is the (sb) of SetLinkDomains.
type resolvedDomain struct {
	Domain      string
	RoutingOnly bool
}

// setLink gives link idx the servers and domains of d; a Default link
// also gets "~." and the DNS default route, so every lookup goes to it.
func (r *resolvedConn) setLink(c *Conf, ifname string, idx int, d DNS) error {
	addrs := make([]resolvedAddr, 0, len(d.Servers))
	names := make([]string, 0, len(d.Servers))
	for _, s := range d.Servers {
		fam := int32(unix.AF_INET6)
		if s.Is4() {
			fam = unix.AF_INET
		}
		addrs = append(addrs, resolvedAddr{fam, s.AsSlice()})
		names = append(names, s.String())
	}
	c.logf("resolvectl dns %s %s", ifname, strings.Join(names, " "))
	if err := r.call("SetLinkDNS", int32(idx), addrs); err != nil {
		return err
	}
	domains := make([]resolvedDomain, 0, len(d.Search)+1)
	shown := make([]string, 0, len(d.Search)+1)
	for _, s := range d.Search {
		domains = append(domains, resolvedDomain{strings.TrimSuffix(s, "."), false})
		shown = append(shown, s)
	}
	if d.Default {
		domains = append(domains, resolvedDomain{".", true})
		shown = append(shown, "~.")
	}
	if len(domains) > 0 {
		c.logf("resolvectl domain %s %s", ifname, strings.Join(shown, " "))
		if err := r.call("SetLinkDomains", int32(idx), domains); err != nil {
			return err
		}
	}
	if d.Default {
		c.logf("resolvectl default-route %s yes", ifname)
		if err := r.call("SetLinkDefaultRoute", int32(idx), true); err != nil {
			return err
		}
	}
	return nil
}

// revert drops every per-link setting of link idx.
func (r *resolvedConn) revert(idx int) error {
	return r.call("RevertLink", int32(idx))
}
