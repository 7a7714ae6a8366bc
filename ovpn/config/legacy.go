package config

// cipher and data-ciphers-fallback, and the legacy CBC ciphers in
// data-ciphers: the non-AEAD data channel (AES-128-CBC, AES-256-CBC with
// the `auth` HMAC, ovpn/data/cbc.go) for old servers and clients. It is
// used only when the file names such a cipher, with a warning that says
// what it gives up.

import (
	"slices"
	"strings"

	"github.com/wirelane/wirelane/ovpn/data"
)

// DefaultDataCiphers is OpenVPN 2.6's data-ciphers default, both sides'.
const DefaultDataCiphers = "AES-256-GCM:AES-128-GCM:CHACHA20-POLY1305"

// cbcWarning names the weakness of a CBC cipher.
func cbcWarning(c data.Cipher, auth string) string {
	if auth == "" {
		auth = "SHA1"
	}
	return c.String() + " is a legacy non-AEAD cipher (CBC with HMAC-" + strings.ToUpper(auth) +
		"): the packet header is not authenticated, the tag is only as strong as auth, and it is slower than AES-GCM; use it only for a peer that offers nothing else"
}

// legacy handles cipher and data-ciphers-fallback; it reports whether
// args[0] was one of them.
func (p *Parser) legacy(args []string) (bool, error) {
	name := args[0]
	switch name {
	case "cipher":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		c, err := data.ParseCipher(args[1])
		if err != nil {
			p.Warn(name, "cipher "+args[1]+" is not supported and not used (BF-CBC and other 64-bit-block or unlisted ciphers never are)")
			return true, nil
		}
		p.cipher = c
	case "data-ciphers-fallback":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		c, err := data.ParseCipher(args[1])
		if err != nil {
			return true, p.Errorf(name, "%v", err)
		}
		p.c.DataCiphersFallback = c
	default:
		return false, nil
	}
	return true, nil
}

// finishLegacy settles the file's `cipher` as OpenVPN 2.6 does: it is
// not used to negotiate (a warning says so when data-ciphers lacks it)
// unless compat-mode names a version before 2.5.0,
// then warns about every CBC cipher the file enables (in data-ciphers or
// as data-ciphers-fallback).
func (p *Parser) finishLegacy(list []data.Cipher) []data.Cipher {
	// compat-mode before 2.5.0 appends `cipher` to data-ciphers, and
	// before 2.4.0 also makes it data-ciphers-fallback (compat.go).
	if c := p.cipher; c != 0 && p.c.compatBefore(20500) && !slices.Contains(list, c) {
		if list == nil { // a side without a default of its own (the server's is this one)
			list = []data.Cipher{data.AES256GCM, data.AES128GCM, data.ChaCha20Poly1305}
		}
		list = append(list, c)
	}
	if c := p.cipher; c != 0 && p.c.compatBefore(20400) && p.c.DataCiphersFallback == 0 {
		p.c.DataCiphersFallback = c
	}
	if c := p.cipher; c != 0 && !slices.Contains(list, c) && c != p.c.DataCiphersFallback {
		p.Warn("cipher", "cipher "+c.String()+" is not used to negotiate (as in OpenVPN 2.6): add it to data-ciphers, or give data-ciphers-fallback "+c.String()+" for a peer that negotiates nothing")
	}
	warned := map[data.Cipher]bool{}
	for _, c := range list {
		if !c.AEAD() && !warned[c] {
			warned[c] = true
			p.WarnWeakens("data-ciphers", cbcWarning(c, p.c.Auth))
		}
	}
	if c := p.c.DataCiphersFallback; c != 0 && !c.AEAD() && !warned[c] {
		p.WarnWeakens("data-ciphers-fallback", cbcWarning(c, p.c.Auth))
	}
	return list
}
