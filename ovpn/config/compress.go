package config

// compress, comp-lzo and allow-compression, on both sides, settled as
// OpenVPN 2.6.14 settles them. Wirelane never compresses what it sends
// (compression inside the tunnel lets an observer learn plaintext from
// packet sizes, VORACLE), so only two modes remain:
//
//	stub only ("no")  allow-compression no; or no allow-compression line
//	                  and no compress line and no comp-lzo naming an
//	                  algorithm (2.6's default). A compress/comp-lzo line
//	                  naming an algorithm is then an error (as in 2.6), a
//	                  pushed one fails the session, and packets the peer
//	                  compresses are dropped, counted and reported once.
//	asym              allow-compression asym or yes (yes is warned about:
//	                  Wirelane does not compress), or no allow-compression
//	                  line with a compress line or comp-lzo naming an
//	                  algorithm (2.6's default then). Packets the peer
//	                  compresses are decompressed when the framing in
//	                  force (the file's or a pushed line) names an
//	                  algorithm; a stub framing drops them, as OpenVPN's
//	                  stub decompressors do. compat-mode before 2.6.0
//	                  makes asym the default without any compression
//	                  line too.
//
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
// algorithm (OpenVPN 2.6 prints "Compression for receiving enabled").
const compressNote = "compression for receiving enabled: packets the peer compresses are decompressed (as OpenVPN 2.6's allow-compression asym, its default with this line); " +
	"Wirelane never compresses what it sends (against VORACLE)"

// allowYesNote is the warning for allow-compression yes, given once per
// file.
const allowYesNote = "yes: Wirelane never compresses what it sends (VORACLE), so this is treated as asym: packets the peer compresses are decompressed, nothing sent is compressed"

// StubOnly reports whether only compression stubs are allowed (OpenVPN
// 2.6's allow-compression no, explicit or by default): a pushed
// algorithm is refused and compressed packets are dropped.
func (c *Common) StubOnly() bool {
	switch c.AllowCompression {
	case "no":
		return true
	case "":
		// OpenVPN 2.6 enforces stubs when no compression option has set
		// a flag: a stub line sets one for good, a line naming an
		// algorithm counts as long as it is the line in force; compat-mode
		// before 2.6.0 enforces nothing (asym).
		return !c.compressStub && !c.CompressAlgorithm && !c.compatBefore(20600)
	}
	return false
}

// Decompresses reports whether received compressed packets are
// decompressed under the file's own framing: its compress or comp-lzo
// line names an algorithm, and only stubs are not enforced (asym,
// explicit or by default, or yes).
func (c *Common) Decompresses() bool {
	return c.CompressAlgorithm && !c.StubOnly()
}

// AdvertisesAlgorithms reports whether the client announces the
// algorithms it can decompress (IV_LZ4, IV_LZ4v2, IV_LZO) rather than
// the stubs alone, as OpenVPN 2.6 does unless only stubs are allowed or
// the file has compress stub or stub-v2.
func (c *Common) AdvertisesAlgorithms() bool {
	return !c.StubOnly() && !c.compressStub
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
		if alg && p.c.AllowCompression == "no" {
			return true, p.Errorf(name, "compression is not allowed: allow-compression is no (line %d); remove that line (received packets are then decompressed, nothing sent is compressed) or use compress stub-v2", p.seen["allow-compression"])
		}
		p.c.Compress, p.c.CompressDirective, p.c.CompressAlgorithm = f, strings.Join(args, " "), alg
		if name == "compress" && !alg {
			p.c.compressStub = true
		}
		if alg {
			p.Warn(name, compressNote)
		}
	case "allow-compression":
		if err := p.Want(args, 1, 1); err != nil {
			return true, err
		}
		mode := strings.ToLower(args[1])
		switch mode {
		case "no", "asym", "yes":
		default:
			return true, p.Errorf(name, "want no, asym or yes, got %q", args[1])
		}
		switch {
		case mode == "no" && p.c.CompressAlgorithm:
			return true, p.Errorf(name, "allow-compression no conflicts with %q, which enables compression (as in OpenVPN 2.6): remove one of them", p.c.CompressDirective)
		case mode != "no" && p.c.AllowCompression == "no":
			return true, p.Errorf(name, "cannot set allow-compression to %s after setting it to no (as in OpenVPN 2.6)", mode)
		case mode == "yes" && p.c.AllowCompression != "yes":
			p.Warn(name, allowYesNote)
		}
		p.c.AllowCompression = strings.ToLower(args[1])
	default:
		return false, nil
	}
	return true, nil
}
