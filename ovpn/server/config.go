package server

// OpenVPN-style server configuration files: the directives Wirelane's
// server implements, inline <ca>/<cert>/<key>/<tls-auth>/<tls-crypt>
// blocks and referenced files. Directives that would change security or
// the wire format if ignored are errors (with file and line); directives
// about the local host (logging, privileges, persistence) are warnings.
//
//	text -> lines -> tokens (quotes, comments) -> directive table -> Config
//	             \-> inline blocks collected until </name>

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Proto is the server's transport protocol.
type Proto string

// Transport protocols.
const (
	UDP Proto = "udp"
	TCP Proto = "tcp"
)

// Config is a server configuration. Zero fields take the defaults listed
// beside them when the server starts.
type Config struct {
	// Listen is the local address and port (default 0.0.0.0:1194, or [::]
	// with proto udp6/tcp6).
	Listen netip.AddrPort
	// Proto is UDP (default) or TCP.
	Proto Proto
	// Network is the client address pool of `server NET MASK`
	// (topology subnet): the server takes the first host address, clients
	// the following ones.
	Network netip.Prefix
	// Dev names the TUN interface the command line creates (default tun0).
	Dev string
	// MTU is the TUN MTU (tun-mtu, default 1500).
	MTU int

	// CA, Cert and Key are PEM.
	CA, Cert, Key []byte
	// TLSAuth and TLSCrypt are the control-channel static keys (at most one).
	TLSAuth  *wrap.StaticKey
	TLSCrypt *wrap.StaticKey
	// KeyDirection is the tls-auth key direction (server: 0 or
	// bidirectional).
	KeyDirection wrap.Direction
	// Auth is the tls-auth digest (default SHA1).
	Auth string
	// RemoteCertTLS is "client" to require the clientAuth extended key
	// usage of client certificates, or "".
	RemoteCertTLS string
	// TLSVersionMin is "1.2" (default) or "1.3".
	TLSVersionMin string

	// DataCiphers is the server's preference order (default AES-256-GCM,
	// AES-128-GCM, CHACHA20-POLY1305).
	DataCiphers []data.Cipher
	// Push holds the options of `push "..."` lines, in order.
	Push []string
	// Routes are `route NET MASK` lines: networks behind the server's TUN.
	Routes []netip.Prefix

	// Ping and PingRestart are from keepalive (seconds). Clients are told
	// ping Ping and ping-restart PingRestart; the server itself waits
	// twice PingRestart, as OpenVPN does.
	Ping, PingRestart int
	// RenegSec is the data-key lifetime before the server renegotiates
	// (0 = never; clients renegotiate on their own schedule).
	RenegSec int
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

	// Warnings lists ignored directives.
	Warnings []Diagnostic
}

// Diagnostic is a warning about one line of a configuration file.
type Diagnostic struct {
	Line      int
	Directive string
	Message   string
}

func (d Diagnostic) String() string {
	return fmt.Sprintf("line %d: %s: %s", d.Line, d.Directive, d.Message)
}

// ConfigError is a configuration error with its location.
type ConfigError struct {
	File      string
	Line      int
	Directive string
	Err       error
}

func (e *ConfigError) Error() string {
	if e.Directive != "" {
		return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Directive, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }

// ErrUnsupported marks recognised directives the server does not implement
// and must not silently ignore.
var ErrUnsupported = errors.New("not supported")

// serverUnsupported would weaken security or change the wire format if
// ignored.
var serverUnsupported = map[string]string{
	"secret": "static-key mode", "tls-crypt-v2": "tls-crypt-v2", "crl-verify": "certificate revocation lists",
	"auth-user-pass-verify": "username/password checks", "plugin": "plugins", "verify-client-cert": "optional client certificates",
	"client-cert-not-required": "optional client certificates", "tls-verify": "verification scripts",
	"client-config-dir": "per-client configuration", "ccd-exclusive": "per-client configuration",
	"compress": "compression (changes the data framing)", "comp-lzo": "compression (changes the data framing)",
	"fragment": "fragmentation (changes the data framing)", "server-ipv6": "IPv6 address pools",
	"ifconfig-ipv6": "IPv6 tunnel addresses", "server-bridge": "bridged (tap) servers", "ifconfig-pool": "explicit pools (use server)",
	"pkcs12": "PKCS#12 credentials", "tls-cipher": "TLS cipher restrictions", "tls-ciphersuites": "TLS cipher restrictions",
	"tls-groups": "TLS group restrictions", "peer-fingerprint": "certificate fingerprint pinning",
	"verify-x509-name": "client name checks", "remote-cert-ku": "key-usage checks", "remote-cert-eku": "extended-key-usage checks by OID",
	"x509-username-field": "username fields", "auth-gen-token": "auth tokens", "learn-address": "scripts",
	"client-connect": "scripts", "client-disconnect": "scripts", "iroute": "client subnets",
}

// serverIgnored concern the local host or tuning and are accepted with a
// warning.
var serverIgnored = map[string]string{
	"persist-key": "", "persist-tun": "", "verb": "", "mute": "", "status": "", "status-version": "", "log": "",
	"log-append": "", "user": "", "group": "", "daemon": "", "writepid": "", "ifconfig-pool-persist": "addresses are assigned per connection",
	"explicit-exit-notify": "clients are always told", "mute-replay-warnings": "", "sndbuf": "", "rcvbuf": "", "txqueuelen": "",
	"script-security": "scripts are not run", "up": "scripts are not run", "down": "scripts are not run", "dh": "ECDHE is used",
	"ecdh-curve": "", "tls-timeout": "", "replay-window": "", "mssfix": "", "float": "", "multihome": "", "management": "",
	"suppress-timestamps": "", "machine-readable-output": "", "chroot": "", "cd": "", "setenv": "", "allow-compression": "",
	"data-ciphers-fallback": "only AEAD ciphers are used", "cipher": "only data-ciphers is used", "tran-window": "",
	"connect-freq": "", "tcp-queue-limit": "", "bcast-buffers": "", "tun-mtu-extra": "", "link-mtu": "", "dev-type": "",
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
	p := &cfgParser{name: name, dir: dir, cfg: &Config{KeyDirection: wrap.Bidirectional}}
	if err := p.run(string(text)); err != nil {
		return nil, err
	}
	return p.finish()
}

type cfgParser struct {
	name, dir string
	cfg       *Config
	line      int
	family    int // 4, 6 or 0 from proto udp4/udp6
	local     string
	port      uint16
	dataCiph  string
	topology  string
	hasServer bool
}

func (p *cfgParser) errorf(directive, format string, args ...any) error {
	return &ConfigError{File: p.name, Line: p.line, Directive: directive, Err: fmt.Errorf(format, args...)}
}

func (p *cfgParser) warn(directive, msg string) {
	p.cfg.Warnings = append(p.cfg.Warnings, Diagnostic{Line: p.line, Directive: directive, Message: msg})
}

func (p *cfgParser) run(text string) error {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		p.line = i + 1
		raw := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
		if strings.HasPrefix(raw, "<") && strings.HasSuffix(raw, ">") && !strings.HasPrefix(raw, "</") {
			tag := raw[1 : len(raw)-1]
			start := p.line
			var body []string
			closed := false
			for i++; i < len(lines); i++ {
				if strings.TrimSpace(strings.TrimSuffix(lines[i], "\r")) == "</"+tag+">" {
					closed = true
					break
				}
				body = append(body, lines[i])
			}
			saved := p.line
			p.line = start
			if !closed {
				return p.errorf("<"+tag+">", "inline block not closed with </%s>", tag)
			}
			if err := p.inline(tag, []byte(strings.Join(body, "\n")+"\n")); err != nil {
				return err
			}
			p.line = saved
			continue
		}
		args, err := tokenize(raw)
		if err != nil {
			return p.errorf("", "%v", err)
		}
		if len(args) == 0 {
			continue
		}
		args[0] = strings.ToLower(strings.TrimPrefix(args[0], "--"))
		if err := p.directive(args); err != nil {
			return err
		}
	}
	return nil
}

// tokenize splits a line into words, honouring "double" and 'single'
// quotes, backslash escapes inside double quotes, and # or ; comments.
func tokenize(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case (c == '#' || c == ';') && !inWord:
			return out, nil
		case c == ' ' || c == '\t':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '"' || c == '\'':
			inWord = true
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if c == '"' && s[j] == '\\' && j+1 < len(s) {
					j++
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, errors.New("unterminated quote")
			}
			i = j
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

func (p *cfgParser) inline(tag string, body []byte) error {
	switch tag {
	case "ca", "cert", "key":
		p.setPEM(tag, body)
	case "tls-auth", "tls-crypt":
		return p.setStatic(tag, body)
	case "dh":
		p.warn("<dh>", "ignored; ECDHE is used")
	default:
		if what, ok := serverUnsupported[tag]; ok {
			return p.errorf("<"+tag+">", "%s: %w", what, ErrUnsupported)
		}
		return p.errorf("<"+tag+">", "unknown inline block")
	}
	return nil
}

func (p *cfgParser) setPEM(which string, b []byte) {
	switch which {
	case "ca":
		p.cfg.CA = b
	case "cert":
		p.cfg.Cert = b
	default:
		p.cfg.Key = b
	}
}

func (p *cfgParser) setStatic(which string, b []byte) error {
	k, err := wrap.ParseStaticKey(b)
	if err != nil {
		return p.errorf(which, "%v", err)
	}
	if which == "tls-auth" {
		p.cfg.TLSAuth = k
	} else {
		p.cfg.TLSCrypt = k
	}
	return nil
}

func (p *cfgParser) readFile(directive, name string) ([]byte, error) {
	if name == "[inline]" {
		return nil, nil
	}
	if p.dir == "" {
		return nil, p.errorf(directive, "file references are not allowed here (%q)", name)
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(p.dir, name)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, p.errorf(directive, "%v", err)
	}
	return b, nil
}

func (p *cfgParser) want(args []string, min, max int) error {
	n := len(args) - 1
	if n < min || n > max {
		if min == max {
			return p.errorf(args[0], "takes %d argument(s), got %d", min, n)
		}
		return p.errorf(args[0], "takes %d to %d arguments, got %d", min, max, n)
	}
	return nil
}

func (p *cfgParser) number(directive, s string, max int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > max {
		return 0, p.errorf(directive, "bad number %q (want 0 to %d)", s, max)
	}
	return v, nil
}

func (p *cfgParser) directive(args []string) error {
	c := p.cfg
	name := args[0]
	switch name {
	case "mode":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		if args[1] != "server" {
			return p.errorf(name, "only mode server is supported, not %q", args[1])
		}
	case "tls-server":
		return p.want(args, 0, 0)
	case "port", "lport":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		v, err := p.number(name, args[1], 65535)
		if err != nil {
			return err
		}
		p.port = uint16(v)
	case "local":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		if _, err := netip.ParseAddr(args[1]); err != nil {
			return p.errorf(name, "want an IP address, got %q", args[1])
		}
		p.local = args[1]
	case "proto":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		switch strings.ToLower(args[1]) {
		case "udp", "udp4", "udp6":
			c.Proto = UDP
		case "tcp", "tcp-server", "tcp4", "tcp4-server", "tcp6", "tcp6-server":
			c.Proto = TCP
		default:
			return p.errorf(name, "unknown or client-only protocol %q", args[1])
		}
		switch {
		case strings.Contains(args[1], "4"):
			p.family = 4
		case strings.Contains(args[1], "6"):
			p.family = 6
		}
	case "dev":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		if len(args[1]) > 15 || strings.ContainsAny(args[1], "/ ") {
			return p.errorf(name, "bad interface name %q", args[1])
		}
		if strings.HasPrefix(args[1], "tap") || args[1] == "null" {
			return p.errorf(name, "%q: only tun devices are supported", args[1])
		}
		c.Dev = args[1]
	case "tun-mtu":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		v, err := p.number(name, args[1], 65535)
		if err != nil {
			return err
		}
		if v < 576 {
			return p.errorf(name, "MTU %d is below 576", v)
		}
		c.MTU = v
	case "topology":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		if args[1] != "subnet" {
			return p.errorf(name, "topology %q: %w (use topology subnet)", args[1], ErrUnsupported)
		}
		p.topology = args[1]
	case "server":
		if err := p.want(args, 2, 3); err != nil {
			return err
		}
		pfx, err := prefixFromMask(args[1], args[2])
		if err != nil {
			return p.errorf(name, "%v", err)
		}
		if !pfx.Addr().Is4() || pfx.Bits() > 29 {
			return p.errorf(name, "want an IPv4 network of /29 or larger, got %s", pfx)
		}
		if pfx.Masked() != pfx {
			return p.errorf(name, "%s has host bits set (network is %s)", args[1], pfx.Masked())
		}
		c.Network = pfx
		p.hasServer = true
	case "ca", "cert", "key":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		b, err := p.readFile(name, args[1])
		if err != nil {
			return err
		}
		if b != nil {
			p.setPEM(name, b)
		}
	case "tls-auth", "tls-crypt":
		if err := p.want(args, 1, 2); err != nil {
			return err
		}
		b, err := p.readFile(name, args[1])
		if err != nil {
			return err
		}
		if b != nil {
			if err := p.setStatic(name, b); err != nil {
				return err
			}
		}
		if len(args) == 3 {
			if name == "tls-crypt" {
				return p.errorf(name, "takes no key direction")
			}
			return p.keyDirection(args[2])
		}
	case "key-direction":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		return p.keyDirection(args[1])
	case "auth":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		if _, err := wrap.DigestByName(args[1]); err != nil {
			return p.errorf(name, "%v", err)
		}
		c.Auth = args[1]
	case "remote-cert-tls":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		if args[1] != "client" {
			return p.errorf(name, "a server checks clients: want client, got %q", args[1])
		}
		c.RemoteCertTLS = args[1]
	case "tls-version-min":
		if err := p.want(args, 1, 2); err != nil {
			return err
		}
		if args[1] != "1.2" && args[1] != "1.3" {
			return p.errorf(name, "want 1.2 or 1.3, got %q", args[1])
		}
		c.TLSVersionMin = args[1]
	case "data-ciphers", "ncp-ciphers":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		p.dataCiph = args[1]
	case "push":
		if err := p.want(args, 1, 1); err != nil {
			return err
		}
		opt := strings.TrimSpace(args[1])
		if opt == "" || strings.ContainsAny(opt, ",\x00") {
			return p.errorf(name, "bad option %q (empty, or holds a comma or NUL)", args[1])
		}
		switch strings.Fields(opt)[0] {
		case "ifconfig", "peer-id", "cipher", "protocol-flags", "key-derivation", "topology", "route-gateway", "push-continuation":
			return p.errorf(name, "%q is pushed by the server itself", opt)
		case "compress", "comp-lzo":
			return p.errorf(name, "%q: compression %w", opt, ErrUnsupported)
		}
		c.Push = append(c.Push, opt)
	case "route":
		if err := p.want(args, 1, 3); err != nil {
			return err
		}
		mask := "255.255.255.255"
		if len(args) >= 3 {
			mask = args[2]
		}
		pfx, err := prefixFromMask(args[1], mask)
		if err != nil {
			return p.errorf(name, "%v", err)
		}
		c.Routes = append(c.Routes, pfx.Masked())
	case "keepalive":
		if err := p.want(args, 2, 2); err != nil {
			return err
		}
		a, err := p.number(name, args[1], 1<<20)
		if err != nil {
			return err
		}
		b, err := p.number(name, args[2], 1<<20)
		if err != nil {
			return err
		}
		if a > 0 && b < 2*a {
			return p.errorf(name, "the restart timeout (%d) must be at least twice the ping interval (%d)", b, a)
		}
		c.Ping, c.PingRestart = a, b
	case "ping", "ping-restart", "reneg-sec", "hand-window", "max-clients":
		if err := p.want(args, 1, 2); err != nil {
			return err
		}
		v, err := p.number(name, args[1], 1<<30)
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
	case "client-to-client":
		c.ClientToClient = true
	case "duplicate-cn":
		c.DuplicateCN = true
	default:
		if what, ok := serverUnsupported[name]; ok {
			if name == "comp-lzo" && len(args) == 2 && args[1] == "no" {
				return p.errorf(name, "even \"comp-lzo no\" adds a compression byte to every packet: %w", ErrUnsupported)
			}
			return p.errorf(name, "%s: %w", what, ErrUnsupported)
		}
		if why, ok := serverIgnored[name]; ok {
			if why == "" {
				why = "ignored"
			}
			p.warn(name, why)
			return nil
		}
		switch name {
		case "client", "remote", "pull", "tls-client", "nobind", "auth-user-pass":
			return p.errorf(name, "a client directive in a server configuration")
		}
		p.warn(name, "unknown directive ignored")
	}
	return nil
}

func (p *cfgParser) keyDirection(s string) error {
	switch s {
	case "0":
		p.cfg.KeyDirection = wrap.Direction0
	case "1":
		p.cfg.KeyDirection = wrap.Direction1
	default:
		return p.errorf("key-direction", "want 0 or 1, got %q", s)
	}
	return nil
}

func (p *cfgParser) finish() (*Config, error) {
	c := p.cfg
	p.line = 0
	if !p.hasServer {
		return nil, p.errorf("server", "no `server NET MASK` line: the client address pool is missing")
	}
	if len(c.CA) == 0 {
		return nil, p.errorf("ca", "no CA certificate given; clients cannot be verified")
	}
	if len(c.Cert) == 0 || len(c.Key) == 0 {
		return nil, p.errorf("cert", "the server needs both cert and key")
	}
	if c.TLSAuth != nil && c.TLSCrypt != nil {
		return nil, p.errorf("tls-crypt", "tls-auth and tls-crypt are mutually exclusive")
	}
	if c.TLSAuth != nil && c.KeyDirection == wrap.Direction1 {
		return nil, p.errorf("key-direction", "a server uses key direction 0 (1 is the client's)")
	}
	if c.Proto == "" {
		c.Proto = UDP
	}
	port := p.port
	if port == 0 {
		port = 1194
	}
	addr := netip.IPv4Unspecified()
	if p.family == 6 {
		addr = netip.IPv6Unspecified()
	}
	if p.local != "" {
		addr = netip.MustParseAddr(p.local).Unmap()
	}
	c.Listen = netip.AddrPortFrom(addr, port)
	if p.dataCiph != "" {
		for _, name := range strings.Split(p.dataCiph, ":") {
			ci, err := data.ParseCipher(strings.TrimPrefix(name, "?"))
			if err != nil {
				if strings.HasPrefix(name, "?") {
					continue
				}
				return nil, p.errorf("data-ciphers", "%v", err)
			}
			c.DataCiphers = append(c.DataCiphers, ci)
		}
		if len(c.DataCiphers) == 0 {
			return nil, p.errorf("data-ciphers", "no supported cipher in %q", p.dataCiph)
		}
	}
	return c, nil
}

// prefixFromMask turns "10.8.0.0" "255.255.255.0" into 10.8.0.0/24.
func prefixFromMask(addr, mask string) (netip.Prefix, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is4() {
		return netip.Prefix{}, fmt.Errorf("bad IPv4 address %q", addr)
	}
	m, err := netip.ParseAddr(mask)
	if err != nil || !m.Is4() {
		return netip.Prefix{}, fmt.Errorf("bad netmask %q", mask)
	}
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	bits := 0
	for v&0x80000000 != 0 {
		bits++
		v <<= 1
	}
	if v != 0 {
		return netip.Prefix{}, fmt.Errorf("non-contiguous netmask %q", mask)
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
