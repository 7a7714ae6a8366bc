package config

// compat-mode VERSION (OpenVPN 2.6): the defaults of an older OpenVPN,
// applied as OpenVPN 2.6.14 applies them (its manual lists each):
//
//	before 2.6.0  allow-compression asym when no other compression option
//	              is present (StubOnly, compress.go)
//	before 2.5.0  the cipher of `cipher` appended to data-ciphers
//	              (finishLegacy, legacy.go)
//	before 2.4.0  data-ciphers-fallback set to that cipher when unset
//	2.3.6 or older  tls-version-min 1.0: not applied (Wirelane's TLS
//	              starts at 1.2), with a warning

import (
	"fmt"
	"strconv"
	"strings"
)

// compatMode handles compat-mode; it reports whether args[0] was it.
func (p *Parser) compatMode(args []string) (bool, error) {
	if args[0] != "compat-mode" {
		return false, nil
	}
	if err := p.Want(args, 1, 1); err != nil {
		return true, err
	}
	v, err := parseCompatVersion(args[1])
	if err != nil {
		return true, p.Errorf(args[0], "%v", err)
	}
	p.c.compat = v
	if v <= 20306 {
		p.Warn(args[0], "OpenVPN "+args[1]+" spoke TLS 1.0 only (before 2.3.7): compat-mode would allow it, Wirelane does not (TLS 1.2 at least)")
	}
	return true, nil
}

// parseCompatVersion reads MAJOR.MINOR.PATCH as OpenVPN does (three
// numbers) into major*10000 + minor*100 + patch.
func parseCompatVersion(s string) (int, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return 0, fmt.Errorf("cannot parse version %q (want MAJOR.MINOR.PATCH, such as 2.3.0)", s)
	}
	v := 0
	for i, part := range parts {
		n, err := strconv.ParseUint(part, 10, 16)
		if err != nil || (i > 0 && n > 99) {
			return 0, fmt.Errorf("cannot parse version %q (want MAJOR.MINOR.PATCH, such as 2.3.0)", s)
		}
		v = v*100 + int(n)
	}
	return v, nil
}

// compatBefore reports whether compat-mode names a version older than v
// (major*10000 + minor*100 + patch).
func (c *Common) compatBefore(v int) bool {
	return c.compat != 0 && c.compat < v
}
