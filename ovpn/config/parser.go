package config

// The one parser behind client and server files: it walks the lines,
// reads the directives both sides share into a Common, refuses the other
// side's directives, and hands the rest to the file's Extension (the
// client's directives in this package, the server's in ovpn/server).
//
//	text -> lines -> inline block <tag> ... </tag> -> shared? -> other role's? -> Extension.Inline
//	             \-> tokens (quotes, comments, leading --)
//	                  -> shared directive (credentials, wrapping, TLS floor,
//	                     data-ciphers, crl-verify) -> Common
//	                  -> the other role's directive -> error at FILE:LINE
//	                  -> Extension.Directive
//	end of text -> Extension.Finish (calls CheckCommon)

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/wirelane/wirelane/internal/sys/suggest"
	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// Extension adds one role's directives to the Parser. Its methods are
// called by Run, from one goroutine.
type Extension interface {
	// Role is the side the file configures.
	Role() Role
	// Directive handles one directive the shared table does not know
	// (args[0] lower-cased, without a leading "--").
	Directive(p *Parser, args []string) error
	// Inline handles one inline block the shared table does not know.
	Inline(p *Parser, tag, body string) error
	// Finish checks and completes the configuration after the last line
	// (Parser.Line is 0 then); it calls CheckCommon.
	Finish(p *Parser) error
}

// Parser walks OpenVPN configuration text line by line for an Extension
// and reports errors and warnings with their location. A Parser is used
// by one goroutine.
type Parser struct {
	// Name labels errors (usually the file name).
	Name string
	// Dir resolves relative file references ("" forbids file references).
	Dir string
	// Line is the line being handled (0 once the walk is over).
	Line int

	c       *Common
	ext     Extension
	ciphers string // the data-ciphers list as written ("" when unset); see Ciphers
	// askpass is the passphrase read from `askpass FILE` ("" = none);
	// hasAskpass says whether the file had the directive with a file.
	askpass    string
	hasAskpass bool
	cipher     data.Cipher // the file's supported `cipher` (0: none); see finishLegacy
	// seen is the last line of each directive and inline block by name
	// ("ca" for both `ca FILE` and <ca>), so that a check made after the
	// walk (Finish) can name the line it is about.
	seen map[string]int
	// from is the credential file the current line's directive read
	// ("" for none), named in errors about its content (CredentialError);
	// pkcs12From is the pkcs12 file, checked after the walk.
	from, pkcs12From string
	// extraCerts are the extra-certs certificates (PEM), appended to the
	// certificate's chain once the certificate is known (CheckCommon).
	extraCerts []byte
}

// Directives is implemented by an Extension that can list the directive
// names it handles itself, for suggestions when a name is misspelt.
type Directives interface {
	Directives() []string
}

// sharedNames are the directives and inline blocks the shared table
// handles.
var sharedNames = []string{"ca", "cert", "key", "tls-auth", "tls-crypt", "key-direction", "auth", "tls-version-min", "data-ciphers", "ncp-ciphers", "crl-verify",
	"tls-crypt-v2", "peer-fingerprint", "compress", "comp-lzo", "allow-compression", "cipher", "data-ciphers-fallback", "pkcs12", "askpass",
	"extra-certs", "mssfix", "user", "group", "compat-mode"}

// Run parses text into c (the shared directives) and ext (the rest),
// then runs ext.Finish. c holds the side's defaults; its KeyDirection
// starts as Bidirectional. name labels errors; dir resolves relative
// file references ("" forbids them). The first error stops the walk.
func Run(text []byte, name, dir string, c *Common, ext Extension) error {
	c.KeyDirection = wrap.Bidirectional
	p := &Parser{Name: name, Dir: dir, c: c, ext: ext, seen: map[string]int{}}
	if err := p.walk(text); err != nil {
		return err
	}
	return ext.Finish(p)
}

// walk hands each inline block (tag and body, Line at the opening tag)
// and each other non-empty line (as words) to the tables.
func (p *Parser) walk(text []byte) error {
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		p.Line = i + 1
		p.from = ""
		raw := strings.TrimSpace(strings.TrimSuffix(lines[i], "\r"))
		if strings.HasPrefix(raw, "<") && strings.HasSuffix(raw, ">") && !strings.HasPrefix(raw, "</") {
			tag := raw[1 : len(raw)-1]
			// <ca>...</ca> on one line: OpenVPN takes "ca>...</ca" for
			// the tag and never finds its end; say what is wrong.
			if open, rest, ok := strings.Cut(tag, ">"); ok && open != "" && strings.HasSuffix(rest, "</"+open) {
				return p.Errorf("<"+open+">", "an inline block's <%s> and </%s> go on lines of their own, the content between them", open, open)
			}
			start := p.Line
			var body []string
			closed := false
			for i++; i < len(lines); i++ {
				if strings.TrimSpace(strings.TrimSuffix(lines[i], "\r")) == "</"+tag+">" {
					closed = true
					break
				}
				body = append(body, lines[i])
			}
			p.Line = start
			p.from = ""
			p.seen[tag] = start
			if !closed {
				return p.Errorf("<"+tag+">", "inline block not closed with </%s>", tag)
			}
			if err := p.inline(tag, strings.Join(body, "\n")+"\n"); err != nil {
				return err
			}
			continue
		}
		args, err := tokenize(raw)
		if err != nil {
			return p.Errorf("", "%v", err)
		}
		if len(args) == 0 {
			continue
		}
		args[0] = strings.ToLower(strings.TrimPrefix(args[0], "--"))
		p.seen[args[0]] = p.Line
		if args[0] == "ncp-ciphers" {
			p.seen["data-ciphers"] = p.Line
		}
		if err := p.directive(args); err != nil {
			return err
		}
	}
	p.Line = 0
	return nil
}

func (p *Parser) directive(args []string) error {
	if ok, err := p.sharedDirective(args); ok {
		return err
	}
	if ok, err := p.compression(args); ok {
		return err
	}
	if ok, err := p.legacy(args); ok {
		return err
	}
	if ok, err := p.compatMode(args); ok {
		return err
	}
	if ok, err := p.mssfix(args); ok {
		return err
	}
	if err := p.checkRole(args[0], args[0]); err != nil {
		return err
	}
	if args[0] == "dh" && len(args) == 2 && args[1] != "none" {
		// Not used (ECDHE is), but a file OpenVPN would refuse is
		// refused here too, with its line: the side then warns.
		b, err := p.ReadFile("dh", args[1])
		if err != nil {
			return err
		}
		if b != nil {
			if err := checkDH(b); err != nil {
				return p.CredentialError("dh", err)
			}
		}
	}
	return p.ext.Directive(p, args)
}

func (p *Parser) inline(tag, body string) error {
	if ok, err := p.sharedInline(tag, body); ok {
		return err
	}
	if err := p.checkRole(tag, "<"+tag+">"); err != nil {
		return err
	}
	if tag == "dh" {
		if err := checkDH([]byte(body)); err != nil {
			return p.Errorf("<dh>", "%v", err)
		}
	}
	return p.ext.Inline(p, tag, body)
}

// checkRole refuses a directive (or inline block) of the other role.
func (p *Parser) checkRole(name, label string) error {
	if r, ok := roleOf[name]; ok && r != p.ext.Role() {
		return p.Errorf(label, "a %s directive in a %s configuration: %w", r, p.ext.Role(), ErrWrongRole)
	}
	return nil
}

// CheckCommon checks what every configuration needs: a CA certificate
// (peer says whose certificate it verifies, for the message) and at most
// one of tls-auth and tls-crypt.
func (p *Parser) CheckCommon(peer string) error {
	if err := p.unlock(); err != nil {
		return err
	}
	if len(p.c.CA) == 0 && len(p.c.PeerFingerprints) == 0 && !(p.c.keyLocked && p.c.pkcs12 != nil) {
		return p.Errorf("ca", "no CA certificate given; %s cannot be verified (give ca, or peer-fingerprint for a self-signed certificate)", peer)
	}
	if len(p.c.CA) == 0 && p.c.CRLVerify != "" && !(p.c.keyLocked && p.c.pkcs12 != nil) {
		return p.Errorf("crl-verify", "crl-verify needs a CA (with peer-fingerprint alone there is no issuer to check)")
	}
	if len(p.extraCerts) > 0 {
		if len(p.c.Cert) == 0 && !p.c.keyLocked {
			return p.Errorf("extra-certs", "extra-certs completes the chain of a certificate: give cert (or pkcs12)")
		}
		p.c.ExtraCerts = p.extraCerts
	}
	if len(p.c.Cert) > 0 && len(p.c.Key) > 0 && !p.c.keyLocked {
		if err := checkKeyPair(p.c.Cert, p.c.Key); err != nil {
			if p.c.pkcs12 != nil {
				return p.Errorf("pkcs12", "%v", err)
			}
			return p.ErrorAt(p.lineOf("key"), "key", "%v (cert on line %d)", err, p.lineOf("cert"))
		}
	}
	if p.c.TLSAuth != nil && p.c.TLSCrypt != nil {
		return p.Errorf("tls-crypt", "tls-auth and tls-crypt are mutually exclusive")
	}
	if (p.c.TLSCryptV2Client != nil || p.c.TLSCryptV2Server != nil) && (p.c.TLSAuth != nil || p.c.TLSCrypt != nil) {
		return p.Errorf("tls-crypt-v2", "tls-crypt-v2 cannot be combined with tls-auth or tls-crypt here (give each client a tls-crypt-v2 key)")
	}
	return nil
}

// Unhandled settles a directive a side's table does not handle:
// recognised but unsupported (unsupported maps it to what it would do) is
// an error wrapping ErrUnsupported, ignorable (ignored maps it to why, ""
// for "ignored") and unknown directives are warnings.
func (p *Parser) Unhandled(args []string, unsupported, ignored map[string]string) error {
	name := args[0]
	if what, ok := unsupported[name]; ok {
		return p.Errorf(name, "%s: %w", what, ErrUnsupported)
	}
	if why, ok := ignored[name]; ok {
		if why == "" {
			why = "ignored"
		}
		p.Warn(name, why)
		return nil
	}
	p.Warn(name, "unknown directive ignored"+p.hint(name, unsupported, ignored))
	return nil
}

// Suggest returns "; did you mean NAME?" for the directive or inline
// block an unknown name was probably meant to be, else "".
func (p *Parser) Suggest(name string) string { return p.hint(name) }

// hint suggests the directive a misspelt name was probably meant to be:
// one this side handles, a shared one, or one it knows of.
func (p *Parser) hint(name string, more ...map[string]string) string {
	known := append([]string(nil), sharedNames...)
	if d, ok := p.ext.(Directives); ok {
		known = append(known, d.Directives()...)
	}
	for n, r := range roleOf {
		if r == p.ext.Role() {
			known = append(known, n)
		}
	}
	for _, m := range more {
		for n := range m {
			known = append(known, n)
		}
	}
	slices.Sort(known) // maps iterate in random order: keep ties stable
	return suggest.Hint(name, slices.Compact(known))
}

// ErrorAt returns an *Error at line (for a check made after the walk
// about an earlier line).
func (p *Parser) ErrorAt(line int, directive, format string, args ...any) error {
	return &Error{File: p.Name, Line: line, Directive: directive, Err: fmt.Errorf(format, args...)}
}

// Errorf returns an *Error at the current line; after the walk (in
// Finish), at the last line of directive (0 when the file has none: the
// problem is that it is missing).
func (p *Parser) Errorf(directive, format string, args ...any) error {
	return p.ErrorAt(p.lineOf(directive), directive, format, args...)
}

// Warn records a warning at the current line (after the walk, at the
// last line of directive) in Common.Warnings.
func (p *Parser) Warn(directive, msg string) {
	p.c.Warnings = append(p.c.Warnings, Diagnostic{Line: p.lineOf(directive), Directive: directive, Message: msg})
}

// WarnWeakens records a warning about a directive that is honoured but
// weakens the tunnel (Diagnostic.Weakens).
func (p *Parser) WarnWeakens(directive, msg string) {
	p.c.Warnings = append(p.c.Warnings, Diagnostic{Line: p.lineOf(directive), Directive: directive, Message: msg, Weakens: true})
}

// lineOf is the current line, or after the walk the last line of
// directive ("<tag>" or a name).
func (p *Parser) lineOf(directive string) int {
	if p.Line != 0 {
		return p.Line
	}
	return p.seen[strings.TrimSuffix(strings.TrimPrefix(directive, "<"), ">")]
}

// ReadFile reads a file a directive names, relative to Dir. "[inline]"
// returns nil: the content comes in an inline block.
func (p *Parser) ReadFile(directive, name string) ([]byte, error) {
	if name == "[inline]" {
		return nil, nil
	}
	path, err := p.resolve(directive, name)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, p.Errorf(directive, "%v", err)
	}
	p.from = path
	switch directive {
	case "key", "tls-auth", "tls-crypt", "tls-crypt-v2", "auth-user-pass", "pkcs12", "askpass":
		p.c.SecretFiles = append(p.c.SecretFiles, path)
	}
	return b, nil
}

// CredentialError reports what is wrong with the content of a credential
// (err) at label: the directive, whose error also names the file it read
// ("FILE:LINE: ca: /etc/openvpn/ca.crt: ..."), or the inline block
// ("FILE:LINE: <ca>: ...").
func (p *Parser) CredentialError(label string, err error) error {
	if p.from != "" && !strings.HasPrefix(label, "<") {
		return p.Errorf(label, "%s: %v", p.from, err)
	}
	return p.Errorf(label, "%v", err)
}

// resolve turns a file name of a directive into a path relative to Dir.
func (p *Parser) resolve(directive, name string) (string, error) {
	if p.Dir == "" {
		return "", p.Errorf(directive, "file references are not allowed here (%q)", name)
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(p.Dir, name)
	}
	return name, nil
}

// Want checks that the directive args[0] has min to max arguments.
// PushOption checks the option of a `push "OPTION"` line (a server's
// file or a client-config-dir file): one option, no comma or NUL (the
// push message's separators), and not one the server pushes itself. hint
// is added to that last error ("" for none). It returns the option
// trimmed.
func (p *Parser) PushOption(args []string, hint string) (string, error) {
	if err := p.Want(args, 1, 1); err != nil {
		return "", err
	}
	opt := strings.TrimSpace(args[1])
	if opt == "" || strings.ContainsAny(opt, ",\x00") {
		return "", p.Errorf(args[0], "bad option %q (empty, or holds a comma or NUL)", args[1])
	}
	switch strings.Fields(opt)[0] {
	case "ifconfig", "ifconfig-ipv6", "peer-id", "cipher", "protocol-flags", "key-derivation", "topology", "route-gateway", "push-continuation":
		return "", p.Errorf(args[0], "%q is pushed by the server itself%s", opt, hint)
	}
	return opt, nil
}

func (p *Parser) Want(args []string, min, max int) error {
	n := len(args) - 1
	if n < min || n > max {
		if min == max {
			return p.Errorf(args[0], "takes %d argument(s), got %d", min, n)
		}
		return p.Errorf(args[0], "takes %d to %d arguments, got %d", min, max, n)
	}
	return nil
}

// Number parses a decimal number from 0 to max.
func (p *Parser) Number(directive, s string, max int) (int, error) {
	v, err := strconv.Atoi(s)
	if err != nil || v < 0 || v > max {
		return 0, p.Errorf(directive, "bad number %q (want 0 to %d)", s, max)
	}
	return v, nil
}

// NumberArg checks that the directive args[0] has 1 to maxArgs arguments
// and parses the first as a number from 0 to max.
func (p *Parser) NumberArg(args []string, maxArgs, max int) (int, error) {
	if err := p.Want(args, 1, maxArgs); err != nil {
		return 0, err
	}
	return p.Number(args[0], args[1], max)
}

// Keepalive parses `keepalive PING RESTART` (seconds); as OpenVPN
// requires, the restart timeout is at least twice the ping interval.
func (p *Parser) Keepalive(args []string) (ping, restart int, err error) {
	if err := p.Want(args, 2, 2); err != nil {
		return 0, 0, err
	}
	if ping, err = p.Number(args[0], args[1], 1<<20); err != nil {
		return 0, 0, err
	}
	if restart, err = p.Number(args[0], args[2], 1<<20); err != nil {
		return 0, 0, err
	}
	if ping > 0 && restart < 2*ping {
		return 0, 0, p.Errorf(args[0], "the restart timeout (%d) must be at least twice the ping interval (%d)", restart, ping)
	}
	return ping, restart, nil
}

// sharedDirective handles ca, cert, key, tls-auth, tls-crypt,
// key-direction, auth, tls-version-min, data-ciphers (ncp-ciphers) and
// crl-verify into Common. It reports whether args[0] was one of them.
func (p *Parser) sharedDirective(args []string) (bool, error) {
	c := p.c
	name := args[0]
	switch name {
	case "ca", "cert", "key", "extra-certs":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		b, err := p.ReadFile(name, args[1])
		if err == nil && b != nil {
			err = p.setPEM(name, name, b)
		}
		return true, err
	case "tls-auth", "tls-crypt":
		if err := p.Want(args, 1, 2); err != nil {
			return true, err
		}
		b, err := p.ReadFile(name, args[1])
		if err != nil {
			return true, err
		}
		if b != nil {
			if err := p.setStatic(name, name, b); err != nil {
				return true, err
			}
		}
		if len(args) == 3 {
			if name == "tls-crypt" {
				return true, p.Errorf(name, "takes no key direction")
			}
			return true, p.keyDirection(args[2])
		}
	case "key-direction":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		return true, p.keyDirection(args[1])
	case "auth":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		if _, err := wrap.DigestByName(args[1]); err != nil {
			return true, p.Errorf(name, "%v", err)
		}
		c.Auth = args[1]
	case "tls-version-min":
		if err := p.Want(args, 1, 2); err != nil {
			return true, err
		}
		if args[1] != "1.2" && args[1] != "1.3" {
			return true, p.Errorf(name, "want 1.2 or 1.3, got %q", args[1])
		}
		c.TLSVersionMin = args[1]
	case "data-ciphers", "ncp-ciphers":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		p.ciphers = args[1]
	case "crl-verify":
		return true, p.crlVerify(args)
	case "user", "group":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		if name == "user" {
			c.User, c.UserLine = args[1], p.Line
		} else {
			c.Group, c.GroupLine = args[1], p.Line
		}
	case "tls-crypt-v2":
		return true, p.tlsCryptV2(args)
	case "peer-fingerprint":
		return true, p.peerFingerprint(args)
	case "pkcs12":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		b, err := p.ReadFile(name, args[1])
		if err == nil && b != nil {
			if err := checkPKCS12(b); err != nil {
				return true, p.CredentialError(name, err)
			}
			c.pkcs12, p.pkcs12From = b, p.from
		}
		return true, err
	case "askpass":
		if err := p.Want(args, 0, 1); err != nil {
			return true, err
		}
		if len(args) == 2 {
			b, err := p.ReadFile(name, args[1])
			if err != nil {
				return true, err
			}
			pass, _, _ := strings.Cut(strings.ReplaceAll(string(b), "\r", ""), "\n")
			p.askpass, p.hasAskpass = pass, true
		}
	default:
		return false, nil
	}
	return true, nil
}

// sharedInline handles the <ca>, <cert>, <key>, <tls-auth> and
// <tls-crypt> blocks into Common. It reports whether tag was one of
// them.
func (p *Parser) sharedInline(tag, body string) (bool, error) {
	switch tag {
	case "ca", "cert", "key", "extra-certs":
		p.c.InlineSecrets = p.c.InlineSecrets || tag == "key"
		return true, p.setPEM(tag, "<"+tag+">", []byte(body))
	case "tls-auth", "tls-crypt":
		p.c.InlineSecrets = true
		return true, p.setStatic(tag, "<"+tag+">", []byte(body))
	case "tls-crypt-v2":
		p.c.InlineSecrets = true
		return true, p.setTLSCryptV2("<tls-crypt-v2>", []byte(body))
	case "peer-fingerprint":
		return true, p.peerFingerprintBlock(body)
	case "crl-verify":
		return true, p.Errorf("<crl-verify>", "inline CRLs are %w; use crl-verify FILE (it is read again when it changes)", ErrUnsupported)
	case "pkcs12":
		p.c.InlineSecrets = true
		b, err := pkcs12Inline(body)
		if err == nil {
			err = checkPKCS12(b)
		}
		if err != nil {
			return true, p.Errorf("<pkcs12>", "%v", err)
		}
		p.c.pkcs12, p.pkcs12From = b, ""
	default:
		return false, nil
	}
	return true, nil
}

// crlVerify handles `crl-verify FILE`: the file is read once here so that
// a missing or malformed CRL is reported with its line; the peer checks
// (ovpn/control) read it again whenever it changes. The directory form
// (`crl-verify DIR dir`) is not supported.
func (p *Parser) crlVerify(args []string) error {
	if err := p.Want(args, 1, 2); err != nil {
		return err
	}
	if len(args) == 3 {
		if args[2] == "dir" {
			return p.Errorf(args[0], "the directory form (crl-verify DIR dir) is %w; give a CRL file (PEM or DER)", ErrUnsupported)
		}
		return p.Errorf(args[0], "unknown flag %q (only a CRL file is supported)", args[2])
	}
	if args[1] == "[inline]" {
		return p.Errorf(args[0], "inline CRLs are %w; use crl-verify FILE (it is read again when it changes)", ErrUnsupported)
	}
	path, err := p.resolve(args[0], args[1])
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return p.Errorf(args[0], "%v", err)
	}
	if _, err := control.ParseCRLs(b); err != nil {
		return p.Errorf(args[0], "%s: %v", path, err)
	}
	p.c.CRLVerify = path
	return nil
}

// setPEM keeps a ca, cert or key after checking it (checkPEM); label
// names it in the error (the directive, or the inline block at its
// opening line).
func (p *Parser) setPEM(which, label string, b []byte) error {
	if err := checkPEM(which, b); err != nil {
		return p.CredentialError(label, err)
	}
	switch which {
	case "ca":
		p.c.CA = b
	case "cert":
		p.c.Cert = b
	case "extra-certs":
		p.extraCerts = append(p.extraCerts, b...)
	default:
		p.c.Key = b
	}
	return nil
}

func (p *Parser) setStatic(which, label string, b []byte) error {
	k, err := wrap.ParseStaticKey(b)
	if err != nil {
		return p.CredentialError(label, err)
	}
	if which == "tls-auth" {
		p.c.TLSAuth = k
	} else {
		p.c.TLSCrypt = k
	}
	return nil
}

func (p *Parser) keyDirection(s string) error {
	switch s {
	case "0":
		p.c.KeyDirection = wrap.Direction0
	case "1":
		p.c.KeyDirection = wrap.Direction1
	default:
		return p.Errorf("key-direction", "want 0 or 1, got %q", s)
	}
	return nil
}

// Ciphers parses the file's data-ciphers list (def when it has none; nil
// when both are empty):
// names separated by colons, a leading "?" marking ciphers that may be
// skipped when unsupported. It fails when no supported cipher remains.
func (p *Parser) Ciphers(def string) ([]data.Cipher, error) {
	list := p.ciphers
	if list == "" {
		list = def
	}
	if list == "" {
		return p.finishLegacy(nil), nil
	}
	var out []data.Cipher
	for _, name := range strings.Split(list, ":") {
		ci, err := data.ParseCipher(strings.TrimPrefix(name, "?"))
		if err != nil {
			if strings.HasPrefix(name, "?") {
				continue
			}
			return nil, p.Errorf("data-ciphers", "%v", err)
		}
		out = append(out, ci)
	}
	if len(out) == 0 && list != "" {
		return nil, p.Errorf("data-ciphers", "no supported cipher in %q", list)
	}
	return p.finishLegacy(out), nil
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
