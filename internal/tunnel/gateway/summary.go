package gateway

import (
	"fmt"
	"net/netip"
	"strings"
)

// Summary describes the gateway for people: the interface, its public key
// (when the private key is known), and every site with its endpoint and
// networks. Private and preshared keys never appear: only whether they
// are set, and the file they come from.
func (g *Gateway) Summary() string {
	var b strings.Builder
	row := func(k, v string) { fmt.Fprintf(&b, "  %-15s %s\n", k+":", v) }
	fmt.Fprintf(&b, "gateway %s (%s)\n", g.Name, g.Path)
	if g.PrivateKey != nil {
		row("public key", g.PrivateKey.PublicKey().String())
	}
	if g.PrivateKeyFile != "" {
		row("private key", "from "+g.PrivateKeyFile)
	} else {
		row("private key", "in the file")
	}
	if g.ListenPort != nil {
		row("listen port", fmt.Sprint(*g.ListenPort))
	} else {
		row("listen port", "random")
	}
	if len(g.Addresses) > 0 {
		row("addresses", joinPrefixes(g.Addresses))
	}
	if g.MTU != 0 {
		row("mtu", fmt.Sprint(g.MTU))
	} else {
		row("mtu", "auto")
	}
	if g.FwMark != 0 {
		row("fwmark", fmt.Sprintf("0x%x", g.FwMark))
	}
	switch g.Table {
	case "":
		row("routes", "main table")
	case "off":
		row("routes", "none (table = \"off\")")
	default:
		row("routes", "table "+g.Table)
	}
	for _, h := range [...]struct {
		name string
		cmds []string
	}{{"pre_up", g.PreUp}, {"post_up", g.PostUp}, {"pre_down", g.PreDown}, {"post_down", g.PostDown}} {
		for _, c := range h.cmds {
			row(h.name, c)
		}
	}
	if g.Fleet != nil {
		g.Fleet.summary(row)
	}
	for i := range g.Sites {
		s := &g.Sites[i]
		fmt.Fprintf(&b, "site %s\n", s.Name)
		row("public key", s.PublicKey.String())
		switch {
		case s.PresharedKeyFile != "":
			row("preshared key", "from "+s.PresharedKeyFile)
		case s.PresharedKey != nil:
			row("preshared key", "in the file")
		}
		if s.Endpoint != "" {
			row("endpoint", s.Endpoint)
		} else {
			row("endpoint", "none (the site connects to us)")
		}
		row("networks", joinPrefixes(s.Networks))
		if s.PersistentKeepalive != 0 {
			row("keepalive", fmt.Sprintf("every %ds", s.PersistentKeepalive))
		}
	}
	return b.String()
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}
