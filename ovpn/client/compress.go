package client

// Compression on the client: nothing is ever compressed on send; what the
// server compressed is decompressed under allow-compression asym (or
// yes, treated as asym) and dropped under no, the default (as OpenVPN
// 2.6). Both outcomes are counted in Stats, and the first drop of a
// session is reported once.

import (
	"errors"

	"github.com/wirelane/wirelane/ovpn/data"
)

// decompressMax bounds a decompressed packet from the server: the
// tun-mtu the client announces in its options string.
const decompressMax = 1500

// newDataChannel is the data channel for framing, decompressing when the
// file's allow-compression says so.
func (s *Session) newDataChannel(peerID uint32, framing data.Framing) *data.Channel {
	ch := data.NewFramedChannel(peerID, framing)
	if framing != data.FramingNone && s.cfg.Decompresses() {
		ch.SetDecompressor(&data.Decompressor{Max: decompressMax, Decompressed: &s.decompressed, Failed: &s.decompressFailed})
	}
	return ch
}

// warnPushedCompression logs a pushed compression algorithm.
func (s *Session) warnPushedCompression(option string) {
	if s.cfg.Decompresses() {
		s.log.Warn("the server pushed compression: nothing is compressed on send; what the server compresses is decompressed (allow-compression "+s.cfg.AllowCompression+")", "option", option)
		return
	}
	s.log.Warn("the server pushed compression: used as framing only; nothing is compressed, and compressed packets from the server are dropped (allow-compression asym in this file decompresses them)", "option", option)
}

// Messages for the first compressed packet of a session that could not
// be delivered.
const (
	msgCompressedRefused = "the server sends compressed packets; they are dropped (allow-compression is no): set allow-compression asym in this file to decompress them, or allow-compression no or compress stub-v2 on the server"
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
