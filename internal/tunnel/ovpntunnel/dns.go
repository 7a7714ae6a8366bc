package ovpntunnel

// Pushed DNS settings to systemd-resolved or resolvconf(8), the way
// `wirelane up` applies a configuration's DNS line:
//
//	PUSH_REPLY -> planDNS (pure: --dns mode + dhcp-option DNS/DNS6,
//	    DOMAIN, DOMAIN-SEARCH, redirect-gateway) -> dnsSettings
//	    -> dnsApplier.apply: same as the last push: nothing; nothing
//	       to register: remove the record; else register it, replacing
//	       the old one (netcfg.Conf.SetDNS: resolved's per-link servers,
//	       "~." for a redirected gateway; else resolvconf -a IFACE -m 0 -x)
//	    -> neither there, or a failure: an error, and the tunnel comes
//	       down (fails closed, as `wirelane up` does): lookups must not
//	       go around it unless the user said --dns=off
//	teardown (Ctrl-C, failure) -> dnsApplier.remove (revert, resolvconf -d)
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
	// DNSAuto registers the pushed DNS servers with systemd-resolved or
	// resolvconf; when neither can take them the tunnel comes down.
	DNSAuto DNSMode = iota
	// DNSOff leaves the host's resolver alone (pushed servers unused).
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

// dnsSettings is one resolver record: name servers and search domains;
// all when every lookup goes to them (the push redirects the gateway).
type dnsSettings struct {
	servers []netip.Addr
	search  []string
	all     bool
}

func (s dnsSettings) empty() bool { return len(s.servers) == 0 }

func (s dnsSettings) equal(o dnsSettings) bool {
	return slices.Equal(s.servers, o.servers) && slices.Equal(s.search, o.search) && s.all == o.all
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
		return dnsSettings{}, append(notes, fmt.Sprintf("pushed DNS (%s) not applied: --dns=off", dnsSettings{servers: push.DNS, search: search}))
	case len(push.DNS) == 0:
		return dnsSettings{}, append(notes, fmt.Sprintf("pushed search domains %s not applied: no DNS server pushed", strings.Join(search, " ")))
	}
	rd := parseRedirect(push)
	return dnsSettings{servers: slices.Clone(push.DNS), search: search, all: rd.v4 || rd.v6}, notes
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
		if strings.HasPrefix(o, "dhcp-option ") || strings.HasPrefix(o, "dns ") {
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

// resolver registers and removes a link's DNS settings; *netcfg.Conf is
// one, tests use a fake.
type resolver interface {
	SetDNS(ifname string, d netcfg.DNS) (netcfg.Resolver, error)
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

	wanted     dnsSettings     // planned for the last push
	registered bool            // wanted is registered with the resolver now
	by         netcfg.Resolver // what holds the record while registered
}

// apply plans push's DNS and, when it differs from the last plan,
// replaces the record. When the servers cannot be applied (no
// systemd-resolved or resolvconf, or a failing call) it removes an
// earlier push's servers and returns an error: the caller takes the
// tunnel down rather than let lookups go around it.
func (d *dnsApplier) apply(push *control.PushReply) error {
	want, notes := planDNS(d.mode, withLocalDNS(d.local, push))
	for _, n := range notes {
		d.progress("%s", n)
	}
	if want.equal(d.wanted) {
		return nil
	}
	d.wanted = want
	if want.empty() {
		d.remove()
		return nil
	}
	// A new record replaces one of the same link, so the old servers
	// stay in use until the new ones are registered.
	by, err := d.res.SetDNS(d.ifname, netcfg.DNS{Servers: want.servers, Search: want.search, Default: want.all})
	switch {
	case errors.Is(err, netcfg.ErrNoResolver):
		d.remove()
		return fmt.Errorf("the DNS servers the server pushed (%s) cannot be applied: %v; install resolvconf (or openresolv) or run systemd-resolved, or pass --dns=off to connect without them (lookups then go to the host's resolvers)", want, err)
	case err != nil:
		d.remove() // the servers of an earlier push are no longer wanted
		return fmt.Errorf("DNS servers %s not applied: %v (--dns=off connects without them)", want, err)
	}
	d.registered, d.by = true, by
	d.progress("DNS for %s: %s (%s)", d.ifname, want, by)
	return nil
}

// holder is what holds the registered record ("" = none).
func (d *dnsApplier) holder() netcfg.Resolver {
	if !d.registered {
		return ""
	}
	return d.by
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
// systemd-resolved and resolvconf support, its calls logged (-v).
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

func (r resolvconfRes) SetDNS(ifname string, d netcfg.DNS) (netcfg.Resolver, error) {
	c, err := r.conf()
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.SetDNS(ifname, d)
}

func (r resolvconfRes) UnsetDNS(ifname string) error {
	c, err := r.conf()
	if err != nil {
		return err
	}
	defer c.Close()
	return c.UnsetDNS(ifname)
}
