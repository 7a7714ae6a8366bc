package gateway

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/wirelane/wirelane/internal/sys/suggest"

	"github.com/wirelane/wirelane/internal/tunnel/wgquick"
)

// value holds one TOML value as the library decoded it (string, int64,
// float64, bool, time, []any, map[string]any), so that this package, not
// the library, checks its type and reports the error at the right place.
type value struct {
	v   any
	set bool
}

// UnmarshalTOML keeps the raw value (toml.Unmarshaler).
func (r *value) UnmarshalTOML(v any) error {
	r.v, r.set = v, true
	return nil
}

// The schema. The field tags are the only accepted key names.
type (
	fileDoc struct {
		Interface toml.Primitive `toml:"interface"`
		Site      toml.Primitive `toml:"site"`
		Fleet     toml.Primitive `toml:"fleet"`
	}
	interfaceDoc struct {
		Name           value `toml:"name"`
		PrivateKey     value `toml:"private_key"`
		PrivateKeyFile value `toml:"private_key_file"`
		ListenPort     value `toml:"listen_port"`
		Addresses      value `toml:"addresses"`
		MTU            value `toml:"mtu"`
		FwMark         value `toml:"fwmark"`
		Table          value `toml:"table"`
		PreUp          value `toml:"pre_up"`
		PostUp         value `toml:"post_up"`
		PreDown        value `toml:"pre_down"`
		PostDown       value `toml:"post_down"`
	}
	siteDoc struct {
		Name                value `toml:"name"`
		PublicKey           value `toml:"public_key"`
		PresharedKey        value `toml:"preshared_key"`
		PresharedKeyFile    value `toml:"preshared_key_file"`
		Endpoint            value `toml:"endpoint"`
		Networks            value `toml:"networks"`
		PersistentKeepalive value `toml:"persistent_keepalive"`
	}
)

// Known key names, for messages about unknown ones.
var (
	interfaceKeys = []string{"name", "private_key", "private_key_file", "listen_port", "addresses", "mtu", "fwmark", "table", "pre_up", "post_up", "pre_down", "post_down"}
	siteKeys      = []string{"name", "public_key", "preshared_key", "preshared_key_file", "endpoint", "networks", "persistent_keepalive"}
)

// MaxFileSize bounds a gateway file; larger files are refused unread.
const MaxFileSize = 1 << 20

// Limits of the values.
const (
	MinMTU = 576
	MaxMTU = 65535
)

// siteNameRE is what a site may be called (it appears in messages and
// summaries, so it stays printable and short).
var siteNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// tableNameRE is an rt_tables name.
var tableNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// parser collects the problems of one file.
type parser struct {
	file string
	pos  *positions
	errs ErrorList
}

// fail records a problem about the key at path ("site[1].networks[0]").
func (p *parser) fail(path, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Pos: p.pos.at(path), Key: path, Msg: fmt.Sprintf(format, args...)})
}

// Parse reads a gateway file. file names the source in errors and is the
// base for relative key file paths and the default interface name. It
// does not read key files (see LoadKeys). Every problem is reported, in
// file order, as an ErrorList; a syntax error stops the parse at once.
func Parse(file string, src []byte) (*Gateway, error) {
	p := &parser{file: file}
	var doc fileDoc
	md, err := toml.Decode(string(src), &doc)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, ErrorList{{File: file, Pos: Pos{pe.Position.Line, pe.Position.Col}, Msg: redactSyntax(pe.Message, src, pe.Position.Line)}}
		}
		return nil, ErrorList{{File: file, Msg: redact(err.Error())}}
	}
	p.pos = scanPositions(string(src))
	g := &Gateway{Path: file}

	known := map[string]bool{} // key paths (plain) whose type errors cover their children
	if !md.IsDefined("interface") {
		p.errs = append(p.errs, &Error{File: file, Msg: "no [interface] table: the gateway needs at least private_key_file (or private_key)"})
	} else {
		var raw any
		md.PrimitiveDecode(doc.Interface, &raw)
		if _, ok := raw.(map[string]any); !ok {
			p.fail("interface", "interface must be a table ([interface]), not %s", typeName(raw))
			known["interface"] = true
		} else {
			var in interfaceDoc
			if err := md.PrimitiveDecode(doc.Interface, &in); err != nil {
				return nil, ErrorList{{File: file, Key: "interface", Msg: redact(err.Error())}}
			}
			p.iface(g, &in, known)
		}
	}
	if md.IsDefined("fleet") {
		var raw any
		md.PrimitiveDecode(doc.Fleet, &raw)
		if _, ok := raw.(map[string]any); !ok {
			p.fail("fleet", "fleet must be a table ([fleet]), not %s", typeName(raw))
			known["fleet"] = true
		} else {
			var fd fleetDoc
			if err := md.PrimitiveDecode(doc.Fleet, &fd); err != nil {
				return nil, ErrorList{{File: file, Key: "fleet", Msg: redact(err.Error())}}
			}
			p.fleet(g, &fd, known)
		}
	}
	if !md.IsDefined("site") {
		if !md.IsDefined("fleet") {
			p.errs = append(p.errs, &Error{File: file, Msg: "no [[site]] table: describe at least one remote site (or join a [fleet])"})
		}
	} else {
		var raw any
		md.PrimitiveDecode(doc.Site, &raw)
		if !isTableArray(raw) {
			p.fail("site", "site must be an array of tables ([[site]]), not %s", typeName(raw))
			known["site"] = true
		} else {
			var sites []siteDoc
			if err := md.PrimitiveDecode(doc.Site, &sites); err != nil {
				return nil, ErrorList{{File: file, Key: "site", Msg: redact(err.Error())}}
			}
			for i := range sites {
				p.site(g, i, &sites[i], known)
			}
		}
	}
	p.unknownKeys(md, known)
	p.crossChecks(g)

	if g.Name == "" {
		base := strings.TrimSuffix(filepath.Base(file), ".toml")
		if wgquick.ValidInterfaceName(base) {
			g.Name = base
		} else if !p.has("interface.name") {
			p.errs = append(p.errs, &Error{File: file, Msg: fmt.Sprintf("the file name does not make a valid interface name (%q); set name in [interface] (1 to 15 of a-z A-Z 0-9 _ = + . -)", clip(base))})
		}
	}
	p.fleetChecks(g)
	if len(p.errs) > 0 {
		sortErrors(p.errs)
		return nil, p.errs
	}
	return g, nil
}

// has reports whether a problem about key path k was recorded.
func (p *parser) has(k string) bool {
	for _, e := range p.errs {
		if e.Key == k {
			return true
		}
	}
	return false
}

// sortErrors orders problems by position; those without one (whole-file
// problems) come last, in the order found.
func sortErrors(errs ErrorList) {
	sort.SliceStable(errs, func(i, j int) bool {
		a, b := errs[i].Pos, errs[j].Pos
		if a.Known() != b.Known() {
			return a.Known()
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
}

func isTableArray(v any) bool {
	switch a := v.(type) {
	case []map[string]any:
		return true
	case []any:
		for _, e := range a {
			if _, ok := e.(map[string]any); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// typeName names a decoded TOML value's type for messages.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T", v)
}

// str returns a string value; ok is false when it is absent or wrong.
func (p *parser) str(path string, v value) (string, bool) {
	if !v.set {
		return "", false
	}
	s, ok := v.v.(string)
	if !ok {
		p.fail(path, "%s must be a string, not %s", lastKey(path), typeName(v.v))
	}
	return s, ok
}

// integer returns an integer value in [lo, hi].
func (p *parser) integer(path string, v value, lo, hi int64, what string) (int64, bool) {
	if !v.set {
		return 0, false
	}
	n, ok := v.v.(int64)
	if !ok {
		p.fail(path, "%s must be an integer (%s), not %s", lastKey(path), what, typeName(v.v))
		return 0, false
	}
	if n < lo || n > hi {
		p.fail(path, "%s = %d is out of range (%s)", lastKey(path), n, what)
		return 0, false
	}
	return n, true
}

// strList returns an array of strings; with single set, one string is
// also accepted. Each element is checked by each, which reports its own
// problems against the element's path.
func (p *parser) strList(path string, v value, single bool, each func(elemPath, s string)) {
	if !v.set {
		return
	}
	if s, ok := v.v.(string); ok && single {
		each(path, s)
		return
	}
	a, ok := v.v.([]any)
	if !ok {
		want := "an array of strings"
		if single {
			want = "a string or an array of strings"
		}
		p.fail(path, "%s must be %s, not %s", lastKey(path), want, typeName(v.v))
		return
	}
	for i, e := range a {
		ep := path + "[" + strconv.Itoa(i) + "]"
		s, ok := e.(string)
		if !ok {
			p.fail(ep, "%s: every element must be a string, not %s", lastKey(path), typeName(e))
			continue
		}
		each(ep, s)
	}
}

func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		path = path[i+1:]
	}
	if i := strings.IndexByte(path, '['); i >= 0 {
		path = path[:i]
	}
	return path
}

// clip shortens text echoed in a message.
func clip(s string) string {
	if len(s) > 48 {
		return s[:48] + "..."
	}
	return s
}

// base64RunRE finds text that may be key material in a library message.
var base64RunRE = regexp.MustCompile(`[A-Za-z0-9+/]{20,}={0,2}`)

// quotedRE finds quoted text in a library message.
var quotedRE = regexp.MustCompile(`"[^"]*"|'[^']*'`)

// redactSyntax is redact for a syntax error on line: when that line sets a
// key, nothing the library quotes from it is shown, since a fragment of a
// key is still a secret.
func redactSyntax(msg string, src []byte, line int) string {
	lines := strings.SplitN(string(src), "\n", line+1)
	if line >= 1 && line <= len(lines) && strings.Contains(strings.ToLower(lines[line-1]), "key") {
		msg = quotedRE.ReplaceAllString(msg, "(not shown)")
	}
	return redact(msg)
}

// redact hides anything that looks like a key in a message from the TOML
// library, which may quote the offending text.
func redact(s string) string { return base64RunRE.ReplaceAllString(s, "(not shown)") }

func (p *parser) iface(g *Gateway, in *interfaceDoc, known map[string]bool) {
	const ip = "interface."
	for path, v := range map[string]value{"name": in.Name, "private_key": in.PrivateKey, "private_key_file": in.PrivateKeyFile,
		"listen_port": in.ListenPort, "addresses": in.Addresses, "mtu": in.MTU, "fwmark": in.FwMark, "table": in.Table,
		"pre_up": in.PreUp, "post_up": in.PostUp, "pre_down": in.PreDown, "post_down": in.PostDown} {
		if v.set {
			known["interface\x00"+path] = true
		}
	}
	if s, ok := p.str(ip+"name", in.Name); ok {
		if !wgquick.ValidInterfaceName(s) {
			p.fail(ip+"name", "name %q is not a valid interface name (1 to 15 of a-z A-Z 0-9 _ = + . -)", clip(s))
		} else {
			g.Name = s
		}
	}
	key, haveKey := p.str(ip+"private_key", in.PrivateKey)
	kfile, haveFile := p.str(ip+"private_key_file", in.PrivateKeyFile)
	switch {
	case haveKey && haveFile:
		p.fail(ip+"private_key_file", "give either private_key or private_key_file, not both")
	case haveKey:
		k, err := wgquick.ParseKey(key)
		if err != nil {
			p.fail(ip+"private_key", "private_key is not a valid key (want 44 characters of base64, as `wirelane genkey` prints)")
		} else {
			g.PrivateKey = &k
		}
	case haveFile:
		if kfile == "" {
			p.fail(ip+"private_key_file", "private_key_file is empty")
		} else {
			g.PrivateKeyFile = p.relative(kfile)
			g.privateKeyFilePos = p.pos.at(ip + "private_key_file")
		}
	case !in.PrivateKey.set && !in.PrivateKeyFile.set:
		p.fail("interface", "[interface] needs private_key_file (a file holding the key, mode 0600) or private_key")
	}
	if n, ok := p.integer(ip+"listen_port", in.ListenPort, 1, 65535, "a UDP port from 1 to 65535; leave it out for a random port"); ok {
		port := uint16(n)
		g.ListenPort = &port
	}
	seen := map[netip.Prefix]string{}
	p.strList(ip+"addresses", in.Addresses, false, func(ep, s string) {
		a, err := parseAddress(s)
		if err != nil {
			p.fail(ep, "addresses: %v", err)
			return
		}
		if first, dup := seen[a]; dup {
			p.fail(ep, "addresses: %s is listed twice (first at %s)", a, p.where(first))
			return
		}
		seen[a] = ep
		g.Addresses = append(g.Addresses, a)
	})
	if in.MTU.set {
		if s, ok := in.MTU.v.(string); ok {
			if s != "auto" {
				p.fail(ip+"mtu", "mtu must be \"auto\" or a number from %d to %d, not %q", MinMTU, MaxMTU, clip(s))
			}
		} else if n, ok := p.integer(ip+"mtu", in.MTU, MinMTU, MaxMTU, fmt.Sprintf("\"auto\" or %d to %d", MinMTU, MaxMTU)); ok {
			g.MTU = int(n)
		}
	}
	if n, ok := p.integer(ip+"fwmark", in.FwMark, 0, 1<<32-1, "0 (off) to 0xffffffff"); ok {
		g.FwMark = uint32(n)
	}
	if in.Table.set {
		switch t := in.Table.v.(type) {
		case int64:
			if n, ok := p.integer(ip+"table", in.Table, 1, 1<<32-1, "a table number from 1 to 4294967295"); ok {
				g.Table = strconv.FormatInt(n, 10)
			}
		case string:
			switch {
			case t == "auto":
				g.Table = ""
			case tableNameRE.MatchString(t):
				g.Table = t
				g.tablePos = p.pos.at(ip + "table")
			default:
				p.fail(ip+"table", "table %q is not \"auto\", \"off\", a table number or a name from /etc/iproute2/rt_tables", clip(t))
			}
		default:
			p.fail(ip+"table", "table must be \"auto\", \"off\", a number or a table name, not %s", typeName(t))
		}
	}
	hook := func(key string, v value, dst *[]string) {
		p.strList(ip+key, v, true, func(ep, s string) {
			if strings.TrimSpace(s) == "" {
				p.fail(ep, "%s: empty command", key)
				return
			}
			if strings.ContainsAny(s, "\x00\n") {
				p.fail(ep, "%s: a command must be one line", key)
				return
			}
			*dst = append(*dst, s)
		})
	}
	hook("pre_up", in.PreUp, &g.PreUp)
	hook("post_up", in.PostUp, &g.PostUp)
	hook("pre_down", in.PreDown, &g.PreDown)
	hook("post_down", in.PostDown, &g.PostDown)
}

// relative resolves a key file path against the gateway file's directory.
func (p *parser) relative(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(filepath.Dir(p.file), path)
}

// where describes a key path's position for a message ("line 12").
func (p *parser) where(path string) string {
	if pos := p.pos.at(path); pos.Known() {
		return fmt.Sprintf("line %d", pos.Line)
	}
	return path
}

func (p *parser) site(g *Gateway, i int, d *siteDoc, known map[string]bool) {
	sp := "site[" + strconv.Itoa(i) + "]"
	kp := sp + "."
	for path, v := range map[string]value{"name": d.Name, "public_key": d.PublicKey, "preshared_key": d.PresharedKey, "preshared_key_file": d.PresharedKeyFile,
		"endpoint": d.Endpoint, "networks": d.Networks, "persistent_keepalive": d.PersistentKeepalive} {
		if v.set {
			known["site\x00"+path] = true
		}
	}
	s := Site{Pos: p.pos.at(sp)}
	if name, ok := p.str(kp+"name", d.Name); ok {
		if !siteNameRE.MatchString(name) {
			p.fail(kp+"name", "site name %q: use 1 to 63 of a-z A-Z 0-9 _ . - (starting with a letter or digit)", clip(name))
		}
		s.Name = name
	} else if !d.Name.set {
		p.fail(sp, "this [[site]] has no name")
	}
	label := fmt.Sprintf("site %q", s.Name)
	if s.Name == "" {
		label = fmt.Sprintf("site #%d", i+1)
	}
	if k, ok := p.str(kp+"public_key", d.PublicKey); ok {
		pk, err := wgquick.ParseKey(k)
		if err != nil {
			p.fail(kp+"public_key", "%s: public_key %q is not a valid key (want 44 characters of base64)", label, clip(k))
		} else {
			s.PublicKey = pk
			s.publicKeyPos = p.pos.at(kp + "public_key")
		}
	} else if !d.PublicKey.set {
		p.fail(sp, "%s has no public_key", label)
	}
	psk, havePSK := p.str(kp+"preshared_key", d.PresharedKey)
	pskFile, havePSKFile := p.str(kp+"preshared_key_file", d.PresharedKeyFile)
	switch {
	case havePSK && havePSKFile:
		p.fail(kp+"preshared_key_file", "%s: give either preshared_key or preshared_key_file, not both", label)
	case havePSK:
		k, err := wgquick.ParseKey(psk)
		if err != nil {
			p.fail(kp+"preshared_key", "%s: preshared_key is not a valid key (want 44 characters of base64, as `wirelane genpsk` prints)", label)
		} else {
			s.PresharedKey = &k
		}
	case havePSKFile:
		if pskFile == "" {
			p.fail(kp+"preshared_key_file", "%s: preshared_key_file is empty", label)
		} else {
			s.PresharedKeyFile = p.relative(pskFile)
			s.presharedKeyFilePos = p.pos.at(kp + "preshared_key_file")
		}
	}
	if ep, ok := p.str(kp+"endpoint", d.Endpoint); ok {
		if _, _, err := wgquick.SplitEndpoint(ep); err != nil {
			p.fail(kp+"endpoint", "%s: endpoint %v", label, err)
		} else {
			s.Endpoint = ep
			s.EndpointPos = p.pos.at(kp + "endpoint")
		}
	}
	if !d.Networks.set {
		p.fail(sp, "%s has no networks (the address ranges reached through it)", label)
	}
	p.strList(kp+"networks", d.Networks, false, func(ep, str string) {
		pfx, err := parseAddress(str)
		if err != nil {
			p.fail(ep, "%s: networks: %v", label, err)
			return
		}
		if pfx != pfx.Masked() {
			p.fail(ep, "%s: network %s has host bits set; write %s (or %s/%d for the single address)", label, pfx, pfx.Masked(), pfx.Addr(), pfx.Addr().BitLen())
			return
		}
		s.Networks = append(s.Networks, pfx)
		s.networkPaths = append(s.networkPaths, ep)
	})
	if d.Networks.set {
		if a, ok := d.Networks.v.([]any); ok && len(a) == 0 {
			p.fail(kp+"networks", "%s: networks is empty", label)
		}
	}
	if n, ok := p.integer(kp+"persistent_keepalive", d.PersistentKeepalive, 0, 65535, "seconds from 0 (off) to 65535"); ok {
		s.PersistentKeepalive = uint16(n)
	}
	g.Sites = append(g.Sites, s)
}

// parseAddress accepts "IP/bits" or a bare IP (a host prefix).
func parseAddress(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", clip(s))
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	pfx, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix (like 10.20.0.0/16 or fd00:20::/48)", clip(s))
	}
	return pfx, nil
}

// unknownKeys reports every key the schema does not know, at its place,
// and keys written with the wrong case (the library matches struct fields
// without regard to case; this file format does not).
func (p *parser) unknownKeys(md toml.MetaData, known map[string]bool) {
	covered := func(parts []string) bool {
		for i := 1; i < len(parts); i++ {
			if known[strings.Join(parts[:i], "\x00")] {
				return true
			}
		}
		return false
	}
	report := func(parts []string, plain string, n int, msg string) {
		pos := Pos{}
		path := strings.Join(parts, ".")
		if e := p.pos.nthEntry(plain, n); e != nil {
			pos, path = e.pos, e.path
		}
		p.errs = append(p.errs, &Error{File: p.file, Pos: pos, Key: path, Msg: msg})
	}
	// Case first: "MTU" was decoded into mtu, "[Interface]" was taken for
	// [interface]. Every occurrence of such a key is reported, and what
	// lies under a mis-cased table is not reported again.
	caseCount := map[string]int{}
	for _, k := range md.Keys() {
		plain := strings.Join(k, "\x00")
		n := caseCount[plain]
		caseCount[plain]++
		if covered(k) {
			continue
		}
		var names []string
		switch {
		case len(k) == 1:
			names = []string{"interface", "site", "fleet"}
		case len(k) == 2 && k[0] == "interface":
			names = interfaceKeys
		case len(k) == 2 && k[0] == "site":
			names = siteKeys
		case len(k) == 2 && k[0] == "fleet":
			names = fleetKeys
		}
		for _, name := range names {
			if k[len(k)-1] != name && strings.EqualFold(k[len(k)-1], name) {
				if n == 0 {
					known[plain] = true
				}
				report(k, plain, n, fmt.Sprintf("unknown key %q (names are lower case: %s)", k[len(k)-1], name))
			}
		}
	}
	count := map[string]int{}
	for _, k := range md.Undecoded() {
		plain := strings.Join(k, "\x00")
		n := count[plain]
		count[plain]++
		if covered(k) {
			continue
		}
		report(k, plain, n, unknownMsg(k))
		known[plain] = true // what lies under it is not reported again
	}
}

func unknownMsg(k toml.Key) string {
	last := k[len(k)-1]
	switch {
	case len(k) == 1:
		if h := suggest.Hint(last, []string{"interface", "site", "fleet"}); h != "" {
			return fmt.Sprintf("unknown table or key %q%s", last, h)
		}
		return fmt.Sprintf("unknown table or key %q (want [interface], [[site]] and [fleet])", last)
	case len(k) == 2 && k[0] == "interface":
		if h := suggest.Hint(last, interfaceKeys); h != "" {
			return fmt.Sprintf("unknown key %q in [interface]%s", last, h)
		}
		return fmt.Sprintf("unknown key %q in [interface] (known: %s)", last, strings.Join(interfaceKeys, ", "))
	case len(k) == 2 && k[0] == "site":
		if h := suggest.Hint(last, siteKeys); h != "" {
			return fmt.Sprintf("unknown key %q in [[site]]%s", last, h)
		}
		return fmt.Sprintf("unknown key %q in [[site]] (known: %s)", last, strings.Join(siteKeys, ", "))
	case len(k) == 2 && k[0] == "fleet":
		if h := suggest.Hint(last, fleetKeys); h != "" {
			return fmt.Sprintf("unknown key %q in [fleet]%s", last, h)
		}
		return fmt.Sprintf("unknown key %q in [fleet] (known: %s)", last, strings.Join(fleetKeys, ", "))
	}
	return fmt.Sprintf("unknown key %q", k.String())
}

// crossChecks finds what no single value shows: duplicate site names and
// keys, networks that overlap (between sites or within one), and site
// networks that hold this gateway's own address.
func (p *parser) crossChecks(g *Gateway) {
	names := map[string]int{}
	keys := map[wgquick.Key]int{}
	type owned struct {
		pfx  netip.Prefix
		site int
		path string
	}
	var all []owned
	for i := range g.Sites {
		s := &g.Sites[i]
		sp := "site[" + strconv.Itoa(i) + "]"
		if s.Name != "" {
			if j, dup := names[s.Name]; dup {
				p.fail(sp+".name", "site name %q is already used by the site at %s", s.Name, p.where("site["+strconv.Itoa(j)+"]"))
			} else {
				names[s.Name] = i
			}
		}
		if !s.PublicKey.IsZero() {
			if j, dup := keys[s.PublicKey]; dup {
				p.fail(sp+".public_key", "site %q has the same public_key as site %q (%s); each site is one peer", s.Name, g.Sites[j].Name, p.where("site["+strconv.Itoa(j)+"]"))
			} else {
				keys[s.PublicKey] = i
			}
		}
		for j, n := range s.Networks {
			path := s.networkPaths[j]
			for _, o := range all {
				if !o.pfx.Overlaps(n) {
					continue
				}
				if o.site == i {
					p.fail(path, "site %q: network %s overlaps %s, also listed for this site (%s)", s.Name, n, o.pfx, p.where(o.path))
				} else {
					p.fail(path, "site %q: network %s overlaps %s of site %q (%s); a packet must have exactly one site to go to", s.Name, n, o.pfx, g.Sites[o.site].Name, p.where(o.path))
				}
			}
			for _, a := range g.Addresses {
				if n.Contains(a.Addr()) {
					p.fail(path, "site %q: network %s contains this gateway's own address %s; list the remote tunnel address as a /%d instead", s.Name, n, a.Addr(), a.Addr().BitLen())
				}
			}
			all = append(all, owned{n, i, path})
		}
	}
	if g.PrivateKey != nil {
		for _, i := range g.ownKeySites() {
			p.fail("site["+strconv.Itoa(i)+"].public_key", "%s", ownKeyMsg(&g.Sites[i]))
		}
	}
}

// ownKeySites returns the indices of the sites whose public key is this
// gateway's own (g.PrivateKey must be set).
func (g *Gateway) ownKeySites() []int {
	own := g.PrivateKey.PublicKey()
	var idx []int
	for i := range g.Sites {
		if g.Sites[i].PublicKey == own {
			idx = append(idx, i)
		}
	}
	return idx
}

func ownKeyMsg(s *Site) string {
	return fmt.Sprintf("site %q: public_key is this gateway's own public key; use the remote site's key", s.Name)
}
