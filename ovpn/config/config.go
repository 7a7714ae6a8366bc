// Package config reads OpenVPN client configuration files (.ovpn): the
// directives Wirelane implements, inline <ca>/<cert>/<key>/<tls-auth>/
// <tls-crypt>/<auth-user-pass> blocks and referenced files. Directives it
// does not implement are reported by name and line: as errors when ignoring
// them would change security (a check not made, a key not used), as
// warnings otherwise.
//
//	text -> tokenize line (quotes, comments) -> directive table -> Config
//	                    \-> inline blocks collected until </name>
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Proto is the transport protocol.
type Proto string

// Transport protocols.
const (
	UDP Proto = "udp"
	TCP Proto = "tcp"
)

// Remote is one `remote` entry.
type Remote struct {
	Host  string
	Port  uint16
	Proto Proto
	// Family is 4, 6 or 0 (either), from udp4/tcp6-client and friends.
	Family int
}

// Address returns host:port.
func (r Remote) Address() string {
	return net.JoinHostPort(r.Host, strconv.Itoa(int(r.Port)))
}

// Diagnostic is a warning about a line of the configuration.
type Diagnostic struct {
	Line      int
	Directive string
	Message   string
}

// String formats the diagnostic as "line N: directive: message".
func (d Diagnostic) String() string {
	return fmt.Sprintf("line %d: %s: %s", d.Line, d.Directive, d.Message)
}

// Config is a parsed client configuration.
type Config struct {
	Remotes      []Remote // in order; tried one after another
	RemoteRandom bool
	Dev          string
	Nobind       bool

	CA, Cert, Key []byte // PEM
	TLSAuth       *wrap.StaticKey
	KeyDirection  wrap.Direction // for tls-auth; Bidirectional when unset
	TLSCrypt      *wrap.StaticKey
	Auth          string // digest for tls-auth (default SHA1)

	AuthUserPass       bool
	Username, Password string // from an inline block or file, when given

	DataCiphers   []data.Cipher // in preference order
	RemoteCertTLS string        // "server", "client" or ""
	VerifyX509    string        // verify-x509-name value
	VerifyX509Typ string        // subject (default), name, name-prefix
	// CRLVerify is the crl-verify file checked against the server's
	// certificate ("" = none); relative names are resolved against the
	// configuration's directory.
	CRLVerify string

	RenegSec      int // 0 disables client-initiated renegotiation
	Ping          int // seconds; 0 = as pushed
	PingRestart   int // seconds; 0 = as pushed
	TLSVersionMin string

	// DHCPOptions are the file's own `dhcp-option DNS|DNS6|DOMAIN|
	// DOMAIN-SEARCH VALUE` lines, validated, in the pushed form ("dhcp-option
	// DNS 10.8.0.1"); the caller applies them before the pushed ones.
	DHCPOptions []string

	// BlockIPv6 is `block-ipv6`: IPv6 packets into the tunnel are answered
	// with ICMPv6 "no route" instead of being sent (the caller does it).
	BlockIPv6 bool

	Warnings []Diagnostic
}

// Error is a configuration error with its location.
type Error struct {
	File      string
	Line      int
	Directive string
	Err       error
}

// Error formats the error as "file:line: directive: cause".
func (e *Error) Error() string {
	if e.Directive != "" {
		return fmt.Sprintf("%s:%d: %s: %v", e.File, e.Line, e.Directive, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// ErrUnsupported marks directives that are recognised but not implemented
// and would change security if ignored.
var ErrUnsupported = errors.New("not supported")

// ParseFile reads and parses path; relative file names in it are resolved
// against its directory.
func ParseFile(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(b, path, filepath.Dir(path))
}

// Parse parses configuration text. name labels errors; dir resolves
// relative file references ("" forbids file references).
func Parse(text []byte, name, dir string) (*Config, error) {
	p := &parser{Reader: NewReader(name, dir), cfg: &Config{RenegSec: 3600}}
	if err := p.Run(text, p.directive, p.inline); err != nil {
		return nil, err
	}
	return p.finish()
}

type parser struct {
	*Reader
	cfg *Config

	proto  Proto
	family int
	port   uint16
	client bool
	cipher string
}

func (p *parser) inline(tag, body string) error {
	if ok, err := p.SharedInline(tag, body); ok {
		return err
	}
	switch tag {
	case "auth-user-pass":
		return p.userPass(body, "<auth-user-pass>")
	case "tls-crypt-v2", "secret", "pkcs12", "extra-certs", "connection", "http-proxy-user-pass":
		return p.Errorf("<"+tag+">", "inline %w", ErrUnsupported)
	case "dh":
		p.Warn("<dh>", "ignored (client)")
	default:
		return p.Errorf("<"+tag+">", "unknown inline block")
	}
	return nil
}

func (p *parser) userPass(body, where string) error {
	lines := strings.Split(strings.ReplaceAll(body, "\r", ""), "\n")
	if len(lines) < 2 || lines[0] == "" {
		return p.Errorf(where, "want a username line and a password line")
	}
	p.cfg.AuthUserPass = true
	p.cfg.Username, p.cfg.Password = lines[0], lines[1]
	return nil
}

func parseProto(s string) (Proto, int, bool) {
	switch strings.ToLower(s) {
	case "udp":
		return UDP, 0, true
	case "udp4":
		return UDP, 4, true
	case "udp6":
		return UDP, 6, true
	case "tcp", "tcp-client":
		return TCP, 0, true
	case "tcp4", "tcp4-client":
		return TCP, 4, true
	case "tcp6", "tcp6-client":
		return TCP, 6, true
	}
	return "", 0, false
}
