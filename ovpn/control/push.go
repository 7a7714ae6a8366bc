package control

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// PushReply holds the options of a (possibly split) PUSH_REPLY.
type PushReply struct {
	Options []string // every option, in order, continuation markers removed

	Local   netip.Prefix   // ifconfig (topology subnet: address/netmask)
	Remote  netip.Addr     // ifconfig peer (net30/p2p) or route-gateway
	Local6  netip.Prefix   // ifconfig-ipv6 address/length
	Remote6 netip.Addr     // ifconfig-ipv6's remote: the server's tunnel IPv6 address
	Routes  []netip.Prefix // route and route-ipv6, in order
	// RouteGateways holds the gateways given on route-ipv6 lines
	// (`route-ipv6 NET/LEN GATEWAY`); routes without one are absent.
	RouteGateways map[netip.Prefix]netip.Addr
	DNS           []netip.Addr // dhcp-option DNS and DNS6, in order, duplicates dropped
	// Domain is the last `dhcp-option DOMAIN` (the connection's DNS
	// suffix, the first search domain), "" when none was pushed.
	Domain string
	// SearchDomains are the `dhcp-option DOMAIN-SEARCH` names, in order,
	// duplicates dropped.
	SearchDomains []string
	// Ignored describes pushed options that were malformed but harmless
	// to skip (a DNS server that is not an address, a domain that is not
	// a domain name), for the caller to report.
	Ignored []string
	// BlockIPv6 is a pushed block-ipv6: the client answers IPv6 packets
	// for the tunnel with ICMPv6 "no route" instead of sending them.
	BlockIPv6   bool
	PeerID      uint32 // 0xFFFFFF when absent
	HasPeerID   bool
	Cipher      string
	Ping        int
	PingRestart int
	TLSEKM      bool // key-derivation tls-ekm or protocol-flags tls-ekm
	CCExit      bool // protocol-flags cc-exit
	Topology    string
	// TunMTU is a pushed `tun-mtu N` (OpenVPN 2.6 servers push it to
	// clients that announce IV_MTU), 0 when none was pushed; a value
	// outside 100 to 65535 is noted in Ignored instead.
	TunMTU   int
	Compress string // any compression option pushed (not supported)
	// AuthToken is a pushed auth-token: the password to use on later
	// key exchanges and reconnects ("" = none).
	AuthToken string
	// AuthTokenUser is a pushed auth-token-user, decoded from base64: the
	// username to send with the token ("" = keep the configured one).
	AuthTokenUser string
}

// PushAccumulator merges PUSH_REPLY messages until the last part.
type PushAccumulator struct {
	opts []string
}

// Add takes one PUSH_REPLY message (with or without the "PUSH_REPLY,"
// prefix) and reports whether it was the last part.
func (a *PushAccumulator) Add(msg string) (done bool, err error) {
	msg = strings.TrimPrefix(msg, "PUSH_REPLY")
	msg = strings.TrimPrefix(msg, ",")
	done = true
	for _, o := range strings.Split(msg, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if f := strings.Fields(o); f[0] == "push-continuation" {
			if len(f) != 2 {
				return false, fmt.Errorf("control: bad %q", o)
			}
			done = f[1] != "2"
			continue
		}
		a.opts = append(a.opts, o)
	}
	return done, nil
}

// Reply parses the accumulated options.
func (a *PushAccumulator) Reply() (*PushReply, error) { return ParsePushOptions(a.opts) }

// ParsePushOptions interprets pushed options. Unknown options are kept in
// Options and otherwise ignored, as OpenVPN clients do.
func ParsePushOptions(opts []string) (*PushReply, error) {
	r := &PushReply{Options: opts, PeerID: 0xFFFFFF}
	var ifLocal, ifSecond string
	var dns dnsOptions
	for _, o := range opts {
		f := strings.Fields(o)
		if len(f) == 0 {
			continue
		}
		bad := func() error { return fmt.Errorf("control: bad pushed option %q", o) }
		switch f[0] {
		case "ifconfig":
			if len(f) != 3 {
				return nil, bad()
			}
			ifLocal, ifSecond = f[1], f[2]
		case "ifconfig-ipv6":
			if len(f) < 2 {
				return nil, bad()
			}
			p, err := netip.ParsePrefix(f[1])
			if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() {
				return nil, bad()
			}
			r.Local6 = p
			if len(f) >= 3 {
				a, err := netip.ParseAddr(f[2])
				if err != nil || !a.Is6() || a.Is4In6() {
					return nil, bad()
				}
				r.Remote6 = a
			}
		case "route-gateway":
			if len(f) >= 2 {
				if a, err := netip.ParseAddr(f[1]); err == nil {
					r.Remote = a
				}
			}
		case "route":
			if len(f) < 2 {
				return nil, bad()
			}
			mask := "255.255.255.255"
			if len(f) >= 3 {
				mask = f[2]
			}
			p, err := prefixFromMask(f[1], mask)
			if err != nil {
				return nil, bad()
			}
			r.Routes = append(r.Routes, p)
		case "route-ipv6":
			if len(f) < 2 {
				return nil, bad()
			}
			p, err := netip.ParsePrefix(f[1])
			if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() {
				return nil, bad()
			}
			r.Routes = append(r.Routes, p)
			if len(f) >= 3 {
				gw, err := netip.ParseAddr(f[2])
				if err != nil || !gw.Is6() || gw.Is4In6() {
					return nil, bad()
				}
				if r.RouteGateways == nil {
					r.RouteGateways = make(map[netip.Prefix]netip.Addr)
				}
				r.RouteGateways[p] = gw
			}
		case "dhcp-option":
			r.addDHCPOption(o, f[1:])
		case "dns":
			dns.add(r, o, f)
		case "block-ipv6":
			if len(f) != 1 {
				r.Ignored = append(r.Ignored, fmt.Sprintf("%q: takes no argument", o))
				continue
			}
			r.BlockIPv6 = true
		case "peer-id":
			if len(f) != 2 {
				return nil, bad()
			}
			v, err := strconv.ParseUint(f[1], 10, 32)
			if err != nil || v > 0xFFFFFF {
				return nil, bad()
			}
			r.PeerID, r.HasPeerID = uint32(v), true
		case "cipher":
			if len(f) != 2 {
				return nil, bad()
			}
			r.Cipher = f[1]
		case "ping", "ping-restart":
			if len(f) != 2 {
				return nil, bad()
			}
			v, err := strconv.Atoi(f[1])
			if err != nil || v < 0 {
				return nil, bad()
			}
			if f[0] == "ping" {
				r.Ping = v
			} else {
				r.PingRestart = v
			}
		case "key-derivation":
			if len(f) == 2 && f[1] == "tls-ekm" {
				r.TLSEKM = true
			}
		case "protocol-flags":
			for _, fl := range f[1:] {
				switch fl {
				case "tls-ekm":
					r.TLSEKM = true
				case "cc-exit":
					r.CCExit = true
				}
			}
		case "tun-mtu":
			v, err := 0, error(nil)
			if len(f) == 2 || len(f) == 3 {
				v, err = strconv.Atoi(f[1])
			}
			if (len(f) != 2 && len(f) != 3) || err != nil || v < 100 || v > 65535 {
				r.Ignored = append(r.Ignored, fmt.Sprintf("%q: want an MTU from 100 to 65535", o))
				continue
			}
			r.TunMTU = v
		case "topology":
			if len(f) == 2 {
				r.Topology = f[1]
			}
		case "compress", "comp-lzo":
			r.Compress = o
		case "auth-token":
			if len(f) == 2 {
				r.AuthToken = f[1]
			}
		case "auth-token-user":
			if len(f) != 2 {
				return nil, bad()
			}
			u, err := base64.StdEncoding.DecodeString(f[1])
			if err != nil || len(u) == 0 {
				return nil, bad()
			}
			r.AuthTokenUser = string(u)
		}
	}
	dns.apply(r)
	if ifLocal != "" {
		local, err := netip.ParseAddr(ifLocal)
		if err != nil {
			return nil, fmt.Errorf("control: bad pushed ifconfig address %q", ifLocal)
		}
		if r.Topology == "subnet" {
			p, err := prefixFromMask(ifLocal, ifSecond)
			if err != nil {
				return nil, fmt.Errorf("control: bad pushed ifconfig netmask %q", ifSecond)
			}
			r.Local = netip.PrefixFrom(local, p.Bits())
		} else {
			peer, err := netip.ParseAddr(ifSecond)
			if err != nil {
				return nil, fmt.Errorf("control: bad pushed ifconfig peer %q", ifSecond)
			}
			r.Local = netip.PrefixFrom(local, 32)
			r.Remote = peer
		}
	}
	return r, nil
}

// addDHCPOption takes `dhcp-option TYPE VALUE` (args is TYPE VALUE...).
// DNS servers and domains are kept; a malformed one is noted in Ignored
// rather than failing the session, as OpenVPN clients skip it too. Other
// types (WINS, NTP, ...) only stay in Options.
func (r *PushReply) addDHCPOption(o string, args []string) {
	if len(args) == 0 {
		r.Ignored = append(r.Ignored, fmt.Sprintf("%q: no type", o))
		return
	}
	switch args[0] {
	case "DNS", "DNS6", "DOMAIN", "DOMAIN-SEARCH":
	default:
		return
	}
	if len(args) != 2 {
		r.Ignored = append(r.Ignored, fmt.Sprintf("%q: want one value", o))
		return
	}
	v := args[1]
	switch args[0] {
	case "DNS", "DNS6":
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" || a.IsUnspecified() {
			r.Ignored = append(r.Ignored, fmt.Sprintf("%q: not a server address", o))
			return
		}
		a = a.Unmap()
		for _, have := range r.DNS {
			if have == a {
				return
			}
		}
		r.DNS = append(r.DNS, a)
	case "DOMAIN", "DOMAIN-SEARCH":
		d := strings.TrimSuffix(v, ".")
		if !ValidDomain(d) {
			r.Ignored = append(r.Ignored, fmt.Sprintf("%q: not a domain name", o))
			return
		}
		if args[0] == "DOMAIN" {
			r.Domain = d
			return
		}
		for _, have := range r.SearchDomains {
			if strings.EqualFold(have, d) {
				return
			}
		}
		r.SearchDomains = append(r.SearchDomains, d)
	}
}

// SearchList is the DNS search list of the push: Domain first, then the
// search domains (without a repeat of Domain).
func (r *PushReply) SearchList() []string {
	var l []string
	if r.Domain != "" {
		l = append(l, r.Domain)
	}
	for _, d := range r.SearchDomains {
		if !strings.EqualFold(d, r.Domain) {
			l = append(l, d)
		}
	}
	return l
}

// ValidDomain reports whether d is a DNS name fit for a resolv.conf
// search line: dot-separated labels of 1 to 63 letters, digits, hyphens
// and underscores, not starting or ending with a hyphen, at most 253
// characters in all.
func ValidDomain(d string) bool {
	if d == "" || len(d) > 253 {
		return false
	}
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

func prefixFromMask(addr, mask string) (netip.Prefix, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}, err
	}
	bits, err := MaskBits(mask)
	if err != nil {
		return netip.Prefix{}, err
	}
	return a.Prefix(bits)
}

// MaskBits returns the prefix length of an IPv4 netmask such as
// 255.255.255.0, rejecting non-contiguous masks.
func MaskBits(mask string) (int, error) {
	m, err := netip.ParseAddr(mask)
	if err != nil || !m.Is4() {
		return 0, fmt.Errorf("bad netmask %q", mask)
	}
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	bits := 0
	for v&0x80000000 != 0 {
		bits++
		v <<= 1
	}
	if v != 0 {
		return 0, fmt.Errorf("non-contiguous netmask %q", mask)
	}
	return bits, nil
}
