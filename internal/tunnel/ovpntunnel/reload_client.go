package ovpntunnel

// Reloading a running OpenVPN client (`wirelane reload`, the service):
// the file is read again and compared with the one the tunnel runs.
//
//	parse (FILE:LINE) -> the file's own DNS (dhcp-option lines) changed:
//	    applied at once with the session's push (dns.go)
//	-> block-ipv6 changed: the routes are rebuilt at once (routes.go)
//	-> user/group changed: noted, for the next start (the drop is made
//	    once)
//	-> tun-mtu changed: the device keeps its MTU until the client restarts
//	    (mtu.go); Plan.Notes says so
//	-> anything else changed (remotes, credentials, ciphers, TLS, timers):
//	    kept for the next reconnect (the session runs on untouched, as
//	    OpenVPN's client would until it restarts); Plan.Notes says so
//
// A change applied at once that fails is put back as it was.

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/wirelane/wirelane/ovpn/config"
)

// reload plans (and, unless dry, applies) the file's changes to the
// running client.
func (r *reconnector) reload(dry bool) (*Plan, error) {
	cfg, err := config.ParseFile(r.file)
	if err != nil {
		return nil, err
	}
	if cfg.KeyLocked() {
		// A reload cannot ask on the terminal.
		return nil, fmt.Errorf("reload: %s: the private key is encrypted; only askpass FILE unlocks it on a reload (nothing changed)", r.file)
	}
	p := &Plan{DryRun: dry}
	dnsChanged := !slices.Equal(cfg.DHCPOptions, r.cfg.DHCPOptions)
	blockChanged := cfg.BlockIPv6 != r.cfg.BlockIPv6 && !r.blockCmd
	if dnsChanged {
		p.Lines = append(p.Lines, fmt.Sprintf("dhcp-option: %s -> %s (now)", listOrNone(r.cfg.DHCPOptions), listOrNone(cfg.DHCPOptions)))
	}
	if blockChanged {
		p.Lines = append(p.Lines, fmt.Sprintf("block-ipv6: %v -> %v (routes rebuilt now)", r.cfg.BlockIPv6, cfg.BlockIPv6))
	}
	if cfg.User != r.cfg.User || cfg.Group != r.cfg.Group {
		p.Lines = append(p.Lines, "user/group: changed (applies at the next start: privileges are dropped once, not on a reconnect)")
	}
	if cfg.TunMTU != r.cfg.TunMTU {
		p.Lines = append(p.Lines, fmt.Sprintf("tun-mtu: %s -> %s (the device keeps its MTU until the client restarts)", mtuOrNone(r.cfg.TunMTU), mtuOrNone(cfg.TunMTU)))
		p.Notes = append(p.Notes, "tun-mtu takes effect when the client restarts (a reconnect keeps the device)")
	}
	later := changedFields(r.cfg, cfg)
	for _, f := range later {
		p.Lines = append(p.Lines, f+": changed (applies at the next reconnect)")
	}
	if len(later) > 0 {
		p.Notes = append(p.Notes, "the session runs on; "+strings.Join(later, ", ")+" take effect when the client next reconnects")
	}
	if dry || p.Empty() {
		return p, nil
	}
	push := r.cur.Load().Pushed()
	if dnsChanged && r.dns != nil {
		old := r.dns.local
		r.dns.local = cfg.DHCPOptions
		if err := r.dns.apply(push); err != nil {
			r.dns.local = old
			if rerr := r.dns.apply(push); rerr != nil {
				return nil, fmt.Errorf("reload: %w; putting the DNS back failed too: %v", err, rerr)
			}
			return nil, fmt.Errorf("reload: %w (the tunnel is as it was)", err)
		}
	}
	if blockChanged && r.routes {
		if err := r.rebuildRoutes(cfg.BlockIPv6); err != nil {
			if rerr := r.rebuildRoutes(r.cfg.BlockIPv6); rerr != nil {
				return nil, fmt.Errorf("reload: %w; putting the routes back failed too: %v", err, rerr)
			}
			return nil, fmt.Errorf("reload: %w (the tunnel is as it was)", err)
		}
	}
	r.blockCfg = r.blockCmd || cfg.BlockIPv6
	r.cfg = cfg // the next redial dials with it
	for _, l := range p.Lines {
		progress("reload: %s", l)
	}
	return p, nil
}

// mtuOrNone formats a file's tun-mtu, 0 being none.
func mtuOrNone(v int) string {
	if v == 0 {
		return "none"
	}
	return fmt.Sprint(v)
}

// rebuildRoutes installs the pushed routes again with block-ipv6 on or
// off.
func (r *reconnector) rebuildRoutes(block bool) error {
	push := r.cur.Load().Pushed()
	b := newBlock6(block, push)
	r.block.Store(b)
	r.nc.teardown()
	r.outside = nil
	p, err := installRoutes(r.nc, r.cur.Load().RemoteAddr().Addr(), push, b != nil)
	if err == nil {
		progress("%s", routesLine(p, parseRedirect(push)))
	}
	return err
}

// changedFields names the settings of the two client files that differ,
// other than those reload applies at once (DNS, block-ipv6), user and
// group (applied at the start only) and the parser's diagnostics.
func changedFields(a, b *config.Config) []string {
	x, y := *a, *b
	for _, c := range []*config.Config{&x, &y} {
		c.DHCPOptions, c.BlockIPv6, c.Warnings, c.SecretFiles, c.TunMTU = nil, false, nil, nil, 0
		c.User, c.Group, c.UserLine, c.GroupLine = "", "", 0, 0
	}
	var out []string
	collect(reflect.ValueOf(x), reflect.ValueOf(y), &out)
	return out
}

// collect appends the names of the fields of structs a and b that differ,
// descending into embedded structs.
func collect(a, b reflect.Value, out *[]string) {
	t := a.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue // the parser's own state (an encrypted key's); the fields it fills are compared
		}
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			collect(a.Field(i), b.Field(i), out)
			continue
		}
		if !reflect.DeepEqual(a.Field(i).Interface(), b.Field(i).Interface()) {
			*out = append(*out, fieldName(f.Name))
		}
	}
}

// fieldName turns a Config field name into a lower-case label
// ("Remotes" -> "remotes", "TLSAuth" -> "tlsauth").
func fieldName(s string) string { return strings.ToLower(s) }

// listOrNone joins a list for a plan line.
func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, "; ")
}
