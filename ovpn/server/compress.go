package server

// Compression on the server, as OpenVPN 2.6.14 settles it
// (config/compress.go): nothing is ever compressed on send; what a
// client compressed is decompressed, bounded by tun-mtu, when the
// server's compress or comp-lzo line names an algorithm and only stubs
// are not enforced (allow-compression asym, yes treated as asym, or no
// allow-compression line), and dropped under a stub line or
// allow-compression no. Both are counted in Stats, and the first
// undeliverable compressed packet of each client is reported once.

import (
	"errors"
	"fmt"

	"github.com/wirelane/wirelane/ovpn/data"
)

// newDataChannel is a client's data channel under cfg: its compression
// framing, and a decompressor sharing the server's counters when cfg
// decompresses (config.Common.Decompresses).
func (s *Server) newDataChannel(peerID uint32, cfg *Config) *data.Channel {
	ch := data.NewFramedChannel(peerID, cfg.Compress)
	if cfg.Compress != data.FramingNone && cfg.Decompresses() {
		ch.SetDecompressor(&data.Decompressor{Max: cfg.MTU, Decompressed: &s.stats.Decompressed, Failed: &s.stats.DecompressFailed})
	}
	return ch
}

// msgCompressedRefused is the warning for a client's first compressed
// packet under a stub framing or allow-compression no.
const msgCompressedRefused = "the client sends compressed packets; they are dropped (the server's framing is a stub, or allow-compression is no): give the server the client's compress or comp-lzo line, without allow-compression no, to decompress them, or have the client stop compressing (allow-compression no or compress stub-v2 in its file)"

// dropCompressed counts a packet the client compressed that was refused
// (data.ErrCompressed; decompression failures are counted by the
// channel's Decompressor) and says so the first time for that client.
func (s *Server) dropCompressed(p *peer, err error) {
	refused := errors.Is(err, data.ErrCompressed)
	if refused {
		s.stats.Compressed.Add(1)
	}
	if !p.compressWarned.Swap(true) {
		msg := msgCompressedRefused
		if !refused {
			msg = fmt.Sprintf("a compressed packet from the client could not be decompressed (corrupt, or larger than tun-mtu %d); such packets are dropped and counted", s.live.Load().cfg.MTU)
		}
		s.log.Warn(msg, "client", p.label(), "framing", p.data.Load().Framing().String())
		if s.opts.Events != nil {
			s.opts.Events(Event{Kind: ClientWarning, Client: p.info(), Reason: msg})
		}
	}
}
