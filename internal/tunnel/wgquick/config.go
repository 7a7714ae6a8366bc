// Package wgquick models wg-quick's configuration files: the [Interface]
// and [Peer] sections `wg setconf` understands plus the keys only wg-quick
// acts on (Address, DNS, MTU, Table, the four hooks, SaveConfig).
//
// Pipeline of a file through this package:
//
//	Resolve (NAME or path -> file and interface name)
//	  -> Parse (line by line; the first bad line is reported as FILE:LINE: msg)
//	  -> Config (typed values) + the wg-only lines kept verbatim for Strip
//	  -> Marshal (canonical text; `save` and round-trip tests use it)
//
// The package also holds what `wg` itself prints: keys (keys.go) and the
// human form of a device's state (show.go).
package wgquick

import (
	"net/netip"
	"regexp"
)

// Config is one parsed wg-quick configuration file.
type Config struct {
	// Name is the interface name taken from the file's base name.
	Name string
	// Path is the file the configuration was read from (as given).
	Path string

	Interface Interface
	Peers     []Peer

	// stripped holds the file's lines that `wg setconf` understands,
	// verbatim and in order (what `wg-quick strip` prints).
	stripped []byte
}

// Interface holds the [Interface] section. Pointer fields are nil when the
// key was absent.
type Interface struct {
	PrivateKey *Key
	ListenPort *uint16
	FwMark     *uint32 // 0 = "off"

	// wg-quick-only keys.
	Addresses  []netip.Prefix // address with its prefix length (not masked)
	DNS        []netip.Addr   // name servers
	DNSSearch  []string       // search domains (DNS entries that are not addresses)
	MTU        int            // 0 = choose automatically
	Table      string         // "" (auto), "auto", "off", a number or an rt_tables name
	PreUp      []string
	PostUp     []string
	PreDown    []string
	PostDown   []string
	SaveConfig bool

	// DNSOptional lets Up go on without DNS when neither systemd-resolved
	// nor resolvconf can take the DNS servers (lookups then go to the
	// host's resolvers, outside the tunnel). It is set by the comment
	// "# wirelane: DNSOptional = true", which wg-quick ignores.
	DNSOptional bool

	// DNSLine and TableLine are the lines of the first DNS key and of the
	// Table key (0 when absent), for errors found when the tunnel comes up.
	DNSLine, TableLine int
}

// Peer holds one [Peer] section.
type Peer struct {
	PublicKey           Key
	PresharedKey        *Key
	AllowedIPs          []netip.Prefix // masked
	Endpoint            string         // "host:port" or "[v6]:port" as written; "" = none
	PersistentKeepalive *uint16        // 0 = "off"
	// Name is the peer's friendly name from a "# Name = ..." comment line
	// in its section (the convention of wg-easy and the exporters); "" when
	// there is none. wg(8) sees only a comment.
	Name string

	// Line is the line of the [Peer] header (for errors found later, such
	// as an endpoint that does not resolve).
	Line int
	// EndpointLine is the line of the Endpoint key, 0 when absent.
	EndpointLine int
}

// ConfigDir is where a bare interface name is looked up (NAME.conf).
var ConfigDir = "/etc/wireguard"

// ifnameRE is what wg-quick accepts as an interface name.
var ifnameRE = regexp.MustCompile(`^[a-zA-Z0-9_=+.-]{1,15}$`)

// confRE extracts the interface name from a file name.
var confRE = regexp.MustCompile(`(^|/)([a-zA-Z0-9_=+.-]{1,15})\.conf$`)

// ValidInterfaceName reports whether name is acceptable as an interface
// name (1 to 15 characters of [a-zA-Z0-9_=+.-]).
func ValidInterfaceName(name string) bool { return ifnameRE.MatchString(name) }

// HasDefaultRoute reports whether any peer's AllowedIPs holds a /0.
func (c *Config) HasDefaultRoute() bool {
	for _, p := range c.Peers {
		for _, a := range p.AllowedIPs {
			if a.Bits() == 0 {
				return true
			}
		}
	}
	return false
}
