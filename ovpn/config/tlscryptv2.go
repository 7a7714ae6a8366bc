package config

// tls-crypt-v2 (client keys in client files, the server key in server
// files) and peer-fingerprint (certificate pinning without a CA): shared
// directives of both sides.

import (
	"errors"
	"strings"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/wrap"
)

// tlsCryptV2 handles `tls-crypt-v2 FILE [force-cookie|allow-noncookie]`
// (the flag in server files only).
func (p *Parser) tlsCryptV2(args []string) error {
	if err := p.Want(args, 1, 2); err != nil {
		return err
	}
	if len(args) == 3 {
		if p.ext.Role() != ServerRole {
			return p.Errorf(args[0], "%q is a server flag", args[2])
		}
		switch args[2] {
		case "force-cookie":
		case "allow-noncookie":
			p.Warn(args[0], "allow-noncookie: clients without the HMAC cookie handshake (OpenVPN 2.5 and older) are refused all the same; the server keeps no state before a client proves its key")
		default:
			return p.Errorf(args[0], "unknown flag %q (want force-cookie or allow-noncookie)", args[2])
		}
	}
	b, err := p.ReadFile(args[0], args[1])
	if err != nil || b == nil {
		return err
	}
	return p.setTLSCryptV2("tls-crypt-v2", b)
}

// setTLSCryptV2 parses a tls-crypt-v2 key: the client key in a client
// file, the server key in a server file.
func (p *Parser) setTLSCryptV2(label string, b []byte) error {
	if p.ext.Role() == ServerRole {
		k, err := wrap.ParseV2ServerKey(b)
		if err != nil {
			if strings.Contains(string(b), wrap.V2ClientPEM) {
				return p.CredentialError(label, errors.New("this is a client key; the server needs the server key (openvpn --genkey tls-crypt-v2-server)"))
			}
			return p.CredentialError(label, err)
		}
		p.c.TLSCryptV2Server = k
		return nil
	}
	k, err := wrap.ParseV2ClientKey(b)
	if err != nil {
		if strings.Contains(string(b), wrap.V2ServerPEM) {
			return p.CredentialError(label, errors.New("this is the server key; a client needs its own client key (openvpn --genkey tls-crypt-v2-client)"))
		}
		return p.CredentialError(label, err)
	}
	p.c.TLSCryptV2Client = k
	return nil
}

// peerFingerprint handles the single-line `peer-fingerprint AB:CD:...`
// (one fingerprint; the directive may repeat).
func (p *Parser) peerFingerprint(args []string) error {
	if err := p.Want(args, 1, 1); err != nil {
		return err
	}
	f, err := control.ParseFingerprint(args[1])
	if err != nil {
		return p.Errorf(args[0], "%v", err)
	}
	p.c.PeerFingerprints = append(p.c.PeerFingerprints, f)
	return nil
}

// peerFingerprintBlock handles <peer-fingerprint>: one fingerprint a
// line, blank lines and # or ; comments skipped. Errors name the line in
// the file.
func (p *Parser) peerFingerprintBlock(body string) error {
	fps, line, err := ParseFingerprintBlock(body)
	if err != nil {
		return p.ErrorAt(p.Line+line, "<peer-fingerprint>", "%v", err)
	}
	if len(fps) == 0 {
		return p.Errorf("<peer-fingerprint>", "empty block")
	}
	p.c.PeerFingerprints = append(p.c.PeerFingerprints, fps...)
	return nil
}

// ParseFingerprintBlock parses the body of a <peer-fingerprint> block. On
// error, line is the line of the body (from 1) that is wrong.
func ParseFingerprintBlock(body string) (fps []control.Fingerprint, line int, err error) {
	for i, l := range strings.Split(body, "\n") {
		l = strings.TrimSpace(strings.TrimSuffix(l, "\r"))
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		f, err := control.ParseFingerprint(l)
		if err != nil {
			return nil, i + 1, err
		}
		fps = append(fps, f)
	}
	return fps, 0, nil
}
