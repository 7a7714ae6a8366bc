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

	RenegSec      int // 0 disables client-initiated renegotiation
	Ping          int // seconds; 0 = as pushed
	PingRestart   int // seconds; 0 = as pushed
	TLSVersionMin string

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
	p := &parser{name: name, dir: dir, cfg: &Config{KeyDirection: wrap.Bidirectional, RenegSec: 3600}}
	if err := p.run(string(text)); err != nil {
		return nil, err
	}
	return p.finish()
}

type parser struct {
	name, dir string
	cfg       *Config
	line      int

	proto       Proto
	family      int
	port        uint16
	client      bool
	cipher      string
	dataCiphers string
	keyDirSet   bool
}

func (p *parser) errorf(directive, format string, args ...any) error {
	return &Error{File: p.name, Line: p.line, Directive: directive, Err: fmt.Errorf(format, args...)}
}

func (p *parser) warn(directive, msg string) {
	p.cfg.Warnings = append(p.cfg.Warnings, Diagnostic{Line: p.line, Directive: directive, Message: msg})
}

func (p *parser) run(text string) error {
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
				l := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
				if l == "</"+tag+">" {
					closed = true
					break
				}
				body = append(body, lines[i])
			}
			if !closed {
				p.line = start
				return p.errorf("<"+tag+">", "inline block not closed with </%s>", tag)
			}
			saved := p.line
			p.line = start
			if err := p.inline(tag, strings.Join(body, "\n")+"\n"); err != nil {
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
		args[0] = strings.TrimPrefix(args[0], "--")
		if err := p.directive(args); err != nil {
			return err
		}
	}
	return nil
}

// tokenize splits a line into words, honouring "double" and 'single'
// quotes, backslash escapes in double quotes, and # or ; comments.
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
				return nil, fmt.Errorf("unterminated quote")
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

func (p *parser) inline(tag, body string) error {
	c := p.cfg
	switch tag {
	case "ca":
		c.CA = []byte(body)
	case "cert":
		c.Cert = []byte(body)
	case "key":
		c.Key = []byte(body)
	case "tls-auth":
		k, err := wrap.ParseStaticKey([]byte(body))
		if err != nil {
			return p.errorf("<tls-auth>", "%v", err)
		}
		c.TLSAuth = k
	case "tls-crypt":
		k, err := wrap.ParseStaticKey([]byte(body))
		if err != nil {
			return p.errorf("<tls-crypt>", "%v", err)
		}
		c.TLSCrypt = k
	case "auth-user-pass":
		return p.userPass(body, "<auth-user-pass>")
	case "tls-crypt-v2", "secret", "pkcs12", "crl-verify", "extra-certs", "connection", "http-proxy-user-pass":
		return p.errorf("<"+tag+">", "inline %w", ErrUnsupported)
	case "dh":
		p.warn("<dh>", "ignored (client)")
	default:
		return p.errorf("<"+tag+">", "unknown inline block")
	}
	return nil
}

func (p *parser) userPass(body, where string) error {
	lines := strings.Split(strings.ReplaceAll(body, "\r", ""), "\n")
	if len(lines) < 2 || lines[0] == "" {
		return p.errorf(where, "want a username line and a password line")
	}
	p.cfg.AuthUserPass = true
	p.cfg.Username, p.cfg.Password = lines[0], lines[1]
	return nil
}

func (p *parser) readFile(directive, name string) ([]byte, error) {
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

func (p *parser) want(args []string, min, max int) error {
	n := len(args) - 1
	if n < min || n > max {
		if min == max {
			return p.errorf(args[0], "takes %d argument(s), got %d", min, n)
		}
		return p.errorf(args[0], "takes %d to %d arguments, got %d", min, max, n)
	}
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

func (p *parser) uint(directive, s string, max int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > max {
		return 0, p.errorf(directive, "bad number %q", s)
	}
	return v, nil
}
