package config

// compress, comp-lzo and allow-compression, on both sides. Wirelane never
// compresses what it sends (as OpenVPN 2.6's `allow-compression no` and
// `asym`: compression inside the tunnel lets an observer learn plaintext
// from packet sizes, VORACLE); what a peer compressed is dropped, with a
// count, under `allow-compression no` (the default, as in OpenVPN 2.6)
// and decompressed under `asym` (and `yes`, which is treated as asym).
// The framing the compress or comp-lzo line implies is what data.Framing
// puts on the wire.

import (
	"fmt"
	"strings"

	"github.com/wirelane/wirelane/ovpn/data"
)

// CompressFraming maps a compress or comp-lzo option (args[0] is the
// directive, as in a file or a push) to its framing, and reports whether
// it names a real algorithm (lzo, lz4, comp-lzo yes/adaptive) rather
// than a stub.
func CompressFraming(args []string) (f data.Framing, algorithm bool, err error) {
	if len(args) == 0 {
		return 0, false, fmt.Errorf("no option")
	}
	switch strings.ToLower(args[0]) {
	case "compress":
		if len(args) > 2 {
			return 0, false, fmt.Errorf("takes at most one argument, got %d", len(args)-1)
		}
		alg := "stub"
		if len(args) == 2 {
			alg = strings.ToLower(args[1])
		}
		switch alg {
		case "stub":
			return data.FramingSwap, false, nil
		case "lz4":
			return data.FramingSwap, true, nil
		case "stub-v2":
			return data.FramingV2, false, nil
		case "lz4-v2":
			return data.FramingV2, true, nil
		case "lzo":
			return data.FramingLZO, true, nil
		case "migrate":
			return 0, false, fmt.Errorf("compress migrate (the server's migration mode) is %w; use compress stub-v2", ErrUnsupported)
		}
		return 0, false, fmt.Errorf("unknown algorithm %q (want stub, stub-v2, lz4, lz4-v2 or lzo)", args[1])
	case "comp-lzo":
		if len(args) > 2 {
			return 0, false, fmt.Errorf("takes at most one argument, got %d", len(args)-1)
		}
		mode := "adaptive"
		if len(args) == 2 {
			mode = strings.ToLower(args[1])
		}
		switch mode {
		case "no":
			return data.FramingLZO, false, nil
		case "yes", "adaptive":
			return data.FramingLZO, true, nil
		}
		return 0, false, fmt.Errorf("want yes, no or adaptive, got %q", args[1])
	}
	return 0, false, fmt.Errorf("%q is not a compression option", args[0])
}

// compressNote is the warning for a file that names a real compression
// algorithm.
const compressNote = "Wirelane never compresses what it sends (as OpenVPN 2.6's allow-compression asym, against VORACLE); " +
	"packets the peer compresses are decompressed with allow-compression asym, else dropped and counted"

// allowYesNote is the warning for allow-compression yes.
const allowYesNote = "yes: Wirelane never compresses what it sends (VORACLE), so this is treated as asym: packets the peer compresses are decompressed"

// Decompresses reports whether allow-compression lets received
// compressed packets be decompressed (asym or yes; the default is no).
func (c *Common) Decompresses() bool {
	return c.AllowCompression == "asym" || c.AllowCompression == "yes"
}

// compression handles compress, comp-lzo and allow-compression into
// Common; it reports whether args[0] was one of them.
func (p *Parser) compression(args []string) (bool, error) {
	name := args[0]
	switch name {
	case "compress", "comp-lzo":
		f, alg, err := CompressFraming(args)
		if err != nil {
			return true, p.Errorf(name, "%w", err)
		}
		p.c.Compress, p.c.CompressDirective = f, strings.Join(args, " ")
		if alg {
			p.Warn(name, compressNote)
		}
	case "allow-compression":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		switch mode := strings.ToLower(args[1]); mode {
		case "no", "asym":
		case "yes":
			p.Warn(name, allowYesNote)
		default:
			return true, p.Errorf(name, "want no, asym or yes, got %q", args[1])
		}
		p.c.AllowCompression = strings.ToLower(args[1])
	default:
		return false, nil
	}
	return true, nil
}
