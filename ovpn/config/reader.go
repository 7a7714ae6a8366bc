package config

// The line walker shared by the client parser (Parse) and the server's
// configuration parser (ovpn/server), with the directives both read the
// same way.
//
//	text -> lines -> inline block <tag> ... </tag> -> inline callback
//	             \-> tokens (quotes, comments, leading --) -> directive callback
//	callbacks -> SharedDirective / SharedInline (credentials, wrapping,
//	             TLS floor, data-ciphers, crl-verify) -> Reader.Shared

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Reader walks OpenVPN configuration text line by line and reports errors
// and warnings with their location. A Reader is used by one goroutine.
type Reader struct {
	// Name labels errors (usually the file name).
	Name string
	// Dir resolves relative file references ("" forbids file references).
	Dir string
	// Line is the line being handled (0 once the walk is over).
	Line int
	// Warnings collects ignored directives.
	Warnings []Diagnostic
	// Shared receives what SharedDirective and SharedInline read.
	Shared Shared
}

// Shared holds the directives clients and servers read the same way.
type Shared struct {
	CA, Cert, Key     []byte // PEM
	TLSAuth, TLSCrypt *wrap.StaticKey
	// KeyDirection is set by key-direction or tls-auth's second argument;
	// Bidirectional when neither is given.
	KeyDirection wrap.Direction
	Auth         string // tls-auth digest, "" when unset
	// TLSVersionMin is "1.2", "1.3" or "".
	TLSVersionMin string
	// DataCiphers is the raw data-ciphers list ("" when unset); see
	// Reader.Ciphers.
	DataCiphers string
	// CRLVerify is the crl-verify file, resolved against Reader.Dir and
	// checked to hold CRLs when read ("" when unset).
	CRLVerify string
}

// NewReader returns a Reader for text named name; dir resolves relative
// file references ("" forbids them).
func NewReader(name, dir string) *Reader {
	return &Reader{Name: name, Dir: dir, Shared: Shared{KeyDirection: wrap.Bidirectional}}
}

// Run walks text: each inline block goes to inline (tag and body, Line at
// the opening tag), each other non-empty line to directive as its words,
// the directive name lower-cased and without a leading "--". The first
// error stops the walk.
func (r *Reader) Run(text []byte, directive func(args []string) error, inline func(tag, body string) error) error {
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		r.Line = i + 1
		raw := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
		if strings.HasPrefix(raw, "<") && strings.HasSuffix(raw, ">") && !strings.HasPrefix(raw, "</") {
			tag := raw[1 : len(raw)-1]
			start := r.Line
			var body []string
			closed := false
			for i++; i < len(lines); i++ {
				if strings.TrimSpace(strings.TrimSuffix(lines[i], "\r")) == "</"+tag+">" {
					closed = true
					break
				}
				body = append(body, lines[i])
			}
			r.Line = start
			if !closed {
				return r.Errorf("<"+tag+">", "inline block not closed with </%s>", tag)
			}
			if err := inline(tag, strings.Join(body, "\n")+"\n"); err != nil {
				return err
			}
			continue
		}
		args, err := tokenize(raw)
		if err != nil {
			return r.Errorf("", "%v", err)
		}
		if len(args) == 0 {
			continue
		}
		args[0] = strings.ToLower(strings.TrimPrefix(args[0], "--"))
		if err := directive(args); err != nil {
			return err
		}
	}
	r.Line = 0
	return nil
}

// Errorf returns an *Error at the current line.
func (r *Reader) Errorf(directive, format string, args ...any) error {
	return &Error{File: r.Name, Line: r.Line, Directive: directive, Err: fmt.Errorf(format, args...)}
}

// Warn records a warning at the current line.
func (r *Reader) Warn(directive, msg string) {
	r.Warnings = append(r.Warnings, Diagnostic{Line: r.Line, Directive: directive, Message: msg})
}

// ReadFile reads a file a directive names, relative to Dir. "[inline]"
// returns nil: the content comes in an inline block.
func (r *Reader) ReadFile(directive, name string) ([]byte, error) {
	if name == "[inline]" {
		return nil, nil
	}
	path, err := r.resolve(directive, name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, r.Errorf(directive, "%v", err)
	}
	return b, nil
}

// resolve turns a file name of a directive into a path relative to Dir.
func (r *Reader) resolve(directive, name string) (string, error) {
	if r.Dir == "" {
		return "", r.Errorf(directive, "file references are not allowed here (%q)", name)
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(r.Dir, name)
	}
	return name, nil
}

// Want checks that the directive args[0] has min to max arguments.
func (r *Reader) Want(args []string, min, max int) error {
	n := len(args) - 1
	if n < min || n > max {
		if min == max {
			return r.Errorf(args[0], "takes %d argument(s), got %d", min, n)
		}
		return r.Errorf(args[0], "takes %d to %d arguments, got %d", min, max, n)
	}
	return nil
}

// Number parses a decimal number from 0 to max.
func (r *Reader) Number(directive, s string, max int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > max {
		return 0, r.Errorf(directive, "bad number %q (want 0 to %d)", s, max)
	}
	return v, nil
}

// NumberArg checks that the directive args[0] has 1 to maxArgs arguments
// and parses the first as a number from 0 to max.
func (r *Reader) NumberArg(args []string, maxArgs, max int) (int, error) {
	if err := r.Want(args, 1, maxArgs); err != nil {
		return 0, err
	}
	return r.Number(args[0], args[1], max)
}

// Keepalive parses `keepalive PING RESTART` (seconds); as OpenVPN
// requires, the restart timeout is at least twice the ping interval.
func (r *Reader) Keepalive(args []string) (ping, restart int, err error) {
	if err := r.Want(args, 2, 2); err != nil {
		return 0, 0, err
	}
	if ping, err = r.Number(args[0], args[1], 1<<20); err != nil {
		return 0, 0, err
	}
	if restart, err = r.Number(args[0], args[2], 1<<20); err != nil {
		return 0, 0, err
	}
	if ping > 0 && restart < 2*ping {
		return 0, 0, r.Errorf(args[0], "the restart timeout (%d) must be at least twice the ping interval (%d)", restart, ping)
	}
	return ping, restart, nil
}

// SharedDirective handles ca, cert, key, tls-auth, tls-crypt,
// key-direction, auth, tls-version-min, data-ciphers (ncp-ciphers) and
// crl-verify into r.Shared. It reports whether args[0] was one of them.
func (r *Reader) SharedDirective(args []string) (bool, error) {
	s := &r.Shared
	name := args[0]
	switch name {
	case "ca", "cert", "key":
		if err := r.Want(args, 1, 1); err != nil {
			return true, err
		}
		b, err := r.ReadFile(name, args[1])
		if err == nil && b != nil {
			r.setPEM(name, b)
		}
		return true, err
	case "tls-auth", "tls-crypt":
		if err := r.Want(args, 1, 2); err != nil {
			return true, err
		}
		b, err := r.ReadFile(name, args[1])
		if err != nil {
			return true, err
		}
		if b != nil {
			if err := r.setStatic(name, name, b); err != nil {
				return true, err
			}
		}
		if len(args) == 3 {
			if name == "tls-crypt" {
				return true, r.Errorf(name, "takes no key direction")
			}
			return true, r.keyDirection(args[2])
		}
	case "key-direction":
		if err := r.Want(args, 1, 1); err != nil {
			return true, err
		}
		return true, r.keyDirection(args[1])
	case "auth":
		if err := r.Want(args, 1, 1); err != nil {
			return true, err
		}
		if _, err := wrap.DigestByName(args[1]); err != nil {
			return true, r.Errorf(name, "%v", err)
		}
		s.Auth = args[1]
	case "tls-version-min":
		if err := r.Want(args, 1, 2); err != nil {
			return true, err
		}
		if args[1] != "1.2" && args[1] != "1.3" {
			return true, r.Errorf(name, "want 1.2 or 1.3, got %q", args[1])
		}
		s.TLSVersionMin = args[1]
	case "data-ciphers", "ncp-ciphers":
		if err := r.Want(args, 1, 1); err != nil {
			return true, err
		}
		s.DataCiphers = args[1]
	case "crl-verify":
		return true, r.crlVerify(args)
	default:
		return false, nil
	}
	return true, nil
}

// SharedInline handles the <ca>, <cert>, <key>, <tls-auth> and
// <tls-crypt> blocks into r.Shared. It reports whether tag was one of
// them.
func (r *Reader) SharedInline(tag, body string) (bool, error) {
	switch tag {
	case "ca", "cert", "key":
		r.setPEM(tag, []byte(body))
	case "tls-auth", "tls-crypt":
		return true, r.setStatic(tag, "<"+tag+">", []byte(body))
	case "crl-verify":
		return true, r.Errorf("<crl-verify>", "inline CRLs are %w; use crl-verify FILE (it is read again when it changes)", ErrUnsupported)
	default:
		return false, nil
	}
	return true, nil
}

// crlVerify handles `crl-verify FILE`: the file is read once here so that
// a missing or malformed CRL is reported with its line; the peer checks
// (ovpn/control) read it again whenever it changes. The directory form
// (`crl-verify DIR dir`) is not supported.
func (r *Reader) crlVerify(args []string) error {
	if err := r.Want(args, 1, 2); err != nil {
		return err
	}
	if len(args) == 3 {
		if args[2] == "dir" {
			return r.Errorf(args[0], "the directory form (crl-verify DIR dir) is %w; give a CRL file (PEM or DER)", ErrUnsupported)
		}
		return r.Errorf(args[0], "unknown flag %q (only a CRL file is supported)", args[2])
	}
	if args[1] == "[inline]" {
		return r.Errorf(args[0], "inline CRLs are %w; use crl-verify FILE (it is read again when it changes)", ErrUnsupported)
	}
	path, err := r.resolve(args[0], args[1])
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return r.Errorf(args[0], "%v", err)
	}
	if _, err := control.ParseCRLs(b); err != nil {
		return r.Errorf(args[0], "%s: %v", path, err)
	}
	r.Shared.CRLVerify = path
	return nil
}

func (r *Reader) setPEM(which string, b []byte) {
	switch which {
	case "ca":
		r.Shared.CA = b
	case "cert":
		r.Shared.Cert = b
	default:
		r.Shared.Key = b
	}
}

func (r *Reader) setStatic(which, label string, b []byte) error {
	k, err := wrap.ParseStaticKey(b)
	if err != nil {
		return r.Errorf(label, "%v", err)
	}
	if which == "tls-auth" {
		r.Shared.TLSAuth = k
	} else {
		r.Shared.TLSCrypt = k
	}
	return nil
}

func (r *Reader) keyDirection(s string) error {
	switch s {
	case "0":
		r.Shared.KeyDirection = wrap.Direction0
	case "1":
		r.Shared.KeyDirection = wrap.Direction1
	default:
		return r.Errorf("key-direction", "want 0 or 1, got %q", s)
	}
	return nil
}

// Ciphers parses a data-ciphers list (def when list is empty): names
// separated by colons, a leading "?" marking ciphers that may be skipped
// when unsupported. It fails when no supported cipher remains.
func (r *Reader) Ciphers(list, def string) ([]data.Cipher, error) {
	if list == "" {
		list = def
	}
	var out []data.Cipher
	for _, name := range strings.Split(list, ":") {
		ci, err := data.ParseCipher(strings.TrimPrefix(name, "?"))
		if err != nil {
			if strings.HasPrefix(name, "?") {
				continue
			}
			return nil, r.Errorf("data-ciphers", "%v", err)
		}
		out = append(out, ci)
	}
	if len(out) == 0 && list != "" {
		return nil, r.Errorf("data-ciphers", "no supported cipher in %q", list)
	}
	return out, nil
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
