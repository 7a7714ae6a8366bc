package wgquick

import (
	"bytes"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wirelane/wirelane/internal/sys/suggest"
)

// ParseError is a problem with one line of a configuration file. Its text
// is "FILE:LINE: message"; the message never repeats key material.
type ParseError struct {
	File string
	Line int
	Msg  string
}

// Error returns "FILE:LINE: message".
func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// maxLine bounds one line; longer lines are an error, not a memory hazard.
const maxLine = 64 << 10

type section int

const (
	sectionNone section = iota
	sectionInterface
	sectionPeer
)

// quickKeys are the [Interface] keys only wg-quick understands (`strip`
// drops them).
var quickKeys = map[string]bool{
	"address": true, "dns": true, "mtu": true, "table": true,
	"preup": true, "postup": true, "predown": true, "postdown": true,
	"saveconfig": true,
}

// interfaceKeys and peerKeys are the keys of each section as documented,
// for suggestions when a key is misspelt.
var (
	interfaceKeys = []string{"PrivateKey", "ListenPort", "FwMark", "Address", "DNS", "MTU", "Table", "PreUp", "PostUp", "PreDown", "PostDown", "SaveConfig"}
	peerKeys      = []string{"PublicKey", "PresharedKey", "AllowedIPs", "Endpoint", "PersistentKeepalive"}
)

// directivePrefix starts a comment that holds a setting only Wirelane
// reads ("# wirelane: DNSOptional = true"): wg-quick and wg see a comment,
// so the file keeps working with them.
const directivePrefix = "wirelane:"

// directiveKeys are the settings a directive comment may hold.
var directiveKeys = []string{"DNSOptional"}

// Parse reads a wg-quick configuration. file names the source in errors.
// Keys are case-insensitive, '#' starts a comment anywhere on a line (as in
// wg-quick, also inside hook commands), and the first bad line stops the
// parse with a *ParseError.
func Parse(file string, src []byte) (*Config, error) {
	c := &Config{Path: file}
	var stripped bytes.Buffer
	sec := sectionNone
	var peer *Peer
	seen := map[Key]int{}
	finishPeer := func() error {
		if peer == nil {
			return nil
		}
		if peer.PublicKey.IsZero() {
			return &ParseError{file, peer.Line, "[Peer] section has no PublicKey"}
		}
		if first, dup := seen[peer.PublicKey]; dup {
			// wg(8) would merge the two sections, each one replacing the
			// other's AllowedIPs, so half of them would silently vanish.
			// Refuse instead; docs/cli.md lists this difference.
			return &ParseError{file, peer.Line, fmt.Sprintf("the same PublicKey is already used by the peer on line %d; put all of a peer's settings in one [Peer] section", first)}
		}
		seen[peer.PublicKey] = peer.Line
		c.Peers = append(c.Peers, *peer)
		peer = nil
		return nil
	}

	// Editors on some systems start files with a UTF-8 byte order mark.
	src = bytes.TrimPrefix(src, []byte("\xef\xbb\xbf"))
	lineNo := 0
	for rest := src; len(rest) > 0; {
		lineNo++
		var raw []byte
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			raw, rest = rest[:i], rest[i+1:]
		} else {
			raw, rest = rest, nil
		}
		if len(raw) > maxLine {
			return nil, &ParseError{file, lineNo, fmt.Sprintf("line is longer than %d bytes", maxLine)}
		}
		line := string(raw)
		if body, ok := directive(line); ok {
			if err := c.Interface.setDirective(sec, body); err != nil {
				return nil, &ParseError{file, lineNo, err.Error()}
			}
			stripped.Write(raw)
			stripped.WriteByte('\n')
			continue
		}
		if sec == sectionPeer {
			if name, ok := peerName(line); ok {
				peer.Name = name
			}
		}
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			stripped.Write(raw)
			stripped.WriteByte('\n')
			continue
		}
		if strings.IndexByte(line, 0) >= 0 {
			return nil, &ParseError{file, lineNo, "line contains a NUL byte"}
		}
		if line[0] == '[' {
			if err := finishPeer(); err != nil {
				return nil, err
			}
			switch {
			case strings.EqualFold(line, "[Interface]"):
				sec = sectionInterface
			case strings.EqualFold(line, "[Peer]"):
				sec = sectionPeer
				peer = &Peer{Line: lineNo}
			default:
				return nil, &ParseError{file, lineNo, fmt.Sprintf("unknown section %q (want [Interface] or [Peer])", line)}
			}
			stripped.Write(raw)
			stripped.WriteByte('\n')
			continue
		}
		eq := strings.IndexByte(line, '=')
		if eq < 0 {
			// Echo only the first word: the rest may be a key that lost
			// its '=' ("PrivateKey abc..."), and keys stay out of messages.
			return nil, &ParseError{file, lineNo, "expected \"Key = Value\", found a line starting with " + keyName(line)}
		}
		key := strings.TrimSpace(line[:eq])
		val := strings.TrimSpace(line[eq+1:])
		if strings.ContainsAny(key, " \t") {
			// "PrivateKey abc...=": the '=' is the key's base64 padding.
			return nil, &ParseError{file, lineNo, "expected \"Key = Value\", found a line starting with " + keyName(key)}
		}
		var err error
		switch sec {
		case sectionNone:
			return nil, &ParseError{file, lineNo, fmt.Sprintf("key %s outside of a section (an [Interface] or [Peer] line must come first)", keyName(key))}
		case sectionInterface:
			lk := strings.ToLower(key)
			if !quickKeys[lk] {
				stripped.Write(raw)
				stripped.WriteByte('\n')
			}
			err = c.Interface.set(lk, key, val)
			if err == nil && lk == "dns" && c.Interface.DNSLine == 0 {
				c.Interface.DNSLine = lineNo
			}
			if err == nil && lk == "table" {
				c.Interface.TableLine = lineNo
			}
		case sectionPeer:
			stripped.Write(raw)
			stripped.WriteByte('\n')
			err = peer.set(strings.ToLower(key), key, val, lineNo)
		}
		if err != nil {
			return nil, &ParseError{file, lineNo, err.Error()}
		}
	}
	if err := finishPeer(); err != nil {
		return nil, err
	}
	c.stripped = stripped.Bytes()
	return c, nil
}

// maxPeerName bounds a friendly name; a longer one is cut (it is a label
// for people and metrics, not an identifier).
const maxPeerName = 64

// peerName recognises a "# Name = friendly name" comment line (key
// case-insensitive, spaces around '=' optional) and returns the name. The
// name is trimmed, control characters are dropped, and it is cut to
// maxPeerName bytes on a character boundary.
func peerName(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
	if !ok {
		return "", false
	}
	key, val, ok := strings.Cut(rest, "=")
	if !ok || !strings.EqualFold(strings.TrimSpace(key), "name") {
		return "", false
	}
	var b strings.Builder
	for _, r := range strings.TrimSpace(val) {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > maxPeerName {
			break
		}
		b.WriteRune(r)
	}
	name := strings.TrimSpace(b.String())
	return name, name != ""
}

// directive returns the text after "wirelane:" when line is a directive
// comment.
func directive(line string) (string, bool) {
	t := strings.TrimSpace(line)
	if !strings.HasPrefix(t, "#") {
		return "", false
	}
	t = strings.TrimSpace(t[1:])
	if len(t) < len(directivePrefix) || !strings.EqualFold(t[:len(directivePrefix)], directivePrefix) {
		return "", false
	}
	return strings.TrimSpace(t[len(directivePrefix):]), true
}

// setDirective applies a "# wirelane: KEY = VALUE" comment.
func (in *Interface) setDirective(sec section, body string) error {
	key, val, ok := strings.Cut(body, "=")
	key, val = strings.TrimSpace(key), strings.TrimSpace(val)
	if !ok || key == "" {
		return fmt.Errorf("expected \"# wirelane: Key = Value\" (Wirelane settings: %s)", strings.Join(directiveKeys, ", "))
	}
	if sec != sectionInterface {
		return fmt.Errorf("\"# wirelane: %s\" belongs in [Interface]", clip(key))
	}
	switch strings.ToLower(key) {
	case "dnsoptional":
		switch strings.ToLower(val) {
		case "true":
			in.DNSOptional = true
		case "false":
			in.DNSOptional = false
		default:
			return fmt.Errorf("DNSOptional: %q is neither true nor false", clip(val))
		}
	default:
		return fmt.Errorf("unknown Wirelane setting %s in a \"# wirelane:\" comment%s", keyName(key), hint(key, directiveKeys))
	}
	return nil
}

// hint suggests the key of known that key was probably meant to be,
// unless key is not shown (it may be key material).
func hint(key string, known []string) string {
	if strings.HasPrefix(keyName(key), "(") {
		return ""
	}
	return suggest.Hint(key, known)
}

// elsewhere says which other section key belongs to, if any.
func elsewhere(key string, other []string, name string) string {
	for _, k := range other {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf("; %s belongs in %s", k, name)
		}
	}
	return ""
}

// keyName quotes the first word of s for an error message about a setting
// name, unless it does not look like one: a misplaced key (a line that
// holds base64 key material) must not be echoed to terminals and logs.
func keyName(s string) string {
	word, _, _ := strings.Cut(s, " ")
	word, _, _ = strings.Cut(word, "\t")
	if len(word) == 0 || len(word) > 24 {
		return "(not shown: it does not look like a setting name)"
	}
	for _, r := range word {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "(not shown: it does not look like a setting name)"
		}
	}
	return strconv.Quote(word)
}

// clip shortens text echoed in an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func (in *Interface) set(lk, key, val string) error {
	switch lk {
	case "privatekey":
		k, err := ParseKey(val)
		if err != nil {
			return fmt.Errorf("PrivateKey is not a valid key (want 44 characters of base64, as `wirelane genkey` prints)")
		}
		in.PrivateKey = &k
	case "listenport":
		p, err := parsePort(val)
		if err != nil {
			return fmt.Errorf("ListenPort: %v", err)
		}
		in.ListenPort = &p
	case "fwmark":
		m, err := parseFwMark(val)
		if err != nil {
			return err
		}
		in.FwMark = &m
	case "address":
		for _, s := range splitList(val) {
			p, err := parseAddress(s)
			if err != nil {
				return err
			}
			in.Addresses = append(in.Addresses, p)
		}
	case "dns":
		for _, s := range splitList(val) {
			if a, err := netip.ParseAddr(s); err == nil {
				in.DNS = append(in.DNS, a)
				continue
			}
			if !validDomain(s) {
				return fmt.Errorf("DNS: %q is neither an IP address nor a search domain", clip(s))
			}
			in.DNSSearch = append(in.DNSSearch, s)
		}
	case "mtu":
		n, err := strconv.Atoi(val)
		if err != nil || n < 68 || n > 65535 {
			return fmt.Errorf("MTU: %q is not a number between 68 and 65535", clip(val))
		}
		in.MTU = n
	case "table":
		if !validTable(val) {
			return fmt.Errorf("Table: %q is not auto, off, a table number or a table name", clip(val))
		}
		in.Table = val
	case "preup":
		in.PreUp = append(in.PreUp, val)
	case "postup":
		in.PostUp = append(in.PostUp, val)
	case "predown":
		in.PreDown = append(in.PreDown, val)
	case "postdown":
		in.PostDown = append(in.PostDown, val)
	case "saveconfig":
		switch strings.ToLower(val) {
		case "true":
			in.SaveConfig = true
		case "false":
			in.SaveConfig = false
		default:
			return fmt.Errorf("SaveConfig: %q is neither true nor false", clip(val))
		}
	default:
		if e := elsewhere(key, peerKeys, "[Peer]"); e != "" {
			return fmt.Errorf("unknown key %s in [Interface]%s", keyName(key), e)
		}
		return fmt.Errorf("unknown key %s in [Interface]%s", keyName(key), hint(key, interfaceKeys))
	}
	return nil
}

func (p *Peer) set(lk, key, val string, line int) error {
	switch lk {
	case "publickey":
		k, err := ParseKey(val)
		if err != nil {
			return fmt.Errorf("PublicKey %q is not a valid key (want 44 characters of base64)", clip(val))
		}
		p.PublicKey = k
	case "presharedkey":
		k, err := ParseKey(val)
		if err != nil {
			return fmt.Errorf("PresharedKey is not a valid key (want 44 characters of base64, as `wirelane genpsk` prints)")
		}
		p.PresharedKey = &k
	case "allowedips":
		for _, s := range splitList(val) {
			pfx, err := parsePrefix(s)
			if err != nil {
				return fmt.Errorf("AllowedIPs: %v", err)
			}
			p.AllowedIPs = append(p.AllowedIPs, pfx)
		}
	case "endpoint":
		if _, _, err := SplitEndpoint(val); err != nil {
			return fmt.Errorf("Endpoint: %v", err)
		}
		p.Endpoint = val
		p.EndpointLine = line
	case "persistentkeepalive":
		if strings.EqualFold(val, "off") {
			var z uint16
			p.PersistentKeepalive = &z
			return nil
		}
		n, err := strconv.ParseUint(val, 10, 16)
		if err != nil {
			return fmt.Errorf("PersistentKeepalive: %q is not off or a number of seconds from 0 to 65535", clip(val))
		}
		v := uint16(n)
		p.PersistentKeepalive = &v
	default:
		if e := elsewhere(key, interfaceKeys, "[Interface]"); e != "" {
			return fmt.Errorf("unknown key %s in [Peer]%s", keyName(key), e)
		}
		return fmt.Errorf("unknown key %s in [Peer]%s", keyName(key), hint(key, peerKeys))
	}
	return nil
}

// splitList splits a comma (and space) separated value, dropping empties.
func splitList(v string) []string {
	return strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
}

func parsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q is not a port number from 0 to 65535", clip(s))
	}
	return uint16(n), nil
}

func parseFwMark(s string) (uint32, error) {
	if strings.EqualFold(s, "off") {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("FwMark: %q is not off or a 32-bit number (decimal or 0x hex)", clip(s))
	}
	return uint32(n), nil
}

// parseAddress accepts "IP" or "IP/bits"; a bare IP gets a host prefix.
func parseAddress(s string) (netip.Prefix, error) {
	if strings.IndexByte(s, '/') < 0 {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("Address: %q is not an IP address (with or without a prefix length, as in 10.0.0.1/24)", clip(s))
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("Address: %q is not an IP address with a prefix length (as in 10.0.0.1/24; a bare address is taken as /32 or /128)", clip(s))
	}
	return p, nil
}

// parsePrefix accepts "IP" or "IP/bits" and returns the masked prefix.
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := parseAddress(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", clip(s))
	}
	return p.Masked(), nil
}

// SplitEndpoint splits "host:port" or "[v6]:port" and checks the port.
func SplitEndpoint(s string) (host string, port uint16, err error) {
	var ps string
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || end+1 >= len(s) || s[end+1] != ':' {
			return "", 0, fmt.Errorf("%q: want [IPv6]:port", clip(s))
		}
		host, ps = s[1:end], s[end+2:]
		if _, err := netip.ParseAddr(host); err != nil {
			return "", 0, fmt.Errorf("%q: %q is not an IPv6 address", clip(s), clip(host))
		}
	} else {
		i := strings.LastIndexByte(s, ':')
		if i < 0 {
			return "", 0, fmt.Errorf("%q has no port (want host:port)", clip(s))
		}
		host, ps = s[:i], s[i+1:]
		if strings.IndexByte(host, ':') >= 0 {
			return "", 0, fmt.Errorf("%q: an IPv6 address must be in brackets, as in [2001:db8::1]:51820", clip(s))
		}
		if host == "" || !(validDomain(host) || isIPv4(host)) {
			return "", 0, fmt.Errorf("%q: %q is not a host name or address", clip(s), clip(host))
		}
	}
	n, perr := strconv.ParseUint(ps, 10, 16)
	if perr != nil || n == 0 {
		return "", 0, fmt.Errorf("%q: port %q is not a number from 1 to 65535", clip(s), clip(ps))
	}
	return host, uint16(n), nil
}

func isIPv4(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is4()
}

// validDomain accepts host names and search domains: dot-separated labels
// of letters, digits, '-' and '_'.
func validDomain(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

func validTable(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
