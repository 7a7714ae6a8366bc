// Package gateway reads the TOML description of a site-to-site WireGuard
// gateway: one [interface] table for this gateway and one [[site]] table per
// remote site. It turns the file into the wg-quick model
// (internal/tunnel/wgquick.Config), so that bringing the gateway up and down is
// exactly `wirelane up`/`down`.
//
// Pipeline of a file through this package:
//
//	Resolve (NAME or path -> file, interface name)
//	  -> Parse: TOML syntax (library; FILE:LINE:COL on error)
//	     -> key positions (positions.go: every key, header, array element)
//	     -> types and values, unknown keys (MetaData.Undecoded)
//	     -> cross checks: duplicate names and keys, overlapping networks
//	     => *Gateway, or ErrorList with every problem as FILE:LINE:COL: msg
//	  -> LoadKeys: read private_key_file / preshared_key_file (mode checks)
//	  -> Config: *wgquick.Config for up/down; Summary: text without secrets
package gateway

import (
	"net/netip"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// ConfigDir is where a bare gateway name is looked up (NAME.toml).
var ConfigDir = "/etc/wirelane"

// Gateway is one validated gateway file.
type Gateway struct {
	// Path is the file the gateway was read from (as given).
	Path string
	// Name is the interface name: the file's `name`, else its base name
	// without ".toml".
	Name string

	// PrivateKey is set by Parse when the file holds the key itself
	// (private_key) and by LoadKeys when it names a file. Never log it.
	PrivateKey *wgquick.Key
	// PrivateKeyFile is the private_key_file value, resolved against the
	// gateway file's directory; "" when the key is inline.
	PrivateKeyFile string

	ListenPort *uint16        // nil = random port
	Addresses  []netip.Prefix // interface addresses, with prefix length
	MTU        int            // 0 = automatic
	FwMark     uint32         // 0 = off
	// Table is the routing table for the sites' networks, in wg-quick's
	// terms: "" (main, with policy routing for a /0), "off", a number or
	// an rt_tables name.
	Table                            string
	PreUp, PostUp, PreDown, PostDown []string

	Sites []Site

	// Fleet is the [fleet] table; nil when the gateway is not in a fleet.
	Fleet *Fleet

	privateKeyFilePos Pos // where private_key_file is written
	tablePos          Pos // where a table name is written (looked up at up time)
}

// Site is one remote site: a WireGuard peer and the networks behind it.
type Site struct {
	Name      string
	PublicKey wgquick.Key
	// PresharedKey is set by Parse (preshared_key) or LoadKeys
	// (preshared_key_file); nil when there is none. Never log it.
	PresharedKey     *wgquick.Key
	PresharedKeyFile string // resolved path; "" when inline or absent
	Endpoint         string // "host:port" or "[v6]:port"; "" = the site calls us
	// Networks are the site's networks: the peer's allowed IPs, and the
	// routes added through the tunnel. Masked, no two overlap.
	Networks            []netip.Prefix
	PersistentKeepalive uint16 // seconds, 0 = off

	// Pos is where the site's table starts; EndpointPos where its
	// endpoint is written (zero when absent).
	Pos, EndpointPos Pos

	publicKeyPos        Pos      // where public_key is written
	presharedKeyFilePos Pos      // where preshared_key_file is written
	networkPaths        []string // key path of each network, for messages
}

// Config converts g to the wg-quick model that `wirelane up` and `down`
// run. Each site becomes a [Peer] whose AllowedIPs are its networks; the
// private key is included only once known (inline, or after LoadKeys).
// Endpoint lines are the site's endpoint line, so that a name that does not
// resolve at up time is reported against the gateway file.
func (g *Gateway) Config() *wgquick.Config {
	c := &wgquick.Config{Name: g.Name, Path: g.Path}
	in := &c.Interface
	if g.PrivateKey != nil {
		k := *g.PrivateKey
		in.PrivateKey = &k
	}
	if g.ListenPort != nil {
		p := *g.ListenPort
		in.ListenPort = &p
	}
	if g.FwMark != 0 {
		m := g.FwMark
		in.FwMark = &m
	}
	in.Addresses = append([]netip.Prefix(nil), g.Addresses...)
	in.MTU = g.MTU
	in.Table = g.Table
	in.TableLine = g.tablePos.Line
	in.PreUp = append([]string(nil), g.PreUp...)
	in.PostUp = append([]string(nil), g.PostUp...)
	in.PreDown = append([]string(nil), g.PreDown...)
	in.PostDown = append([]string(nil), g.PostDown...)
	for i := range g.Sites {
		s := &g.Sites[i]
		p := wgquick.Peer{
			PublicKey:    s.PublicKey,
			AllowedIPs:   append([]netip.Prefix(nil), s.Networks...),
			Endpoint:     s.Endpoint,
			Line:         s.Pos.Line,
			EndpointLine: s.EndpointPos.Line,
		}
		if s.PresharedKey != nil {
			k := *s.PresharedKey
			p.PresharedKey = &k
		}
		if s.PersistentKeepalive != 0 {
			ka := s.PersistentKeepalive
			p.PersistentKeepalive = &ka
		}
		c.Peers = append(c.Peers, p)
	}
	return c
}
