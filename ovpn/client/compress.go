package client

// Compression on the client, as OpenVPN 2.6.14 settles it
// (config/compress.go): nothing is ever compressed on send; what the
// server compressed is decompressed when the framing in force names an
// algorithm and only stubs are not enforced (allow-compression asym or
// yes, or no allow-compression line with such a compress line), and
// dropped otherwise. A pushed algorithm while only stubs are allowed
// fails the session. Both outcomes are counted in Stats, and the first
// drop of a session is reported once.

import (
	"errors"
	"fmt"

	"github.com/wirelane/wirelane/ovpn/data"
)

// decompressMax bounds a decompressed packet from the server: the
// tun-mtu the client announces in its options string.
const decompressMax = 1500

// newDataChannel is the data channel for framing, decompressing when
// decompress says so (the framing in force names an algorithm and only
// stubs are not enforced).
func (s *Session) newDataChannel(peerID uint32, framing data.Framing, decompress bool) *data.Channel {
	ch := data.NewFramedChannel(peerID, framing)
	if framing != data.FramingNone && decompress {
		ch.SetDecompressor(&data.Decompressor{Max: decompressMax, Decompressed: &s.decompressed, Failed: &s.decompressFailed})
	}
	return ch
}

// ErrPushedCompression is the error of a session whose server pushed a
// compression algorithm while only stubs are allowed (allow-compression
// no, or no compress line at all: OpenVPN 2.6's default), which OpenVPN
// 2.6 refuses as well ("server pushed compression settings that are not
// allowed and will result in a non-working connection").
var ErrPushedCompression = errors.New("the server pushed compression, which is not allowed (allow-compression is no, or by default without a compress or comp-lzo line)")

// pushedCompressionRefused is ErrPushedCompression for option, with the
// fix.
func pushedCompressionRefused(option string) error {
	return fmt.Errorf("%w: %q; add allow-compression asym to the file to accept it (what the server compresses is then decompressed; nothing sent is compressed), or have the server push compress stub-v2", ErrPushedCompression, option)
}

// warnPushedCompression logs a pushed compression algorithm (accepted:
// only stubs are not enforced).
func (s *Session) warnPushedCompression(option string) {
	s.log.Warn("the server pushed compression: nothing is compressed on send; what the server compresses is decompressed (allow-compression asym)", "option", option)
}

// Messages for the first compressed packet of a session that could not
// be delivered.
const (
	msgCompressedRefused = "the server sends compressed packets; they are dropped (the framing in force is a stub, or allow-compression is no): give this file the server's compress or comp-lzo line with allow-compression asym to decompress them, or have the server stop compressing (allow-compression no or compress stub-v2 there)"
	msgDecompressFailed  = "a compressed packet from the server could not be decompressed (corrupt, or larger than the 1500-byte TUN MTU); such packets are dropped and counted"
)

// dropCompressed counts a packet the server compressed that was refused
// (data.ErrCompressed; decompression failures are counted by the
// channel's Decompressor) and says so the first time.
func (s *Session) dropCompressed(err error) {
	msg := msgDecompressFailed
	if errors.Is(err, data.ErrCompressed) {
		s.droppedCompressed.Add(1)
		msg = msgCompressedRefused
	}
	if !s.compressWarned.Swap(true) {
		s.log.Warn(msg)
		if s.opts.OnWarning != nil {
			s.opts.OnWarning(msg)
		}
	}
}
