package ovpntunnel

// The user and group directives in connect and serve:
//
//	parse -> dropTarget: the names looked up (an unknown one: FILE:LINE
//	    error, exit 1, nothing set up)
//	... TUN device, socket, addresses, routes, DNS, status file and
//	    control socket, as root ...
//	dropPrivileges -> the status file kept open (statusPublisher.keepOpen:
//	    StatusDir stays root's) -> privdrop.Drop(CAP_NET_ADMIN): every
//	    thread becomes the user and group, keeping only CAP_NET_ADMIN
//	    (routes, addresses and the TUN device on reconnect and at exit);
//	    not dumpable again
//
// Not dropped: inside the service (Hosted: wirelaned runs other tunnels
// and must stay root; a warning says so), and with the DNS servers
// registered through resolvconf(8), whose record only root can change or
// remove (a warning says so). The server's socket is bound before the
// drop and never bound again, so a port below 1024 needs no
// CAP_NET_BIND_SERVICE afterwards.

import (
	"fmt"

	"kernel.org/pub/linux/libs/security/libcap/cap"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/internal/sys/privdrop"
	"github.com/wirelane/wirelane/ovpn/config"
)

// dropTarget looks up the file's user and group; an unknown name is an
// error with its line (the Target then holds the names only: inside the
// service, which drops nothing, that is no error).
func dropTarget(file string, c *config.Common) (privdrop.Target, error) {
	names := privdrop.Target{User: c.User, Group: c.Group, UID: -1, GID: -1}
	if c.User == "" && c.Group == "" {
		return names, nil
	}
	if c.User != "" {
		if _, err := privdrop.Lookup(c.User, ""); err != nil {
			return names, fmt.Errorf("%s:%d: user: %w", file, c.UserLine, err)
		}
	}
	t, err := privdrop.Lookup(c.User, c.Group)
	if err != nil {
		return names, fmt.Errorf("%s:%d: group: %w", file, c.GroupLine, err)
	}
	return t, nil
}

// keptCaps are the capabilities kept after the drop: CAP_NET_ADMIN for
// addresses, routes and links (reconnects, reloads and the teardown).
var keptCaps = []cap.Value{cap.NET_ADMIN}

// dropPrivileges drops to t once the tunnel is set up (nothing to do for
// an empty t). hosted says the process is the service. dnsBy is what
// holds the tunnel's DNS servers ("" = none registered). A nil error
// after a skip is reported through warnf; a non-nil error means the
// process may be half changed and the tunnel must end.
func dropPrivileges(t privdrop.Target, hosted bool, dnsBy netcfg.Resolver, pub *statusPublisher, warnf func(string, ...any)) error {
	if hosted && (t.User != "" || t.Group != "") {
		warnf("user/group (%s) not applied: the tunnel runs inside wirelaned, which keeps its privileges for its other tunnels (give the service's own unit its User= instead)", t)
		return nil
	}
	if t.Empty() || hosted {
		return nil
	}
	if dnsBy == netcfg.Resolvconf {
		warnf("user/group (%s) not applied: the DNS servers are registered with resolvconf, whose record only root can change or remove at exit; "+
			"run systemd-resolved, or pass --dns=off, to have privileges dropped", t)
		return nil
	}
	if err := pub.keepOpen(); err != nil {
		return err
	}
	if err := t.Drop(keptCaps...); err != nil {
		return fmt.Errorf("dropping privileges to %s: %w", t, err)
	}
	progress("privileges dropped to %s, keeping CAP_NET_ADMIN", t)
	return nil
}
