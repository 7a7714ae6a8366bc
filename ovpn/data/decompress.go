package data

// Decompression of what an old peer compressed (`allow-compression asym`,
// or `yes`, which Wirelane treats as asym): LZO1X for comp-lzo and
// compress lzo (lzo1x.go), LZ4 blocks for compress lz4 and lz4-v2
// (github.com/pierrec/lz4/v4). Nothing is ever compressed on send.
//
// The output goes into the received packet's spare capacity, right after
// the compressed data (the receive buffers are 64 KiB, so a packet of a
// few hundred bytes leaves ample room): no copy and no allocation. It is
// bounded by the Decompressor's Max (the TUN MTU) and by that room; a
// payload that would be larger (a decompression bomb) or that is not
// valid compressed data is dropped with ErrDecompress and counted.

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/pierrec/lz4/v4"
)

// DefaultDecompressMax is the decompressed-size limit of a Decompressor
// whose Max is not set: OpenVPN's default tun-mtu.
const DefaultDecompressMax = 1500

// ErrDecompress is a compressed payload that could not be decompressed:
// not valid LZO1X or LZ4 data, larger than the limit once decompressed
// (ErrDecompressSize), or an algorithm OpenVPN never sends. It is dropped
// (and counted in Decompressor.Failed); it authenticated.
var ErrDecompress = errors.New("data: a compressed packet could not be decompressed (corrupt, larger than the TUN MTU, or an unknown algorithm): dropped")

// ErrDecompressSize is the ErrDecompress of a payload that would
// decompress to more than the limit.
var ErrDecompressSize = fmt.Errorf("%w (larger than the TUN MTU)", ErrDecompress)

// Decompressor is the receive-side decompression of channels
// (SetDecompressor). It is read-only once handed to a channel; one may
// serve many channels, and its counters may be shared.
type Decompressor struct {
	// Max bounds a decompressed payload (the TUN MTU);
	// DefaultDecompressMax when 0 or less.
	Max int
	// Decompressed and Failed, when not nil, count payloads
	// decompressed and payloads dropped with ErrDecompress.
	Decompressed, Failed *atomic.Uint64
}

// SetDecompressor makes c decompress what the peer compressed, instead of
// refusing it with ErrCompressed. Call it before c is shared with other
// goroutines (before any Decrypt).
func (c *Channel) SetDecompressor(d *Decompressor) { c.decomp = d }

// Decompresses reports whether c decompresses received payloads.
func (c *Channel) Decompresses() bool { return c.decomp != nil }

// decompress decompresses p, compressed by alg, into p's spare capacity.
func (c *Channel) decompress(p []byte, alg algorithm) ([]byte, error) {
	d := c.decomp
	if d == nil {
		return nil, ErrCompressed
	}
	n, err := decompressInto(p[len(p):cap(p)], p, alg, d.Max)
	if err != nil {
		if d.Failed != nil {
			d.Failed.Add(1)
		}
		return nil, err
	}
	if d.Decompressed != nil {
		d.Decompressed.Add(1)
	}
	return p[len(p) : len(p)+n], nil
}

// decompressInto decompresses src into dst, at most limit bytes
// (DefaultDecompressMax when limit <= 0), and returns the length. An
// empty result is an error, as in OpenVPN.
func decompressInto(dst, src []byte, alg algorithm, limit int) (int, error) {
	if limit <= 0 {
		limit = DefaultDecompressMax
	}
	if len(dst) > limit {
		dst = dst[:limit]
	}
	var n int
	switch alg {
	case algLZO:
		var err error
		if n, err = lzo1xDecompress(dst, src); err != nil {
			return 0, err
		}
	case algLZ4:
		var err error
		if n, err = lz4.UncompressBlock(src, dst); err != nil {
			return 0, ErrDecompress // the library does not tell junk from a short buffer
		}
	default:
		return 0, ErrDecompress
	}
	if n <= 0 {
		return 0, ErrDecompress
	}
	return n, nil
}
