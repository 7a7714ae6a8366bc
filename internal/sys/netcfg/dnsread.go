package netcfg

// Reading a link's DNS settings back (what a reload compares with its
// file): from systemd-resolved's Link object (its DNS, Domains
// properties) when resolved serves this namespace, else from resolvconf's
// record of the interface (Debian's /run/resolvconf/interface/NAME, or
// openresolv's `resolvconf -l NAME`).

import (
	"bufio"
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/godbus/dbus/v5"
)

// LinkDNS returns the DNS settings ifname has now and who holds them. It
// reports known = false when it cannot tell (neither systemd-resolved
// nor a readable resolvconf record store is there). A link with no
// settings has an empty DNS. It changes nothing.
func (c *Conf) LinkDNS(ifname string) (d DNS, r Resolver, known bool, err error) {
	if rd, ok := connectResolved(c.nsIno); ok {
		defer rd.close()
		l, err := c.Link(ifname)
		if err != nil {
			return DNS{}, "", false, err
		}
		d, err := rd.linkDNS(l.Attrs().Index)
		return d, Resolved, err == nil, err
	}
	rc, _ := findResolvconf()
	if rc == "" {
		return DNS{}, "", false, nil
	}
	name := resolvconfName(ifname)
	b, err := os.ReadFile(filepath.Join("/run/resolvconf/interface", name))
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		if _, serr := os.Stat("/run/resolvconf/interface"); serr == nil {
			return DNS{}, Resolvconf, true, nil // Debian's store, no record
		}
		// openresolv lists a record; it fails for a name it has none of.
		out, lerr := exec.Command(rc, "-l", name).Output()
		if lerr != nil {
			if _, ok := lerr.(*exec.ExitError); ok {
				return DNS{}, Resolvconf, true, nil
			}
			return DNS{}, "", false, nil
		}
		b = out
	default:
		return DNS{}, "", false, err
	}
	return parseResolvRecord(string(b)), Resolvconf, true, nil
}

// parseResolvRecord reads the nameserver and search lines of a
// resolv.conf-style record.
func parseResolvRecord(s string) DNS {
	var d DNS
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if a, err := netip.ParseAddr(f[1]); err == nil {
				d.Servers = append(d.Servers, a)
			}
		case "search":
			d.Search = append(d.Search, f[1:]...)
		}
	}
	return d
}

// linkDNS reads link idx's servers and domains from resolved; the routing
// domain "~." makes Default.
func (r *resolvedConn) linkDNS(idx int) (DNS, error) {
	var path dbus.ObjectPath
	if err := r.conn.Object(resolvedName, resolvedPath).Call(resolvedIface+".GetLink", 0, int32(idx)).Store(&path); err != nil {
		return DNS{}, err
	}
	obj := r.conn.Object(resolvedName, path)
	var d DNS
	v, err := obj.GetProperty("org.freedesktop.resolve1.Link.DNS")
	if err != nil {
		return DNS{}, err
	}
	var addrs []resolvedAddr
	if err := v.Store(&addrs); err != nil {
		return DNS{}, err
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.Address); ok {
			d.Servers = append(d.Servers, ip.Unmap())
		}
	}
	v, err = obj.GetProperty("org.freedesktop.resolve1.Link.Domains")
	if err != nil {
		return DNS{}, err
	}
	var doms []resolvedDomain
	if err := v.Store(&doms); err != nil {
		return DNS{}, err
	}
	for _, dm := range doms {
		switch {
		case dm.RoutingOnly && (dm.Domain == "." || dm.Domain == ""):
			d.Default = true
		case !dm.RoutingOnly:
			d.Search = append(d.Search, dm.Domain)
		}
	}
	return d, nil
}
