package config

// client-config-dir files: the per-client directives OpenVPN 2.6 reads
// from the file named after a client's certificate common name (or
// DEFAULT). This file only reads one such file; the server checks the
// addresses against its pools and applies the entry (ovpn/server/ccd.go).
//
//	text -> lines -> tokens (tokenize: quotes, comments, leading --)
//	     -> a client-config directive -> ClientConfig
//	     -> known, not implemented (vlan-pvid, config) -> error FILE:LINE
//	     -> known, harmless (echo, setenv, ...) -> warning
//	     -> a directive of the server's own file -> error FILE:LINE
//	     -> anything else -> warning (with "did you mean ...?")

import (
	"cmp"
	"errors"
	"net/netip"
	"slices"
	"strings"

	"github.com/wirelane/wirelane/internal/sys/suggest"
	"github.com/wirelane/wirelane/ovpn/control"
)

// ClientConfig is one parsed client-config-dir file.
type ClientConfig struct {
	// Name is the file's name (the client's common name, or DEFAULT).
	Name string
	// File labels the file in messages (its path).
	File string

	// Address and Netmask are `ifconfig-push ADDR MASK` (invalid: the
	// pool picks the address); AddressLine is its line.
	Address     netip.Addr
	Netmask     int
	AddressLine int
	// Address6 is `ifconfig-ipv6-push ADDR/LEN [REMOTE]` (invalid: the
	// IPv6 pool picks it); Address6Line is its line.
	Address6     netip.Prefix
	Address6Line int

	// IRoutes are `iroute NET [MASK]` and `iroute-ipv6 NET/LEN`: networks
	// behind the client that the server routes to it (after a `route`
	// line has brought them into the tunnel device).
	IRoutes []netip.Prefix
	// Push are the client's own `push "..."` options, sent after the
	// server's (unless PushReset).
	Push []string
	// PushReset (`push-reset`): the server file's push lines are not
	// sent to this client. The options the server itself decides
	// (addresses, route-gateway, topology, ping, peer-id, cipher) are.
	PushReset bool
	// PushRemove are `push-remove TEXT`: the server file's push options
	// holding TEXT are not sent to this client.
	PushRemove []string
	// Disable (`disable`): the client is refused with AUTH_FAILED.
	Disable bool

	// Warnings lists ignored directives.
	Warnings []Diagnostic
}

// Equal reports whether two entries configure a client the same way
// (names, lines and warnings aside).
func (c *ClientConfig) Equal(o *ClientConfig) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Address == o.Address && c.Netmask == o.Netmask && c.Address6 == o.Address6 &&
		slices.Equal(c.IRoutes, o.IRoutes) && c.SamePush(o) && c.Disable == o.Disable
}

// SamePush reports whether two entries (either may be nil) change the
// pushed options the same way.
func (c *ClientConfig) SamePush(o *ClientConfig) bool {
	if c == nil {
		c = &ClientConfig{}
	}
	if o == nil {
		o = &ClientConfig{}
	}
	return slices.Equal(c.Push, o.Push) && c.PushReset == o.PushReset && slices.Equal(c.PushRemove, o.PushRemove)
}

// PushOptions returns the options pushed to the client: the server's
// (global) list as push-reset and push-remove leave it, then the
// client's own. c may be nil (no file).
func (c *ClientConfig) PushOptions(global []string) []string {
	if c == nil {
		return slices.Clone(global)
	}
	var out []string
	if !c.PushReset {
		for _, o := range global {
			if !slices.ContainsFunc(c.PushRemove, func(s string) bool { return strings.Contains(o, s) }) {
				out = append(out, o)
			}
		}
	}
	return append(out, c.Push...)
}

// ccdDirectives are the directives a client-config-dir file may hold.
var ccdDirectives = []string{"ifconfig-push", "ifconfig-ipv6-push", "iroute", "iroute-ipv6", "push", "push-reset", "push-remove", "disable"}

// ccdUnsupported are legal in OpenVPN's client-config-dir files but not
// implemented; ignoring them would change what the client gets.
var ccdUnsupported = map[string]string{
	"vlan-pvid": "VLAN tagging (tap devices)", "config": "including other files",
	"override-username": "username overrides", "compress": "compression (changes the data framing)",
	"comp-lzo": "compression (changes the data framing)", "inactive": "inactivity timeouts",
}

// ccdIgnored are legal there and harmless to ignore.
var ccdIgnored = map[string]string{
	"echo": "", "setenv": "scripts are not run", "setenv-safe": "scripts are not run",
	"max-routes-per-client": "iroutes come only from this file", "verb": "", "mute": "",
}

// ErrMainOnly marks a directive of the server's own configuration file in
// a client-config-dir file.
var ErrMainOnly = errors.New("it belongs in the server's configuration file, not in a client-config-dir file")

// ParseClientConfig parses one client-config-dir file. name is the
// client's common name (the file name), file labels errors (FILE:LINE).
// serverOnly lists directives of the server's own file besides the ones
// this package knows (they are refused here with ErrMainOnly).
func ParseClientConfig(text []byte, name, file string, serverOnly []string) (*ClientConfig, error) {
	c := &ClientConfig{Name: name, File: file}
	p := &Parser{Name: file, c: &Common{}, seen: map[string]int{}}
	lines := strings.Split(string(text), "\n")
	for i, l := range lines {
		p.Line = i + 1
		raw := strings.TrimSpace(strings.TrimSuffix(l, "\r"))
		if strings.HasPrefix(raw, "<") && strings.HasSuffix(raw, ">") {
			return nil, p.Errorf(raw, "inline blocks are not allowed in a client-config-dir file")
		}
		args, err := tokenize(raw)
		if err != nil {
			return nil, p.Errorf("", "%v", err)
		}
		if len(args) == 0 {
			continue
		}
		args[0] = strings.ToLower(strings.TrimPrefix(args[0], "--"))
		if err := c.directive(p, args, serverOnly); err != nil {
			return nil, err
		}
	}
	c.Warnings = p.c.Warnings
	return c, nil
}

// directive handles one line of a client-config-dir file.
func (c *ClientConfig) directive(p *Parser, args []string, serverOnly []string) error {
	name := args[0]
	switch name {
	case "ifconfig-push":
		if err := p.Want(args, 2, 3); err != nil {
			return err
		}
		if len(args) == 4 {
			return p.Errorf(name, "the alias address (NAT) is %w", ErrUnsupported)
		}
		a, err := netip.ParseAddr(args[1])
		if err != nil || !a.Is4() {
			return p.Errorf(name, "want an IPv4 address, got %q", args[1])
		}
		bits, err := control.MaskBits(args[2])
		if err != nil {
			return p.Errorf(name, "%v (topology subnet: the second argument is the netmask)", err)
		}
		c.Address, c.Netmask, c.AddressLine = a, bits, p.Line
	case "ifconfig-ipv6-push":
		if err := p.Want(args, 1, 2); err != nil {
			return err
		}
		pfx, err := netip.ParsePrefix(args[1])
		if err != nil || !pfx.Addr().Is6() || pfx.Addr().Is4In6() {
			return p.Errorf(name, "want an IPv6 address with its prefix length such as fd42::50/64, got %q", args[1])
		}
		if len(args) == 3 {
			if r, err := netip.ParseAddr(args[2]); err != nil || !r.Is6() {
				return p.Errorf(name, "want the server's IPv6 address as the second argument, got %q", args[2])
			}
		}
		c.Address6, c.Address6Line = pfx, p.Line
	case "iroute":
		if err := p.Want(args, 1, 2); err != nil {
			return err
		}
		a, err := netip.ParseAddr(args[1])
		if err != nil || !a.Is4() {
			return p.Errorf(name, "want an IPv4 network, got %q", args[1])
		}
		bits := 32
		if len(args) == 3 {
			if bits, err = control.MaskBits(args[2]); err != nil {
				return p.Errorf(name, "%v", err)
			}
		}
		return c.addIRoute(p, name, netip.PrefixFrom(a, bits))
	case "iroute-ipv6":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		pfx, err := netip.ParsePrefix(args[1])
		if err != nil || !pfx.Addr().Is6() || pfx.Addr().Is4In6() {
			return p.Errorf(name, "want an IPv6 prefix such as fd99::/64, got %q", args[1])
		}
		return c.addIRoute(p, name, pfx)
	case "push":
		opt, err := p.PushOption(args, " (use ifconfig-push for a fixed address)")
		if err != nil {
			return err
		}
		switch strings.Fields(opt)[0] {
		case "compress", "comp-lzo":
			return p.Errorf(name, "%q: compression %w", opt, ErrUnsupported)
		}
		c.Push = append(c.Push, opt)
	case "push-reset":
		if err := p.Want(args, 0, 0); err != nil {
			return err
		}
		c.PushReset = true
	case "push-remove":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if strings.TrimSpace(args[1]) == "" {
			return p.Errorf(name, "empty text")
		}
		c.PushRemove = append(c.PushRemove, args[1])
	case "disable":
		if err := p.Want(args, 0, 0); err != nil {
			return err
		}
		c.Disable = true
	default:
		if what, ok := ccdUnsupported[name]; ok {
			return p.Errorf(name, "%s: %w", what, ErrUnsupported)
		}
		if why, ok := ccdIgnored[name]; ok {
			p.Warn(name, cmp.Or(why, "ignored"))
			return nil
		}
		if _, ok := roleOf[name]; ok || slices.Contains(sharedNames, name) || slices.Contains(serverOnly, name) {
			return p.Errorf(name, "%w", ErrMainOnly)
		}
		p.Warn(name, "unknown directive ignored"+suggest.Hint(name, ccdDirectives))
	}
	return nil
}

// addIRoute records an iroute, refusing host bits (a likely typo).
func (c *ClientConfig) addIRoute(p *Parser, name string, pfx netip.Prefix) error {
	if pfx.Masked() != pfx {
		return p.Errorf(name, "%s has host bits set (network is %s)", pfx, pfx.Masked())
	}
	if !slices.Contains(c.IRoutes, pfx) {
		c.IRoutes = append(c.IRoutes, pfx)
	}
	return nil
}
