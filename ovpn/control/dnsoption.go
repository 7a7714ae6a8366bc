package control

// OpenVPN 2.6's `dns` option, pushed or in a client file:
//
//	dns server N address ADDR[:PORT] | [ADDR6][:PORT] ...   (up to 8)
//	dns server N resolve-domains DOMAIN ...                 (split DNS: noted, not applied)
//	dns server N dnssec|transport|sni ...                   (noted, not applied)
//	dns search-domains DOMAIN ...
//
// Servers are used in order of their priority N (lower first), and when
// there are any they replace the dhcp-option DNS servers, as the `dns`
// search domains replace dhcp-option DOMAIN and DOMAIN-SEARCH: the newer
// option wins, as in OpenVPN 2.6. An address with a port other than 53
// cannot be handed to resolvconf or resolved per link here and is noted
// in Ignored.

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// dnsOptions collects the `dns` lines of one push.
type dnsOptions struct {
	servers map[int][]netip.Addr // by priority
	search  []string
	has     bool // any search-domains line
}

// add takes one `dns ...` option (f is its words); malformed or
// unsupported parts are noted in r.Ignored.
func (d *dnsOptions) add(r *PushReply, o string, f []string) {
	skip := func(why string) { r.Ignored = append(r.Ignored, fmt.Sprintf("%q: %s", o, why)) }
	if len(f) < 2 {
		skip("no arguments")
		return
	}
	switch f[1] {
	case "search-domains":
		if len(f) < 3 {
			skip("no domain")
			return
		}
		d.has = true
		for _, dom := range f[2:] {
			dom = strings.TrimSuffix(dom, ".")
			if !ValidDomain(dom) {
				skip(fmt.Sprintf("%q is not a domain name", dom))
				continue
			}
			if !slices.ContainsFunc(d.search, func(s string) bool { return strings.EqualFold(s, dom) }) {
				d.search = append(d.search, dom)
			}
		}
	case "server":
		if len(f) < 4 {
			skip("want dns server PRIORITY KEYWORD VALUE...")
			return
		}
		prio, err := strconv.Atoi(f[2])
		if err != nil || prio < -128 || prio > 127 {
			skip("priority must be a number from -128 to 127")
			return
		}
		switch f[3] {
		case "address":
			if len(f) < 5 || len(f) > 12 {
				skip("want 1 to 8 addresses")
				return
			}
			if d.servers == nil {
				d.servers = map[int][]netip.Addr{}
			}
			for _, s := range f[4:] {
				a, ok := dnsAddress(s)
				if !ok {
					skip(fmt.Sprintf("%q is not a server address on port 53", s))
					continue
				}
				if !slices.Contains(d.servers[prio], a) {
					d.servers[prio] = append(d.servers[prio], a)
				}
			}
		case "resolve-domains":
			skip("split DNS (resolve-domains) is not applied; the server's addresses are used for every lookup")
		case "dnssec", "transport", "sni":
			skip(f[3] + " is not applied")
		default:
			skip(fmt.Sprintf("unknown keyword %q", f[3]))
		}
	default:
		skip(fmt.Sprintf("unknown keyword %q", f[1]))
	}
}

// dnsAddress parses ADDR, ADDR:53, [ADDR6] or [ADDR6]:53.
func dnsAddress(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), a.Zone() == "" && !a.IsUnspecified()
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		a := ap.Addr()
		return a.Unmap(), ap.Port() == 53 && a.Zone() == "" && !a.IsUnspecified()
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		a, err := netip.ParseAddr(s[1 : len(s)-1])
		return a, err == nil && a.Is6() && a.Zone() == "" && !a.IsUnspecified()
	}
	return netip.Addr{}, false
}

// apply puts the collected options into r: servers by priority replace
// the dhcp-option servers, search domains replace DOMAIN and
// DOMAIN-SEARCH.
func (d *dnsOptions) apply(r *PushReply) {
	if len(d.servers) > 0 {
		prios := make([]int, 0, len(d.servers))
		for p := range d.servers {
			prios = append(prios, p)
		}
		slices.Sort(prios)
		var all []netip.Addr
		for _, p := range prios {
			for _, a := range d.servers[p] {
				if !slices.Contains(all, a) {
					all = append(all, a)
				}
			}
		}
		if len(all) > 0 {
			r.DNS = all
		}
	}
	if d.has {
		r.Domain, r.SearchDomains = "", d.search
	}
}
