package netcfg

// A tunnel's DNS goes to whatever manages the host's resolver, tried in
// this order (there is no netlink interface for resolver settings):
//
//	systemd-resolved, when it owns org.freedesktop.resolve1 on the
//	    system bus and runs in the link's network namespace
//	    (resolved.go): per-link servers and search domains,
//	    and for a tunnel that takes every lookup (DNS.Default) the
//	    routing domain "~." and the DNS default route   [undo: RevertLink]
//	resolvconf(8), when installed and not systemd-resolved's stand-in
//	    (resolvconf.go): a record at metric 0, exclusive   [undo: resolvconf -d]
//	neither: ErrNoResolver, nothing changed; the caller decides whether
//	    that stops the tunnel (a wg-quick file's DNS does)

import (
	"errors"
	"fmt"
	"net/netip"
)

// DNS is what a tunnel asks of the host's resolver.
type DNS struct {
	// Servers are the name servers; without any, SetDNS does nothing.
	Servers []netip.Addr
	// Search are the search domains.
	Search []string
	// Default sends every lookup to Servers, not only those under Search:
	// the tunnel carries all traffic (a 0.0.0.0/0 or ::/0 route), so a
	// lookup that went to another link's server would leave it.
	Default bool
}

// Resolver names what holds a link's DNS settings.
type Resolver string

const (
	// Resolved is systemd-resolved, driven through its D-Bus API.
	Resolved Resolver = "systemd-resolved"
	// Resolvconf is resolvconf(8) (Debian's resolvconf or openresolv).
	Resolvconf Resolver = "resolvconf"
)

// ErrNoResolver is returned by SetDNS when neither systemd-resolved is
// running nor resolvconf is installed: the settings cannot be applied,
// and lookups would go to the host's other name servers.
var ErrNoResolver = errors.New("neither systemd-resolved is running nor resolvconf is installed, so the DNS servers cannot be applied")

// SetDNS points ifname's name resolution at d.Servers through
// systemd-resolved when it runs, else through resolvconf, and pushes the
// inverse on the undo stack. It returns which one took the settings;
// ErrNoResolver (nothing changed) when neither is there.
func (c *Conf) SetDNS(ifname string, d DNS) (Resolver, error) {
	if len(d.Servers) == 0 {
		return "", nil
	}
	if rd, ok := connectResolved(c.nsIno); ok {
		defer rd.close()
		l, err := c.Link(ifname)
		if err != nil {
			return "", err
		}
		idx := l.Attrs().Index
		if err := rd.setLink(c, ifname, idx, d); err != nil {
			rd.revert(idx) // a half-applied setting is no use
			return "", fmt.Errorf("systemd-resolved: %w", err)
		}
		c.Undo.Push("dns", func() error { return c.revertResolved(ifname) })
		return Resolved, nil
	}
	rc, stub := findResolvconf()
	if rc == "" {
		if stub {
			return "", fmt.Errorf("%w (resolvconf here is systemd-resolved's, and no systemd-resolved serves this network namespace)", ErrNoResolver)
		}
		return "", ErrNoResolver
	}
	if err := c.resolvconfAdd(rc, ifname, d); err != nil {
		return "", err
	}
	c.Undo.Push("dns", func() error { return c.UnsetDNS(ifname) })
	return Resolvconf, nil
}

// UnsetDNS removes ifname's DNS settings from both systemd-resolved (if
// it runs and the link still exists: it forgets a deleted link by itself)
// and resolvconf (if installed). Having neither is not an error.
func (c *Conf) UnsetDNS(ifname string) error {
	var errs []error
	if err := c.revertResolved(ifname); err != nil {
		errs = append(errs, fmt.Errorf("systemd-resolved: %w", err))
	}
	if rc, _ := findResolvconf(); rc != "" {
		if err := c.resolvconfDelete(rc, ifname); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// revertResolved drops ifname's per-link settings in systemd-resolved.
func (c *Conf) revertResolved(ifname string) error {
	rd, ok := connectResolved(c.nsIno)
	if !ok {
		return nil
	}
	defer rd.close()
	l, err := c.Link(ifname)
	if err != nil {
		return nil // gone: resolved dropped its settings with it
	}
	c.logf("resolvectl revert %s", ifname)
	return rd.revert(l.Attrs().Index)
}
