package data

// Compression framing: the byte (or bytes) OpenVPN puts in front of every
// data-channel payload when `compress` or `comp-lzo` is configured or
// pushed. Wirelane never compresses (as OpenVPN 2.6 with
// `allow-compression no` or `asym`: compression next to encryption leaks
// plaintext, VORACLE), but it frames sent payloads as the peer expects and
// unframes received ones. A received payload that the peer did compress
// is dropped with ErrCompressed, unless the channel has a Decompressor
// (`allow-compression asym`, decompress.go).
//
//	FramingLZO  (comp-lzo, compress lzo):    send 0xFA|payload; receive 0xFA ok, 0x66 compressed
//	FramingSwap (compress, stub, lz4):       send 0xFB|payload[1:]|payload[0];
//	                                         receive 0xFB ok, 0x69 compressed
//	FramingV2   (compress stub-v2, lz4-v2):  send the payload as is, or 0x50 0x00|payload when it
//	                                         starts with 0x50; receive 0x50 0x00 stripped,
//	                                         0x50 0x01 LZ4, 0x50 0x02..0x04 compressed by an
//	                                         algorithm OpenVPN never sends, anything else as is
//
// Compressed payloads: 0x66 is followed by an LZO1X block; 0x69 by an
// LZ4 block whose first byte was swapped to the end (as the uncompressed
// ones); 0x50 0x01 by an LZ4 block.

import (
	"errors"
	"fmt"
)

// Framing is the compression framing of a data channel.
type Framing uint8

// Framings, as OpenVPN 2.6 puts them on the wire.
const (
	// FramingNone: payloads are IP packets (no compress or comp-lzo).
	FramingNone Framing = iota
	// FramingLZO: one byte before the payload, 0xFA uncompressed (comp-lzo
	// in all its forms, compress lzo).
	FramingLZO
	// FramingSwap: the payload's first byte moved to its end and 0xFB put
	// in its place (compress with no algorithm, compress stub, compress
	// lz4), which keeps the payload aligned.
	FramingSwap
	// FramingV2: nothing added, except 0x50 0x00 before a payload that
	// starts with 0x50 (compress stub-v2, compress lz4-v2); an IP packet
	// never does.
	FramingV2
)

// Framing bytes (OpenVPN's comp.h).
const (
	lzoCompressByte = 0x66 // LZO_COMPRESS_BYTE
	lz4CompressByte = 0x69 // LZ4_COMPRESS_BYTE
	noCompressByte  = 0xFA // NO_COMPRESS_BYTE
	noCompressSwap  = 0xFB // NO_COMPRESS_BYTE_SWAP
	v2Indicator     = 0x50 // COMP_ALGV2_INDICATOR_BYTE
	v2Uncompressed  = 0x00 // COMP_ALGV2_UNCOMPRESSED
	v2LZ4           = 0x01 // COMP_ALGV2_LZ4
	v2LastAlgorithm = 0x04 // COMP_ALGV2_ZSTD; 1 LZ4, 2 LZO, 3 Snappy
)

// FramingPrefix is the most a framing adds before a payload (FramingV2's
// escape); Headroom includes it.
const FramingPrefix = 2

// ErrCompressed is a received payload that the peer compressed, on a
// channel without a Decompressor (a stub framing, or allow-compression
// no; config/compress.go): it is dropped and counted.
var ErrCompressed = errors.New("data: the peer sent a compressed packet, and this end's framing is a stub or allow-compression is no: dropped (give this end the peer's compress line with allow-compression asym to decompress it, or allow-compression no or compress stub-v2 on the peer)")

// ErrFraming is a received payload whose compression header is not one
// the framing knows.
var ErrFraming = errors.New("data: bad compression framing byte")

// String names the framing as the directive that selects it.
func (f Framing) String() string {
	switch f {
	case FramingNone:
		return "none"
	case FramingLZO:
		return "comp-lzo"
	case FramingSwap:
		return "compress stub"
	case FramingV2:
		return "compress stub-v2"
	}
	return fmt.Sprintf("framing(%d)", uint8(f))
}

// frame applies f to the payload at buf[at:at+n] and returns where the
// plaintext now starts and ends; buf has room for FramingPrefix bytes
// before at and one after at+n.
func (f Framing) frame(buf []byte, at, n int) (start, end int) {
	start, end = at, at+n
	switch f {
	case FramingLZO:
		start--
		buf[start] = noCompressByte
	case FramingSwap:
		if n > 0 {
			buf[end] = buf[at]
			buf[at] = noCompressSwap
			end++
		}
	case FramingV2:
		if n > 0 && buf[at] == v2Indicator {
			start -= 2
			buf[start], buf[start+1] = v2Indicator, v2Uncompressed
		}
	}
	return start, end
}

// algorithm is what compressed a received payload (algNone: nothing).
type algorithm uint8

const (
	algNone  algorithm = iota
	algLZO             // LZO1X (comp-lzo, compress lzo)
	algLZ4             // LZ4 block (compress lz4, lz4-v2)
	algOther           // a v2 code OpenVPN defines but never sends (LZO v2, Snappy, zstd)
)

// unframe removes f's header from a decrypted payload (in place) and
// returns the IP packet or ping/OCC message, or, for a payload the peer
// compressed, the compressed data and its algorithm; ErrFraming for an
// unknown header.
func (f Framing) unframe(p []byte) ([]byte, algorithm, error) {
	if len(p) == 0 {
		return p, algNone, nil
	}
	switch f {
	case FramingLZO:
		switch p[0] {
		case noCompressByte:
			return p[1:], algNone, nil
		case lzoCompressByte:
			return p[1:], algLZO, nil
		}
		return nil, algNone, ErrFraming
	case FramingSwap:
		c := p[0]
		p[0] = p[len(p)-1]
		p = p[:len(p)-1]
		switch c {
		case noCompressSwap:
			return p, algNone, nil
		case lz4CompressByte:
			return p, algLZ4, nil
		}
		return nil, algNone, ErrFraming
	case FramingV2:
		if p[0] != v2Indicator {
			return p, algNone, nil
		}
		if len(p) < 2 {
			return nil, algNone, ErrFraming
		}
		switch {
		case p[1] == v2Uncompressed:
			return p[2:], algNone, nil
		case p[1] == v2LZ4:
			return p[2:], algLZ4, nil
		case p[1] <= v2LastAlgorithm:
			return p[2:], algOther, nil
		}
		return nil, algNone, ErrFraming
	}
	return p, algNone, nil
}
