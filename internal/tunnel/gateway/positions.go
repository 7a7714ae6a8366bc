package gateway

// The TOML library reports positions for syntax errors only; after a
// successful decode it keeps one position per dotted key name, so the
// second [[site]] table's "networks" hides the first one's. This file finds
// where every key, table header and array element starts, so that errors
// found later (a bad CIDR, two sites with overlapping networks, an unknown
// key) can name FILE:LINE:COL.
//
// The scan runs only on documents the library has already accepted, so it
// can be small: it tracks strings, comments, arrays and inline tables and
// reads keys where a key may start. On anything it does not expect it stops,
// and the keys it did not reach are reported by name instead of position.

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Pos is a place in a file: line and column, both counted from 1. Columns
// count characters, not bytes. The zero Pos means "unknown".
type Pos struct {
	Line, Col int
}

// Known reports whether p holds a position.
func (p Pos) Known() bool { return p.Line > 0 }

// keyPos is one key (or table header, or array element) found by the scan.
type keyPos struct {
	// plain is the dotted key path without array indices, as the TOML
	// library's MetaData names keys ("site.networks"); "" for array
	// elements, which are not keys.
	plain string
	// path is the key path with indices ("site[1].networks[0]").
	path string
	pos  Pos
}

// positions maps key paths to where they start.
type positions struct {
	byPath map[string]Pos
	keys   []keyPos // in document order
}

// at returns the position of path ("interface.mtu", "site[2].networks[1]"),
// or the zero Pos.
func (p *positions) at(path string) Pos { return p.byPath[path] }

// nthEntry returns the n-th (from 0) occurrence of the plain key name k
// (parts joined by NUL) in document order, or nil.
func (p *positions) nthEntry(k string, n int) *keyPos {
	for i := range p.keys {
		if p.keys[i].plain == k {
			if n == 0 {
				return &p.keys[i]
			}
			n--
		}
	}
	return nil
}

// scanner walks the document byte by byte, keeping line and column.
type scanner struct {
	src       string
	i         int
	line, col int
	out       *positions
	aot       map[string]int // array-of-tables path -> tables seen so far
	failed    bool
	depth     int // nesting of arrays and inline tables (bounds recursion)
}

// maxDepth bounds nesting; deeper documents are left unscanned.
const maxDepth = 64

// scanPositions indexes every key of src. It never fails: what it cannot
// read is simply not indexed.
func scanPositions(src string) *positions {
	s := &scanner{src: src, line: 1, col: 1, out: &positions{byPath: map[string]Pos{}}, aot: map[string]int{}}
	if strings.HasPrefix(src, "\ufeff") {
		s.i = len("\ufeff") // a byte order mark takes no column
	}
	s.document()
	return s.out
}

func (s *scanner) eof() bool { return s.failed || s.i >= len(s.src) }

func (s *scanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.src[s.i]
}

func (s *scanner) has(prefix string) bool { return !s.eof() && strings.HasPrefix(s.src[s.i:], prefix) }

// advance moves past n bytes, keeping line and column.
func (s *scanner) advance(n int) {
	for ; n > 0 && s.i < len(s.src); n-- {
		c := s.src[s.i]
		s.i++
		switch {
		case c == '\n':
			s.line++
			s.col = 1
		case c&0xC0 != 0x80: // first byte of a character
			s.col++
		}
	}
}

func (s *scanner) here() Pos { return Pos{s.line, s.col} }

func (s *scanner) record(plain []string, path string, pos Pos) {
	if _, dup := s.out.byPath[path]; !dup {
		s.out.byPath[path] = pos
	}
	pl := ""
	if plain != nil {
		pl = strings.Join(plain, "\x00")
	}
	s.out.keys = append(s.out.keys, keyPos{plain: pl, path: path, pos: pos})
}

// skip passes spaces and tabs, and also newlines and comments when nl is set.
func (s *scanner) skip(nl bool) {
	for !s.eof() {
		switch c := s.peek(); {
		case c == ' ' || c == '\t':
			s.advance(1)
		case nl && (c == '\n' || c == '\r'):
			s.advance(1)
		case nl && c == '#':
			for !s.eof() && s.peek() != '\n' {
				s.advance(1)
			}
		default:
			return
		}
	}
}

func (s *scanner) document() {
	var ctxPlain []string
	ctxPath := ""
	for {
		s.skip(true)
		if s.eof() {
			return
		}
		pos := s.here()
		if s.peek() == '[' {
			array := s.has("[[")
			if array {
				s.advance(2)
			} else {
				s.advance(1)
			}
			parts := s.key()
			s.skip(false)
			if array && s.has("]]") {
				s.advance(2)
			} else if !array && s.peek() == ']' {
				s.advance(1)
			} else {
				s.failed = true
				return
			}
			ctxPlain = parts
			ctxPath = s.indexed("", parts, array)
			s.record(parts, ctxPath, pos)
			continue
		}
		s.keyval(ctxPlain, ctxPath)
		if s.failed {
			return
		}
	}
}

// indexed joins parts onto base, inserting the current index after every
// prefix that names an array of tables. A new [[table]] header counts one
// more table.
func (s *scanner) indexed(base string, parts []string, newTable bool) string {
	p := base
	for i, part := range parts {
		if p != "" {
			p += "."
		}
		p += part
		if i == len(parts)-1 && newTable {
			n := s.aot[p]
			s.aot[p] = n + 1
			return p + "[" + strconv.Itoa(n) + "]"
		}
		if n, ok := s.aot[p]; ok && n > 0 {
			p += "[" + strconv.Itoa(n-1) + "]"
		}
	}
	return p
}

// keyval reads `key = value` in the table (or inline table) ctx.
func (s *scanner) keyval(ctxPlain []string, ctxPath string) {
	pos := s.here()
	parts := s.key()
	if s.failed || len(parts) == 0 {
		s.failed = true
		return
	}
	s.skip(false)
	if s.peek() != '=' {
		s.failed = true
		return
	}
	s.advance(1)
	s.skip(false)
	plain := append(append([]string(nil), ctxPlain...), parts...)
	path := s.indexed(ctxPath, parts, false)
	s.record(plain, path, pos)
	s.value(plain, path)
}

// key reads a dotted key made of bare and quoted parts.
func (s *scanner) key() []string {
	var parts []string
	for {
		s.skip(false)
		var part string
		switch c := s.peek(); {
		case c == '"' || c == '\'':
			part = s.str()
		case isBare(c):
			start := s.i
			for !s.eof() && isBare(s.peek()) {
				s.advance(1)
			}
			part = s.src[start:s.i]
		default:
			s.failed = true
			return nil
		}
		if s.failed {
			return nil
		}
		parts = append(parts, part)
		s.skip(false)
		if s.peek() != '.' {
			return parts
		}
		s.advance(1)
	}
}

func isBare(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// str reads a basic or literal string, single or multi-line, and returns
// its content (escapes decoded for the common cases; a key with exotic
// escapes may then not be found, which only costs its position).
func (s *scanner) str() string {
	q := s.peek()
	triple := strings.Repeat(string(q), 3)
	if s.has(triple) {
		s.advance(3)
		start := s.i
		for !s.eof() {
			if q == '"' && s.peek() == '\\' {
				s.advance(2)
				continue
			}
			if s.has(triple) {
				// Up to two quotes may end the content ("""a"""").
				for s.has(triple + string(q)) {
					s.advance(1)
				}
				body := s.src[start:s.i]
				s.advance(3)
				return body
			}
			s.advance(1)
		}
		s.failed = true
		return ""
	}
	s.advance(1)
	var b strings.Builder
	for !s.eof() {
		c := s.peek()
		switch {
		case c == q:
			s.advance(1)
			return b.String()
		case c == '\n':
			s.failed = true
			return ""
		case c == '\\' && q == '"':
			s.advance(1)
			e := s.peek()
			s.advance(1)
			switch e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'u', 'U':
				n := 4
				if e == 'U' {
					n = 8
				}
				if s.i+n <= len(s.src) {
					if v, err := strconv.ParseUint(s.src[s.i:s.i+n], 16, 32); err == nil && utf8.ValidRune(rune(v)) {
						b.WriteRune(rune(v))
					}
					s.advance(n)
				}
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
			s.advance(1)
		}
	}
	s.failed = true
	return ""
}

// value reads one value, indexing array elements and inline-table keys.
func (s *scanner) value(plain []string, path string) {
	if s.depth >= maxDepth {
		s.failed = true
		return
	}
	s.depth++
	defer func() { s.depth-- }()
	switch c := s.peek(); c {
	case '"', '\'':
		s.str()
	case '[':
		s.advance(1)
		for n := 0; ; n++ {
			s.skip(true)
			if s.eof() {
				s.failed = true
				return
			}
			if s.peek() == ']' {
				s.advance(1)
				return
			}
			elem := path + "[" + strconv.Itoa(n) + "]"
			s.record(nil, elem, s.here())
			s.value(plain, elem)
			if s.failed {
				return
			}
			s.skip(true)
			switch s.peek() {
			case ',':
				s.advance(1)
			case ']':
				s.advance(1)
				return
			default:
				s.failed = true
				return
			}
		}
	case '{':
		s.advance(1)
		for {
			s.skip(true)
			if s.eof() {
				s.failed = true
				return
			}
			if s.peek() == '}' {
				s.advance(1)
				return
			}
			s.keyval(plain, path)
			if s.failed {
				return
			}
			s.skip(true)
			switch s.peek() {
			case ',':
				s.advance(1)
			case '}':
				s.advance(1)
				return
			default:
				s.failed = true
				return
			}
		}
	default:
		// Numbers, booleans, dates: up to a delimiter.
		start := s.i
		for !s.eof() {
			c := s.peek()
			if c == ',' || c == ']' || c == '}' || c == '#' || c == '\n' || c == '\r' {
				break
			}
			s.advance(1)
		}
		if s.i == start {
			s.failed = true
		}
	}
}
