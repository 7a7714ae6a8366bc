package ovpntunnel

// Pushed DNS settings to resolvconf(8), the way wg-quick and `wirelane up`
// apply a configuration's DNS line:
//
//	PUSH_REPLY -> planDNS (pure: --dns mode + dhcp-option DNS/DNS6,
//	    DOMAIN, DOMAIN-SEARCH) -> dnsSettings{servers, search}
//	    -> dnsApplier.apply: same as the last push: nothing; nothing
//	       to register: remove the record; else register it, replacing
//	       the old one (netcfg.Conf.SetDNS: resolvconf -a IFACE -m 0 -x)
//	    -> resolvconf missing: a warning naming the servers left out,
//	       the tunnel stays up
//	teardown (Ctrl-C, failure) -> dnsApplier.remove (resolvconf -d IFACE -f)
//
// The record is named after the TUN interface, so it is removed with the
// tunnel even though resolvconf keeps it apart from the device. Between
// sessions of a reconnect it stays, like the device's addresses and
// routes.

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"

	"github.com/wirelane/wirelane/internal/sys/netcfg"
	"github.com/wirelane/wirelane/ovpn/control"
)

// DNSMode says what Connect does with pushed DNS servers (--dns).
type DNSMode int

const (
	// DNSAuto registers the pushed DNS servers with resolvconf when it is
	// installed, else warns.
	DNSAuto DNSMode = iota
	// DNSOff leaves the host's resolver alone.
	DNSOff
)

// ParseDNSMode reads a --dns value: auto or off.
func ParseDNSMode(s string) (DNSMode, error) {
	switch s {
	case "auto":
		return DNSAuto, nil
	case "off":
		return DNSOff, nil
	}
	return 0, fmt.Errorf("--dns %q: want auto or off", s)
}

// dnsSettings is one resolvconf record: name servers and search domains.
type dnsSettings struct {
	servers []netip.Addr
	search  []string
}

func (s dnsSettings) empty() bool { return len(s.servers) == 0 }

func (s dnsSettings) equal(o dnsSettings) bool {
	return slices.Equal(s.servers, o.servers) && slices.Equal(s.search, o.search)
}

// String describes s for the progress output.
func (s dnsSettings) String() string {
	str := joinAddrs(s.servers)
	if len(s.search) > 0 {
		str += ", search " + strings.Join(s.search, " ")
	}
	return str
}

func joinAddrs(as []netip.Addr) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = a.String()
	}
	return strings.Join(parts, " ")
}

// planDNS is what the tunnel registers for push under mode: nothing with
// --dns=off or when no server was pushed (search domains alone would
// send lookups of short names to the host's resolvers), else the pushed
// servers and search list. notes say what was left out and why.
func planDNS(mode DNSMode, push *control.PushReply) (s dnsSettings, notes []string) {
	for _, ig := range push.Ignored {
		notes = append(notes, "pushed option skipped: "+ig)
	}
	search := push.SearchList()
	switch {
	case len(push.DNS) == 0 && len(search) == 0:
		return dnsSettings{}, notes
	case mode == DNSOff:
		return dnsSettings{}, append(notes, fmt.Sprintf("pushed DNS (%s) not applied: --dns=off", dnsSettings{push.DNS, search}))
	case len(push.DNS) == 0:
		return dnsSettings{}, append(notes, fmt.Sprintf("pushed search domains %s not applied: no DNS server pushed", strings.Join(search, " ")))
	}
	return dnsSettings{servers: slices.Clone(push.DNS), search: search}, notes
}

// withLocalDNS returns push with the configuration file's own dhcp-option
// lines in front of the pushed ones (as OpenVPN hands both to its scripts,
// the file's first): servers from both; a pushed DOMAIN replaces the
// file's, DOMAIN-SEARCH lines add up. Without local lines it is push
// itself.
func withLocalDNS(local []string, push *control.PushReply) *control.PushReply {
	if len(local) == 0 {
		return push
	}
	opts := slices.Clone(local)
	for _, o := range push.Options {
		if strings.HasPrefix(o, "dhcp-option ") {
			opts = append(opts, o)
		}
	}
	merged, err := control.ParsePushOptions(opts)
	if err != nil {
		return push // the local lines were validated by the parser; keep the push as it is
	}
	merged.Ignored = push.Ignored
	return merged
}

// resolver registers and removes a resolvconf record; *netcfg.Conf is
// one, tests use a fake.
type resolver interface {
	SetDNS(ifname string, servers []netip.Addr, search []string) error
	UnsetDNS(ifname string) error
}

// dnsApplier keeps the tunnel's resolvconf record in line with the
// session's push. It is used from the connect command's goroutine only.
type dnsApplier struct {
	ifname   string
	mode     DNSMode
	local    []string // the .ovpn file's own dhcp-option lines (config.Config.DHCPOptions)
	res      resolver
	progress func(string, ...any) // progress lines (stderr)
	warn     func(string, ...any) // warnings (stderr)

	wanted     dnsSettings // planned for the last push
	registered bool        // wanted is registered with resolvconf now
}

// apply plans push's DNS and, when it differs from the last plan,
// replaces the record. It never fails: a missing resolvconf or a failing
// call is a warning and the tunnel goes on without the DNS change.
func (d *dnsApplier) apply(push *control.PushReply) {
	want, notes := planDNS(d.mode, withLocalDNS(d.local, push))
	for _, n := range notes {
		d.progress("%s", n)
	}
	if want.equal(d.wanted) {
		return
	}
	d.wanted = want
	if want.empty() {
		d.remove()
		return
	}
	// resolvconf -a replaces a record of the same name, so the old
	// servers stay in use until the new ones are registered.
	err := d.res.SetDNS(d.ifname, want.servers, want.search)
	switch {
	case errors.Is(err, netcfg.ErrNoResolvconf):
		d.warn("Warning: resolvconf is not installed; the DNS servers the server pushed (%s) were not applied, DNS queries go to the host's resolvers; install resolvconf (or openresolv), or pass --dns=off to silence this", want)
		d.remove()
	case err != nil:
		d.warn("Warning: DNS servers %s not applied: %v", want, err)
		d.remove() // the servers of an earlier push are no longer wanted
	default:
		d.registered = true
		d.progress("DNS for %s: %s (resolvconf)", d.ifname, want)
	}
}

// remove deletes the record registered by apply, if any.
func (d *dnsApplier) remove() {
	if !d.registered {
		return
	}
	d.registered = false
	if err := d.res.UnsetDNS(d.ifname); err != nil {
		d.warn("Warning: removing the DNS settings of %s: %v", d.ifname, err)
		return
	}
	d.progress("DNS settings of %s removed", d.ifname)
}

// resolvconfRes is the resolver of a real tunnel: internal/sys/netcfg's
// resolvconf support, its calls logged (-v).
type resolvconfRes struct {
	log *slog.Logger
}

func newResolvconf(log *slog.Logger) resolver { return resolvconfRes{log} }

// conf returns a netcfg.Conf that records no undo steps: dnsApplier
// removes the record itself.
func (r resolvconfRes) conf() (*netcfg.Conf, error) {
	c, err := netcfg.New()
	if err != nil {
		return nil, err
	}
	c.Undo = nil
	c.Log = func(s string) { r.log.Info("netcfg", "op", s) }
	return c, nil
}

func (r resolvconfRes) SetDNS(ifname string, servers []netip.Addr, search []string) error {
	c, err := r.conf()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.SetDNS(ifname, servers, search)
}

func (r resolvconfRes) UnsetDNS(ifname string) error {
	c, err := r.conf()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.UnsetDNS(ifname)
}
