package config

// <connection> blocks: each one remote with its own proto, port and
// server-poll-timeout, tried in turn like remote lines (and shuffled by
// remote-random). As in OpenVPN, a block starts from the file's proto and
// port as they stand where the block begins and must hold exactly one
// remote; when a file has blocks, its remote lines outside them are not
// used. Per-connection control-channel keys (tls-auth, tls-crypt inside a
// block), proxies and fragment are refused; link tuning that is ignored
// at the top level is ignored here too, with a warning.

import (
	"fmt"
	"strings"
)

// connectionIgnored are the block directives accepted with a warning, as
// at the top level.
var connectionIgnored = map[string]string{
	"float": "", "bind": "", "lport": "", "local": "", "explicit-exit-notify": "exit is always notified",
	"tun-mtu": "", "tun-mtu-extra": "", "link-mtu": "", "mssfix": "", "mtu-disc": "",
	"connect-retry":     "connect-retry applies to the whole list; set it outside the blocks",
	"connect-retry-max": "connect-retry-max applies to the whole list; set it outside the blocks",
}

// connection parses the body of a <connection> block opened at p.Line
// into one Remote appended to e.conns.
func (e *clientExt) connection(p *Parser, body string) error {
	start := p.Line
	defer func() { p.Line = start }()
	proto, family, port := e.proto, e.family, e.port
	var r Remote
	have := false
	for i, raw := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		p.Line = start + 1 + i
		line := strings.TrimSpace(strings.TrimSuffix(raw, "\r"))
		if strings.HasPrefix(line, "<") {
			return p.Errorf("<connection>", "inline blocks inside a <connection> block are %w", ErrUnsupported)
		}
		args, err := tokenize(line)
		if err != nil {
			return p.Errorf("<connection>", "%v", err)
		}
		if len(args) == 0 {
			continue
		}
		name := strings.ToLower(strings.TrimPrefix(args[0], "--"))
		args[0] = name
		switch name {
		case "remote":
			if have {
				return p.Errorf(name, "a <connection> block holds exactly one remote (the block began on line %d)", start)
			}
			if r, err = e.remote(p, args); err != nil {
				return err
			}
			have = true
		case "proto":
			if err := p.Want(args, 1, 1); err != nil {
				return err
			}
			pr, fam, ok := parseProto(args[1])
			if !ok {
				return p.Errorf(name, "unknown protocol %q", args[1])
			}
			proto, family = pr, fam
		case "port", "rport":
			v, err := p.NumberArg(args, 1, 65535)
			if err != nil {
				return err
			}
			port = uint16(v)
		case "server-poll-timeout", "connect-timeout":
			v, err := p.NumberArg(args, 1, 1<<20)
			if err != nil {
				return err
			}
			r.PollTimeout = v
		case "nobind":
			e.cfg.Nobind = true
		case "tls-auth", "tls-crypt", "tls-crypt-v2", "key-direction":
			return p.Errorf(name, "per-connection control-channel keys are %w; give %s outside the <connection> blocks", ErrUnsupported, name)
		default:
			if why, ok := connectionIgnored[name]; ok {
				if why == "" {
					why = "ignored"
				}
				p.Warn(name, why)
				continue
			}
			if what, ok := securityDirectives[name]; ok {
				return p.Errorf(name, "%s: %w", what, ErrUnsupported)
			}
			return p.Errorf(name, "not allowed in a <connection> block (only remote, proto, port, server-poll-timeout and link settings are)")
		}
	}
	if !have {
		return p.ErrorAt(start, "<connection>", "no remote in the block (each <connection> holds exactly one)")
	}
	if r.Port == 0 {
		r.Port = port
	}
	if r.Proto == "" {
		r.Proto, r.Family = proto, family
	}
	e.conns = append(e.conns, r)
	return nil
}

// remote parses `remote HOST [PORT [PROTO]]`.
func (e *clientExt) remote(p *Parser, args []string) (Remote, error) {
	if err := p.Want(args, 1, 3); err != nil {
		return Remote{}, err
	}
	r := Remote{Host: args[1]}
	if len(args) > 2 {
		v, err := p.Number(args[0], args[2], 65535)
		if err != nil {
			return Remote{}, err
		}
		r.Port = uint16(v)
	}
	if len(args) > 3 {
		pr, fam, ok := parseProto(args[3])
		if !ok {
			return Remote{}, p.Errorf(args[0], "unknown protocol %q", args[3])
		}
		r.Proto, r.Family = pr, fam
	}
	return r, nil
}

// finishConnections makes the blocks the remote list (the file's remote
// lines outside them are not used, with a warning, as in OpenVPN).
func (e *clientExt) finishConnections(p *Parser) {
	if len(e.conns) == 0 {
		return
	}
	if n := len(e.cfg.Remotes); n > 0 {
		p.Warn("remote", fmt.Sprintf("%d remote line(s) outside the <connection> blocks are not used: the blocks' remotes are (as in OpenVPN)", n))
	}
	e.cfg.Remotes = e.conns
	for i := range e.cfg.Remotes {
		if e.cfg.Remotes[i].Port == 0 {
			e.cfg.Remotes[i].Port = 1194
		}
		if e.cfg.Remotes[i].Proto == "" {
			e.cfg.Remotes[i].Proto = UDP
		}
	}
}
