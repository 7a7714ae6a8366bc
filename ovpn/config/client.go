package config

// The client's side of the parser (clientExt): its directive table, the
// directives it refuses or ignores, and the checks and defaults once the
// file is read.

import (
	"errors"
	"strings"

	"github.com/wirelane/wirelane/ovpn/control"
)

// securityDirectives change what is checked or which keys protect the
// tunnel; ignoring them silently would weaken it, so they are errors.
var securityDirectives = map[string]string{
	"secret":                   "static-key mode",
	"pkcs11-providers":         "PKCS#11 tokens",
	"pkcs11-id":                "PKCS#11 tokens",
	"cryptoapicert":            "Windows certificate store",
	"management-external-key":  "external keys",
	"management-external-cert": "external certificates",
	"verify-hash":              "certificate fingerprint pinning",
	"tls-verify":               "certificate verification scripts",
	"ns-cert-type":             "Netscape certificate types (use remote-cert-tls)",
	"remote-cert-ku":           "key-usage checks",
	"remote-cert-eku":          "extended-key-usage checks by OID",
	"x509-username-field":      "username fields",
	"fragment":                 "fragmentation (changes the data framing)",
	"http-proxy":               "HTTP proxies",
	"socks-proxy":              "SOCKS proxies",
	"tls-cipher":               "TLS cipher restrictions",
	"tls-ciphersuites":         "TLS cipher restrictions",
	"tls-groups":               "TLS group restrictions",
	"tls-cert-profile":         "TLS certificate profiles",
	"auth-token-user":          "a pushed option (the server sends it with auth-token), not one for the file",
	"auth-token":               "a pushed option (the server sends it after the password was accepted), not one for the file",
}

// ignoredDirectives are accepted with a warning: they concern the local
// host (scripts, logging, privileges, routes the caller applies) or tuning.
var ignoredDirectives = map[string]string{
	"persist-key": "", "persist-tun": "", "persist-remote-ip": "", "persist-local-ip": "",
	"mute-replay-warnings": "", "verb": "", "mute": "",
	"script-security": "scripts are not run", "up": "scripts are not run", "down": "scripts are not run",
	"route-up": "scripts are not run", "ipchange": "scripts are not run",
	"redirect-gateway": "routes are applied by the caller", "route": "routes are applied by the caller",
	"route-ipv6": "routes are applied by the caller", "route-nopull": "", "route-delay": "",
	"block-outside-dns": "", "sndbuf": "", "rcvbuf": "", "float": "", "explicit-exit-notify": "exit is always notified",
	"pull": "implied by client", "setenv": "",
	"setenv-safe": "", "ignore-unknown-option": "", "log": "", "log-append": "",
	"status": "", "tran-window": "", "tls-timeout": "", "key-method": "", "dev-type": "",
	"push-peer-info": "", "auth-retry": "", "pull-filter": "", "suppress-timestamps": "",
	"machine-readable-output": "", "writepid": "", "daemon": "",
	"route-method": "", "register-dns": "", "lport": "", "bind": "", "dh": "", "topology": "", "replay-window": "",
	"remote-random-hostname": "", "tun-mtu-extra": "", "link-mtu": "", "keepalive-timeout": "", "ncp-disable": "",
	"auth-retry-interval": "", "ifconfig-noexec": "", "route-noexec": "",
	"tun-ipv6": "", "ping-timer-rem": "", "cd": "", "chroot": "", "management": "", "management-query-passwords": "",
}

// Directive handles the client's directives.
func (e *clientExt) Directive(p *Parser, args []string) error {
	c := e.cfg
	name := args[0]
	switch name {
	case "client":
		if err := p.Want(args, 0, 0); err != nil {
			return err
		}
		e.client = true
	case "tls-client":
		e.client = true
	case "dev":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if !strings.HasPrefix(args[1], "tun") && args[1] != "null" {
			return p.Errorf(name, "only tun devices are supported, not %q", args[1])
		}
		c.Dev = args[1]
	case "proto":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		pr, fam, ok := parseProto(args[1])
		if !ok {
			return p.Errorf(name, "unknown protocol %q", args[1])
		}
		e.proto, e.family = pr, fam
	case "port", "rport":
		v, err := p.NumberArg(args, 1, 65535)
		if err != nil {
			return err
		}
		e.port = uint16(v)
	case "remote":
		r, err := e.remote(p, args)
		if err != nil {
			return err
		}
		c.Remotes = append(c.Remotes, r)
	case "remote-random":
		c.RemoteRandom = true
	case "resolv-retry":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if args[1] == "infinite" {
			c.ResolvRetry = -1
			return nil
		}
		v, err := p.Number(name, args[1], 1<<30)
		if err != nil {
			return p.Errorf(name, "want a number of seconds or infinite, got %q", args[1])
		}
		c.ResolvRetry = v
	case "connect-retry":
		if err := p.Want(args, 1, 2); err != nil {
			return err
		}
		v, err := p.Number(name, args[1], 1<<20)
		if err != nil {
			return err
		}
		c.ConnectRetry = v
		if len(args) == 3 {
			if c.ConnectRetryMaxWait, err = p.Number(name, args[2], 1<<20); err != nil {
				return err
			}
		}
	case "connect-retry-max":
		v, err := p.NumberArg(args, 1, 1<<20)
		if err != nil {
			return err
		}
		c.ConnectRetryMax = v
	case "server-poll-timeout", "connect-timeout":
		v, err := p.NumberArg(args, 1, 1<<20)
		if err != nil {
			return err
		}
		c.ServerPollTimeout = v
	case "hand-window":
		v, err := p.NumberArg(args, 1, 1<<20)
		if err != nil {
			return err
		}
		c.HandWindow = v
	case "static-challenge":
		if err := p.Want(args, 2, 2); err != nil {
			return err
		}
		if args[2] != "0" && args[2] != "1" {
			return p.Errorf(name, "echo flag must be 0 or 1, got %q", args[2])
		}
		c.StaticChallenge, c.StaticChallengeEcho = args[1], args[2] == "1"
	case "dhcp-option":
		if err := p.Want(args, 1, 2); err != nil {
			return err
		}
		switch kind := args[1]; kind {
		case "DNS", "DNS6", "DOMAIN", "DOMAIN-SEARCH":
			if len(args) != 3 {
				return p.Errorf(name, "%s needs a value", kind)
			}
			opt := "dhcp-option " + kind + " " + args[2]
			r, err := control.ParsePushOptions([]string{opt})
			if err != nil || len(r.Ignored) > 0 {
				what := "domain name"
				if strings.HasPrefix(kind, "DNS") {
					what = "address"
				}
				return p.Errorf(name, "%s %q: not a valid %s", kind, args[2], what)
			}
			c.DHCPOptions = append(c.DHCPOptions, opt)
		default:
			p.Warn(name, kind+" has no meaning on Linux; ignored")
		}
	case "dns":
		// OpenVPN 2.6's dns option, as pushed (control/dnsoption.go);
		// the caller applies it with the pushed one.
		opt := strings.Join(args, " ")
		r, err := control.ParsePushOptions([]string{opt})
		if err != nil || len(r.Ignored) > 0 {
			why := "malformed"
			if err == nil {
				why = strings.Join(r.Ignored, "; ")
			}
			return p.Errorf(name, "%s", why)
		}
		c.DHCPOptions = append(c.DHCPOptions, opt)
	case "block-ipv6":
		if err := p.Want(args, 0, 0); err != nil {
			return err
		}
		c.BlockIPv6 = true
	case "nobind":
		c.Nobind = true
	case "auth-nocache":
		if err := p.Want(args, 0, 0); err != nil {
			return err
		}
		c.AuthNoCache = true
	case "auth-user-pass":
		if err := p.Want(args, 0, 1); err != nil {
			return err
		}
		c.AuthUserPass = true
		if len(args) == 2 {
			b, err := p.ReadFile(name, args[1])
			if err != nil {
				return err
			}
			if b != nil {
				return e.userPass(p, string(b), name)
			}
		}
	case "remote-cert-tls":
		if err := p.Want(args, 1, 1); err != nil {
			return err
		}
		if args[1] != "server" && args[1] != "client" {
			return p.Errorf(name, "want server or client, got %q", args[1])
		}
		c.RemoteCertTLS = args[1]
	case "verify-x509-name":
		if err := p.Want(args, 1, 2); err != nil {
			return err
		}
		c.VerifyX509, c.VerifyX509Typ = args[1], "subject"
		if len(args) == 3 {
			switch args[2] {
			case "subject", "name", "name-prefix":
				c.VerifyX509Typ = args[2]
			default:
				return p.Errorf(name, "unknown type %q", args[2])
			}
		}
	case "reneg-sec":
		v, err := p.NumberArg(args, 2, 1<<30)
		if err != nil {
			return err
		}
		c.RenegSec = v
	case "reneg-bytes", "reneg-pkts":
		p.Warn(name, "ignored; renegotiation is by time and packet-id limit")
	case "ping", "ping-restart":
		v, err := p.NumberArg(args, 1, 1<<20)
		if err != nil {
			return err
		}
		if name == "ping" {
			c.Ping = v
		} else {
			c.PingRestart = v
		}
	case "tun-mtu":
		return e.tunMTU(p, args)
	case "keepalive":
		ping, restart, err := p.Keepalive(args)
		if err != nil {
			return err
		}
		c.Ping, c.PingRestart = ping, restart
	default:
		return p.Unhandled(args, securityDirectives, ignoredDirectives)
	}
	return nil
}

// Finish checks the client configuration and fills in the defaults.
func (e *clientExt) Finish(p *Parser) error {
	c := e.cfg
	if !e.client {
		return p.Errorf("", "not a client configuration (add `client`); server mode is not supported")
	}
	e.finishConnections(p)
	if len(c.Remotes) == 0 {
		return p.Errorf("remote", "no remote given")
	}
	for i := range c.Remotes {
		r := &c.Remotes[i]
		if r.Port == 0 {
			r.Port = e.port
			if r.Port == 0 {
				r.Port = 1194
			}
		}
		if r.Proto == "" {
			r.Proto, r.Family = e.proto, e.family
			if r.Proto == "" {
				r.Proto = UDP
			}
		}
	}
	if err := p.CheckCommon("the server"); err != nil {
		return err
	}
	if (len(c.Cert) == 0) != (len(c.Key) == 0) {
		return p.Errorf("cert", "cert and key must be given together")
	}
	if len(c.Cert) == 0 && !c.AuthUserPass && !c.KeyLocked() {
		return p.Errorf("cert", "no client certificate and no auth-user-pass")
	}
	var err error
	if c.DataCiphers, err = p.Ciphers(DefaultDataCiphers); err != nil {
		return err
	}
	return nil
}

// clientExt is the client's Extension: the directives of directives.go
// into a Config.
type clientExt struct {
	cfg *Config

	proto  Proto
	family int
	port   uint16
	client bool
	// conns are the <connection> blocks' remotes, in order.
	conns []Remote
}

// Role reports ClientRole.
func (e *clientExt) Role() Role { return ClientRole }

// Directives lists the directives Directive handles (for suggestions).
func (e *clientExt) Directives() []string {
	return []string{"client", "tls-client", "dev", "proto", "port", "rport", "remote", "remote-random", "dhcp-option",
		"dns", "block-ipv6", "nobind", "auth-nocache", "auth-user-pass", "remote-cert-tls", "verify-x509-name", "reneg-sec",
		"reneg-bytes", "reneg-pkts", "ping", "ping-restart", "keepalive", "tun-mtu"}
}

// Inline handles <auth-user-pass> and refuses the blocks a client does
// not implement.
func (e *clientExt) Inline(p *Parser, tag, body string) error {
	switch tag {
	case "auth-user-pass":
		p.c.InlineSecrets = true
		return e.userPass(p, body, "<auth-user-pass>")
	case "connection":
		return e.connection(p, body)
	case "secret", "http-proxy-user-pass":
		return p.Errorf("<"+tag+">", "inline %w", ErrUnsupported)
	case "dh":
		p.Warn("<dh>", "ignored (client)")
	default:
		return p.Errorf("<"+tag+">", "unknown inline block%s", p.Suggest(tag))
	}
	return nil
}

// userPass reads the credentials of an <auth-user-pass> block or file.
func (e *clientExt) userPass(p *Parser, body, where string) error {
	user, pass, err := ParseUserPass(body)
	if err != nil {
		return p.CredentialError(where, err)
	}
	e.cfg.AuthUserPass = true
	e.cfg.Username, e.cfg.Password = user, pass
	return nil
}

// ParseUserPass reads credentials as OpenVPN 2.6 reads an auth-user-pass
// file or inline block: the username on the first line, the password on
// the second. The username is required; a missing or empty password line
// gives the password "" (to be asked for, as OpenVPN prompts for it);
// lines after the second are ignored. Carriage returns are removed.
func ParseUserPass(body string) (user, pass string, err error) {
	lines := strings.Split(strings.ReplaceAll(body, "\r", ""), "\n")
	if lines[0] == "" {
		return "", "", errors.New("want a username line (then a password line, or the password is asked for)")
	}
	if len(lines) > 1 {
		pass = lines[1]
	}
	return lines[0], pass, nil
}

// AsksPassword reports whether the file gives a username without its
// password: the password must be asked for (typed, or the service's
// auth event) before connecting, as OpenVPN 2.6 prompts for it.
func (c *Config) AsksPassword() bool {
	return c.AuthUserPass && c.Username != "" && c.Password == ""
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
