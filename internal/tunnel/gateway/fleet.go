package gateway

// The optional [fleet] table: this gateway joins a fleet of gateways that
// publish their sites in an etcd cluster and converge on each other's
// records (internal/tunnel/fleet runs it; docs/gateway.md#fleet).

import (
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// Fleet is the [fleet] table: where the fleet's store is, and what this
// gateway announces in it.
type Fleet struct {
	// Endpoints are the etcd client URLs (https://host:port).
	Endpoints []string
	// CAFile, CertFile and KeyFile are the TLS files for the etcd client:
	// the CA that signed the members' certificates, and this gateway's
	// client certificate and key. Resolved against the file's directory.
	CAFile, CertFile, KeyFile string
	// Prefix is the key prefix naming the fleet ("/wirelane/fleets/prod");
	// it starts with '/' and does not end with one.
	Prefix string
	// Site is this gateway's site name in the fleet (default: the
	// interface name).
	Site string
	// PublicEndpoints are where the other gateways reach this one
	// (host:port), in order of preference; empty means this site only
	// calls out (the others learn its address from its handshakes).
	PublicEndpoints []string
	// Networks are this site's networks, announced to the fleet: the
	// others' allowed IPs and routes toward this gateway.
	Networks []netip.Prefix
	// Location groups sites that reach other locations through one of
	// them (the location's leader); "" = the full mesh.
	Location string
	// LeaseTTL is how long this site's record outlives the gateway.
	LeaseTTL time.Duration
	// PersistentKeepalive is the keepalive toward the fleet's sites.
	PersistentKeepalive uint16

	networkPaths []string
}

// DefaultLeaseTTL is a fleet record's lease when lease_ttl is not given.
const DefaultLeaseTTL = 15 * time.Second

// fleetDoc is the schema of [fleet].
type fleetDoc struct {
	Endpoints           value `toml:"endpoints"`
	CAFile              value `toml:"ca_file"`
	CertFile            value `toml:"cert_file"`
	KeyFile             value `toml:"key_file"`
	Prefix              value `toml:"prefix"`
	Site                value `toml:"site"`
	PublicEndpoints     value `toml:"public_endpoints"`
	Networks            value `toml:"networks"`
	Location            value `toml:"location"`
	LeaseTTL            value `toml:"lease_ttl"`
	PersistentKeepalive value `toml:"persistent_keepalive"`
}

var fleetKeys = []string{"endpoints", "ca_file", "cert_file", "key_file", "prefix", "site", "public_endpoints", "networks", "location", "lease_ttl", "persistent_keepalive"}

// prefixRE is a fleet key prefix: '/'-separated words, no trailing '/'.
var prefixRE = regexp.MustCompile(`^(/[A-Za-z0-9_.-]+)+$`)

// LocationRE is what a location may be called.
var LocationRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

func (p *parser) fleet(g *Gateway, d *fleetDoc, known map[string]bool) {
	const fp = "fleet."
	for path, v := range map[string]value{"endpoints": d.Endpoints, "ca_file": d.CAFile, "cert_file": d.CertFile, "key_file": d.KeyFile,
		"prefix": d.Prefix, "site": d.Site, "public_endpoints": d.PublicEndpoints, "networks": d.Networks, "location": d.Location,
		"lease_ttl": d.LeaseTTL, "persistent_keepalive": d.PersistentKeepalive} {
		if v.set {
			known["fleet\x00"+path] = true
		}
	}
	f := &Fleet{LeaseTTL: DefaultLeaseTTL}
	p.strList(fp+"endpoints", d.Endpoints, false, func(ep, s string) {
		u, err := url.Parse(s)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			p.fail(ep, "endpoints: %q is not an etcd client URL like https://10.0.0.1:2379 (https is required: the fleet's records decide who joins the mesh)", clip(s))
			return
		}
		f.Endpoints = append(f.Endpoints, s)
	})
	if !d.Endpoints.set {
		p.fail("fleet", "[fleet] needs endpoints (the etcd client URLs, https://HOST:2379)")
	} else if a, ok := d.Endpoints.v.([]any); ok && len(a) == 0 {
		p.fail(fp+"endpoints", "endpoints is empty")
	}
	file := func(key string, v value, dst *string) {
		s, ok := p.str(fp+key, v)
		switch {
		case !v.set:
			p.fail("fleet", "[fleet] needs %s (etcd client TLS is required)", key)
		case ok && s == "":
			p.fail(fp+key, "%s is empty", key)
		case ok:
			*dst = p.relative(s)
		}
	}
	file("ca_file", d.CAFile, &f.CAFile)
	file("cert_file", d.CertFile, &f.CertFile)
	file("key_file", d.KeyFile, &f.KeyFile)
	if s, ok := p.str(fp+"prefix", d.Prefix); ok {
		if !prefixRE.MatchString(s) || len(s) > 200 {
			p.fail(fp+"prefix", "prefix %q: want a key prefix like /wirelane/fleets/NAME (words of A-Z a-z 0-9 _ . - after each /, no / at the end)", clip(s))
		} else {
			f.Prefix = s
		}
	} else if !d.Prefix.set {
		p.fail("fleet", "[fleet] needs prefix (the etcd key prefix naming the fleet, like /wirelane/fleets/prod)")
	}
	if s, ok := p.str(fp+"site", d.Site); ok {
		if !siteNameRE.MatchString(s) {
			p.fail(fp+"site", "site name %q: use 1 to 63 of a-z A-Z 0-9 _ . - (starting with a letter or digit)", clip(s))
		} else {
			f.Site = s
		}
	}
	p.strList(fp+"public_endpoints", d.PublicEndpoints, false, func(ep, s string) {
		if _, _, err := wgquick.SplitEndpoint(s); err != nil {
			p.fail(ep, "public_endpoints: %v", err)
			return
		}
		ap, err := netip.ParseAddrPort(s)
		if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
			p.fail(ep, "public_endpoints: %q: give an IP address and port (the fleet's records hold addresses, not names)", clip(s))
			return
		}
		f.PublicEndpoints = append(f.PublicEndpoints, ap.String())
	})
	p.strList(fp+"networks", d.Networks, false, func(ep, s string) {
		pfx, err := parseAddress(s)
		if err != nil {
			p.fail(ep, "networks: %v", err)
			return
		}
		if pfx != pfx.Masked() {
			p.fail(ep, "network %s has host bits set; write %s (or %s/%d for the single address)", pfx, pfx.Masked(), pfx.Addr(), pfx.Addr().BitLen())
			return
		}
		for i, o := range f.Networks {
			if o.Overlaps(pfx) {
				p.fail(ep, "network %s overlaps %s (%s)", pfx, o, p.where(f.networkPaths[i]))
				return
			}
		}
		f.Networks = append(f.Networks, pfx)
		f.networkPaths = append(f.networkPaths, ep)
	})
	if !d.Networks.set {
		p.fail("fleet", "[fleet] needs networks (this site's networks, announced to the fleet)")
	} else if a, ok := d.Networks.v.([]any); ok && len(a) == 0 {
		p.fail(fp+"networks", "networks is empty")
	}
	if s, ok := p.str(fp+"location", d.Location); ok {
		if !LocationRE.MatchString(s) {
			p.fail(fp+"location", "location %q: use 1 to 63 of a-z A-Z 0-9 _ . - (starting with a letter or digit)", clip(s))
		} else {
			f.Location = s
		}
	}
	if n, ok := p.integer(fp+"lease_ttl", d.LeaseTTL, 2, 3600, "seconds from 2 to 3600"); ok {
		f.LeaseTTL = time.Duration(n) * time.Second
	}
	if n, ok := p.integer(fp+"persistent_keepalive", d.PersistentKeepalive, 0, 65535, "seconds from 0 (off) to 65535"); ok {
		f.PersistentKeepalive = uint16(n)
	}
	g.Fleet = f
}

// fleetChecks compares the fleet's networks with the static sites and
// this gateway's addresses, once everything is parsed.
func (p *parser) fleetChecks(g *Gateway) {
	f := g.Fleet
	if f == nil {
		return
	}
	if f.Site == "" {
		f.Site = g.Name
	}
	for i := range g.Sites {
		if f.Site != "" && g.Sites[i].Name == f.Site {
			p.fail("fleet.site", "fleet site %q is also the name of a [[site]] (%s)", f.Site, p.where("site["+strconv.Itoa(i)+"]"))
		}
	}
	for j, n := range f.Networks {
		for i := range g.Sites {
			s := &g.Sites[i]
			for k, o := range s.Networks {
				if o.Overlaps(n) {
					p.fail(f.networkPaths[j], "network %s overlaps %s of site %q (%s); a packet must have exactly one site to go to", n, o, s.Name, p.where(s.networkPaths[k]))
				}
			}
		}
	}
}

// summary describes the [fleet] table for Summary.
func (f *Fleet) summary(row func(k, v string)) {
	row("fleet", f.Prefix+" on "+strings.Join(f.Endpoints, ", "))
	row("fleet site", f.Site)
	if f.Location != "" {
		row("location", f.Location)
	}
	if len(f.PublicEndpoints) > 0 {
		row("announces", strings.Join(f.PublicEndpoints, ", "))
	} else {
		row("announces", "no endpoint (this site calls out)")
	}
	row("networks", joinPrefixes(f.Networks))
	row("lease", f.LeaseTTL.String())
	row("etcd TLS", "ca "+f.CAFile+", cert "+f.CertFile+", key "+f.KeyFile)
}
