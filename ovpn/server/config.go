package server

// OpenVPN-style server configuration files: the directives Wirelane's
// server implements, inline <ca>/<cert>/<key>/<tls-auth>/<tls-crypt>
// blocks and referenced files. Directives that would change security or
// the wire format if ignored are errors (with file and line), and so are
// client directives (config.ErrWrongRole); directives about the local
// host (logging, privileges, persistence) are warnings.
//
//	text -> config.Run (lines, tokens, inline blocks, the directives
//	        clients share into config.Common, client directives refused)
//	     -> serverExt: the server directive table -> Config

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/wirelane/wirelane/ovpn/config"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Proto is the server's transport protocol.
type Proto = config.Proto

// Transport protocols.
const (
	UDP = config.UDP
	TCP = config.TCP
)

// Config is a server configuration: config.Common (credentials,
// control-channel wrapping, TLS floor, CRL, data ciphers, timers) and the
// server's additions. Zero fields take the defaults listed beside them
// when the server starts. In Common, RemoteCertTLS is "client" or "";
// DataCiphers defaults to AES-256-GCM, AES-128-GCM, CHACHA20-POLY1305;
// Ping and PingRestart are what clients are told (the server itself waits
// twice PingRestart, as OpenVPN does); RenegSec 0 leaves renegotiation to
// the clients' schedule; KeyDirection is 0 or bidirectional.
type Config struct {
	config.Common

	// Listen is the local address and port (default 0.0.0.0:1194, or [::]
	// with proto udp6/tcp6).
	Listen netip.AddrPort
	// Proto is UDP (default) or TCP.
	Proto Proto
	// Network is the client address pool of `server NET MASK`
	// (topology subnet): the server takes the first host address, clients
	// the following ones. Invalid: an IPv6-only server (Network6 alone).
	Network netip.Prefix
	// Network6 is the IPv6 pool of `server-ipv6 PREFIX/LEN` (/64 to /112;
	// invalid: IPv4 only): the server takes PREFIX::1, the client with the
	// i-th IPv4 pool address gets PREFIX::1000 + i (without Network, the
	// i-th client slot).
	Network6 netip.Prefix
	// MTU is the TUN MTU (tun-mtu, default 1500).
	MTU int

	// Push holds the options of `push "..."` lines, in order.
	Push []string
	// Routes are `route NET MASK` and `route-ipv6 NET/LEN` lines: networks
	// behind the server's TUN.
	Routes []netip.Prefix

	// HandWindow bounds each TLS handshake and key exchange (default 60 s).
	HandWindow int

	// ClientToClient forwards packets between clients inside the server
	// instead of handing them to the TUN device.
	ClientToClient bool
	// DuplicateCN lets several clients use one certificate at once;
	// without it a new session with a common name ends the older one.
	DuplicateCN bool
	// MaxClients limits concurrent clients (0 = the pool size).
	MaxClients int
	// ConnectFreq and ConnectFreqSec (`connect-freq N SEC`) allow at
	// most ConnectFreq new sessions in any ConnectFreqSec seconds (0:
	// no limit).
	ConnectFreq, ConnectFreqSec int

	// TLSCryptV2AllowFile is tls-crypt-v2-metadata-allow (Wirelane's
	// stand-in for OpenVPN's tls-crypt-v2-verify script): a file of the
	// client keys' user metadata, one base64 value a line; a client key
	// whose metadata is not listed is refused before TLS. Read again when
	// it changes. "" accepts every key the server key unwraps.
	TLSCryptV2AllowFile string
	// TLSCryptV2MaxAge is tls-crypt-v2-max-age: client keys older than
	// this many days (by their timestamp metadata) are refused; 0: no
	// limit.
	TLSCryptV2MaxAge int

	// ClientConfigDir is client-config-dir ("" = none): per-client files
	// named after the certificate common names (and DEFAULT), read with
	// this file and again at each reload into ClientConfigs (by file
	// name). CCDExclusive (ccd-exclusive) refuses clients without a file
	// of their own.
	ClientConfigDir string
	CCDExclusive    bool
	ClientConfigs   map[string]*config.ClientConfig
	// ExplicitExitNotify is explicit-exit-notify: at shutdown, cc-exit
	// clients are told RESTART (0 or 1, Wirelane tells them even without
	// the directive), or with 2 RESTART,[N]: reconnect to the next
	// server of their list.
	ExplicitExitNotify int
}

// Diagnostic is a warning about one line of a configuration file.
type Diagnostic = config.Diagnostic

// ConfigError is a configuration error with its location ("file:line:
// directive: cause"); Unwrap gives ErrUnsupported for recognised
// directives the server does not implement and config.ErrWrongRole for
// client directives.
type ConfigError = config.Error

// ErrUnsupported marks recognised directives the server does not implement
// and must not silently ignore.
var ErrUnsupported = config.ErrUnsupported

// serverUnsupported would weaken security or change the wire format if
// ignored.
var serverUnsupported = map[string]string{
	"secret":                "static-key mode",
	"tls-crypt-v2-verify":   "tls-crypt-v2 verification scripts (list the allowed keys' metadata with tls-crypt-v2-metadata-allow FILE)",
	"auth-user-pass-verify": "username/password checks", "plugin": "plugins", "verify-client-cert": "optional client certificates",
	"client-cert-not-required": "optional client certificates", "tls-verify": "verification scripts",
	"fragment": "fragmentation (changes the data framing)", "ifconfig-ipv6": "explicit IPv6 tunnel addresses (use server-ipv6)",
	"ifconfig-ipv6-pool": "explicit IPv6 pools (use server-ipv6)", "server-bridge": "bridged (tap) servers", "ifconfig-pool": "explicit pools (use server)",
	"tls-cipher": "TLS cipher restrictions", "tls-ciphersuites": "TLS cipher restrictions",
	"tls-groups":       "TLS group restrictions",
	"verify-x509-name": "client name checks", "remote-cert-ku": "key-usage checks", "remote-cert-eku": "extended-key-usage checks by OID",
	"x509-username-field": "username fields", "auth-gen-token": "auth tokens", "learn-address": "scripts",
	"client-connect": "scripts", "client-disconnect": "scripts",
	// The server would go on parsing clients' input as root: refused
	// rather than ignored (user and group are honoured).
	"chroot": "changing the root directory (user and group are supported; client-config-dir and crl-verify are read after the start, from the real root)",
}

// serverIgnored concern the local host or tuning and are accepted with a
// warning.
var serverIgnored = map[string]string{
	"persist-key": "", "persist-tun": "", "verb": "", "mute": "", "status": "", "status-version": "", "log": "",
	"log-append": "", "daemon": "", "writepid": "", "ifconfig-pool-persist": "addresses are assigned per connection",
	"mute-replay-warnings": "", "sndbuf": "", "rcvbuf": "", "txqueuelen": "",
	"script-security": "scripts are not run", "up": "scripts are not run", "down": "scripts are not run", "dh": "ECDHE is used",
	"ecdh-curve": "", "tls-timeout": "", "replay-window": "", "float": "", "multihome": "", "management": "",
	"suppress-timestamps": "", "machine-readable-output": "", "cd": "", "setenv": "",
	"tran-window":     "",
	"tcp-queue-limit": "", "bcast-buffers": "", "tun-mtu-extra": "", "link-mtu": "", "dev-type": "",
	"reneg-bytes": "renegotiation is by time and packet-id limit", "reneg-pkts": "renegotiation is by time and packet-id limit",
	"opt-verify": "", "ncp-disable": "", "tls-version-max": "", "username-as-common-name": "",
}

// ParseConfigFile reads and parses a server configuration; relative file
// names in it are resolved against its directory.
func ParseConfigFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConfig(b, path, filepath.Dir(path))
}

// ParseConfig parses server configuration text. name labels errors; dir
// resolves relative file references ("" forbids them).
func ParseConfig(text []byte, name, dir string) (*Config, error) {
	e := &serverExt{cfg: &Config{}}
	if err := config.Run(text, name, dir, &e.cfg.Common, e); err != nil {
		return nil, err
	}
	return e.cfg, nil
}

// serverExt is the server's config.Extension: the directives below into
// a Config.
type serverExt struct {
	cfg       *Config
	family    int // 4, 6 or 0 from proto udp4/udp6
	local     string
	port      uint16
	topology  string
	hasServer bool
	line6     int // the server-ipv6 line
	// pushFraming is the framing of a pushed compress or comp-lzo, on
	// line pushFramingLine (0: none pushed).
	pushFraming     data.Framing
	pushFramingLine int
}

// Role reports config.ServerRole.
func (e *serverExt) Role() config.Role { return config.ServerRole }

// Directives lists the directives Directive handles (for suggestions).
func (e *serverExt) Directives() []string {
	return []string{"dh", "mode", "tls-server", "port", "lport", "local", "proto", "dev", "tun-mtu", "topology",
		"server", "server-ipv6", "remote-cert-tls", "push", "route", "route-ipv6", "keepalive", "ping",
		"ping-restart", "reneg-sec", "hand-window", "max-clients", "client-to-client", "duplicate-cn",
		"tls-crypt-v2-max-age", "tls-crypt-v2-metadata-allow", "client-config-dir", "ccd-exclusive", "explicit-exit-notify"}
}

// Inline refuses the blocks a server does not implement.
func (e *serverExt) Inline(p *config.Parser, tag, body string) error {
	switch tag {
	case "dh":
		p.Warn("<dh>", "ignored; ECDHE is used")
	default:
		if what, ok := serverUnsupported[tag]; ok {
			return p.Errorf("<"+tag+">", "%s: %w", what, ErrUnsupported)
		}
		return p.Errorf("<"+tag+">", "unknown inline block%s", p.Suggest(tag))
	}
	return nil
}

// Directive handles the server's directives.
func (e *serverExt) Directive(p *config.Parser, args []string) error {
	c := e.cfg
	name := args[0]
	switch name {
	case "mode":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if args[1] != "server" {
			return p.Errorf(name, "only mode server is supported, not %q", args[1])
		}
	case "tls-server":
		return p.Want(args, 0, 0)
	case "port", "lport":
		v, err := p.NumberArg(args, 1, 65535)
		if err != nil {
			return err
		}
		e.port = uint16(v)
	case "local":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if _, err := netip.ParseAddr(args[1]); err != nil {
			return p.Errorf(name, "want an IP address, got %q", args[1])
		}
		e.local = args[1]
	case "proto":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		switch strings.ToLower(args[1]) {
		case "udp", "udp4", "udp6":
			c.Proto = UDP
		case "tcp", "tcp-server", "tcp4", "tcp4-server", "tcp6", "tcp6-server":
			c.Proto = TCP
		default:
			return p.Errorf(name, "unknown or client-only protocol %q", args[1])
		}
		switch {
		case strings.Contains(args[1], "4"):
			e.family = 4
		case strings.Contains(args[1], "6"):
			e.family = 6
		}
	case "dev":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if len(args[1]) > 15 || strings.ContainsAny(args[1], "/ ") {
			return p.Errorf(name, "bad interface name %q", args[1])
		}
		if strings.HasPrefix(args[1], "tap") || args[1] == "null" {
			return p.Errorf(name, "%q: only tun devices are supported", args[1])
		}
		c.Dev = args[1]
	case "tun-mtu":
		v, err := p.NumberArg(args, 1, 65535)
		if err != nil {
			return err
		}
		if v < 576 {
			return p.Errorf(name, "MTU %d is below 576", v)
		}
		c.MTU = v
	case "topology":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if args[1] != "subnet" {
			return p.Errorf(name, "topology %q: %w (use topology subnet)", args[1], ErrUnsupported)
		}
		e.topology = args[1]
	case "server":
		if err := p.Want(args, 2, 3); err != nil {
			return err
		}
		if len(args) == 4 {
			return p.Errorf(name, "%q: %w (the server always assigns addresses from the pool)", args[3], ErrUnsupported)
		}
		pfx, err := prefixFromMask(args[1], args[2])
		if err != nil {
			return p.Errorf(name, "%v", err)
		}
		if !pfx.Addr().Is4() || pfx.Bits() > 29 {
			return p.Errorf(name, "want an IPv4 network of /29 or larger, got %s", pfx)
		}
		if pfx.Masked() != pfx {
			return p.Errorf(name, "%s has host bits set (network is %s)", args[1], pfx.Masked())
		}
		c.Network = pfx
		e.hasServer = true
	case "server-ipv6":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		pfx, err := netip.ParsePrefix(args[1])
		if err != nil || !pfx.Addr().Is6() || pfx.Addr().Is4In6() {
			return p.Errorf(name, "want an IPv6 prefix such as fd42:42::/64, got %q", args[1])
		}
		if pfx.Bits() < 64 || pfx.Bits() > 112 {
			return p.Errorf(name, "want a prefix of /64 to /112, got /%d", pfx.Bits())
		}
		if pfx.Masked() != pfx {
			return p.Errorf(name, "%s has host bits set (network is %s)", args[1], pfx.Masked())
		}
		c.Network6 = pfx
		e.line6 = p.Line
	case "remote-cert-tls":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if args[1] != "client" {
			return p.Errorf(name, "a server checks clients: want client, got %q", args[1])
		}
		c.RemoteCertTLS = args[1]
	case "push":
		opt, err := p.PushOption(args, "")
		if err != nil {
			return err
		}
		switch strings.Fields(opt)[0] {
		case "compress", "comp-lzo":
			f, _, err := config.CompressFraming(strings.Fields(opt))
			if err != nil {
				return p.Errorf(name, "%q: %w", opt, err)
			}
			e.pushFraming, e.pushFramingLine = f, p.Line
		}
		c.Push = append(c.Push, opt)
	case "route":
		if err := p.Want(args, 1, 3); err != nil {
			return err
		}
		mask := "255.255.255.255"
		if len(args) >= 3 {
			mask = args[2]
		}
		pfx, err := prefixFromMask(args[1], mask)
		if err != nil {
			return p.Errorf(name, "%v", err)
		}
		c.Routes = append(c.Routes, pfx.Masked())
	case "route-ipv6":
		if err := p.Want(args, 1, 3); err != nil {
			return err
		}
		pfx, err := netip.ParsePrefix(args[1])
		if err != nil || !pfx.Addr().Is6() || pfx.Addr().Is4In6() {
			return p.Errorf(name, "want an IPv6 prefix such as fd99::/64, got %q", args[1])
		}
		if len(args) >= 3 {
			return p.Errorf(name, "%q: gateways %w (routes go through the TUN device)", args[2], ErrUnsupported)
		}
		c.Routes = append(c.Routes, pfx.Masked())
	case "keepalive":
		ping, restart, err := p.Keepalive(args)
		if err != nil {
			return err
		}
		c.Ping, c.PingRestart = ping, restart
	case "ping", "ping-restart", "reneg-sec", "hand-window", "max-clients":
		v, err := p.NumberArg(args, 2, 1<<30)
		if err != nil {
			return err
		}
		switch name {
		case "ping":
			c.Ping = v
		case "ping-restart":
			c.PingRestart = v
		case "reneg-sec":
			c.RenegSec = v
		case "hand-window":
			c.HandWindow = v
		default:
			c.MaxClients = v
		}
	case "connect-freq":
		if err := p.Want(args, 2, 2); err != nil {
			return err
		}
		n, err := p.Number(name, args[1], 1<<20)
		if err != nil {
			return err
		}
		sec, err := p.Number(name, args[2], 1<<20)
		if err != nil {
			return err
		}
		if n == 0 || sec == 0 {
			return p.Errorf(name, "both the count and the seconds must be positive")
		}
		c.ConnectFreq, c.ConnectFreqSec = n, sec
	case "tls-crypt-v2-max-age":
		v, err := p.NumberArg(args, 1, 1<<20)
		if err != nil {
			return err
		}
		c.TLSCryptV2MaxAge = v
	case "tls-crypt-v2-metadata-allow":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		path := args[1]
		if !filepath.IsAbs(path) {
			if p.Dir == "" {
				return p.Errorf(name, "file references are not allowed here (%q)", path)
			}
			path = filepath.Join(p.Dir, path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return p.Errorf(name, "%v", err)
		}
		if _, err := ParseMetadataAllow(b, path); err != nil {
			return p.Errorf(name, "%v", err)
		}
		c.TLSCryptV2AllowFile = path
	case "client-config-dir", "ccd-exclusive", "ifconfig-push", "ifconfig-ipv6-push", "iroute", "iroute-ipv6", "push-remove", "disable":
		return e.ccdDirective(p, args) // ccd.go
	case "explicit-exit-notify":
		c.ExplicitExitNotify = 1
		if len(args) > 1 {
			v, err := p.NumberArg(args, 1, 2)
			if err != nil {
				return err
			}
			c.ExplicitExitNotify = v
		}
	case "client-to-client":
		c.ClientToClient = true
	case "duplicate-cn":
		c.DuplicateCN = true
	default:
		return p.Unhandled(args, serverUnsupported, serverIgnored)
	}
	return nil
}

// Finish checks the server configuration and fills in the listening
// address.
func (e *serverExt) Finish(p *config.Parser) error {
	c := e.cfg
	if !e.hasServer && !c.Network6.IsValid() {
		return p.Errorf("server", "no `server NET MASK` or `server-ipv6 PREFIX/LEN` line: the client address pool is missing")
	}
	if c.Network6.IsValid() {
		p4, err := newPool(slotNetwork(c.Network))
		if err == nil {
			_, err = newPool6(c.Network6, p4)
		}
		if err != nil {
			return p.ErrorAt(e.line6, "server-ipv6", "%w", err)
		}
	}
	if err := p.CheckCommon("clients"); err != nil {
		return err
	}
	if c.TLSCryptV2Server == nil && (c.TLSCryptV2AllowFile != "" || c.TLSCryptV2MaxAge != 0) {
		return p.Errorf("tls-crypt-v2", "tls-crypt-v2-metadata-allow and tls-crypt-v2-max-age need tls-crypt-v2 SERVER-KEY")
	}
	if e.pushFramingLine != 0 && e.pushFraming != c.Compress {
		return p.ErrorAt(e.pushFramingLine, "push", "clients are told to use %v framing, but the server's own is %v: give the server the same compress or comp-lzo line", e.pushFraming, c.Compress)
	}
	if c.Compress != data.FramingNone && e.pushFramingLine == 0 {
		p.Warn(c.CompressDirective[:strings.IndexByte(c.CompressDirective+" ", ' ')], "clients need the same line in their files (or push it: push \""+c.CompressDirective+"\")")
	}
	if (len(c.Cert) == 0 || len(c.Key) == 0) && !c.KeyLocked() {
		return p.Errorf("cert", "the server needs both cert and key")
	}
	if c.TLSAuth != nil && c.KeyDirection == wrap.Direction1 {
		return p.Errorf("key-direction", "a server uses key direction 0 (1 is the client's)")
	}
	if c.Proto == "" {
		c.Proto = UDP
	}
	port := e.port
	if port == 0 {
		port = 1194
	}
	addr := netip.IPv4Unspecified()
	if e.family == 6 {
		addr = netip.IPv6Unspecified()
	}
	if e.local != "" {
		addr = netip.MustParseAddr(e.local).Unmap()
	}
	c.Listen = netip.AddrPortFrom(addr, port)
	var err error
	if c.DataCiphers, err = p.Ciphers(""); err != nil {
		return err
	}
	return e.finishCCD(p)
}

// prefixFromMask turns "10.8.0.0" "255.255.255.0" into 10.8.0.0/24,
// keeping host bits so callers can reject them.
func prefixFromMask(addr, mask string) (netip.Prefix, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is4() {
		return netip.Prefix{}, fmt.Errorf("bad IPv4 address %q", addr)
	}
	bits, err := control.MaskBits(mask)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, bits), nil
}

// maskString formats the netmask of a prefix length, e.g. 255.255.255.0.
func maskString(bits int) string {
	v := ^uint32(0) << (32 - bits)
	if bits == 0 {
		v = 0
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}
