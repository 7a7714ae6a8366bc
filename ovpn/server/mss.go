package server

// MSS clamping on the server: each client's data channel lowers the MSS
// of every TCP SYN it carries, both ways, to what mssfix leaves room for
// with that client's cipher, framing and transport (ovpn/data's mss.go).
// Without an mssfix line it is OpenVPN 2.6's default: mssfix 1492 mtu,
// or, with a tun-mtu other than 1500, `mssfix TUN-MTU fixed` (TCP
// packets no larger than the TUN MTU).

import (
	"strings"

	"github.com/wirelane/wirelane/ovpn/data"
)

// mssFix is the mssfix setting in force under c.
func (c *Config) mssFix() data.MSSFix {
	if !c.MSSFixSet && c.MTU != 0 && c.MTU != 1500 {
		return data.MSSFix{Max: c.MTU, Fixed: true}
	}
	return c.MSS()
}

// mssFor is the MSS clamp of p's data channel with cipher c under cfg; 0
// is off.
func (s *Server) mssFor(p *peer, cfg *Config, c data.Cipher, dataV2 bool) int {
	fr := data.Frame{Cipher: c, DataV2: dataV2, Framing: cfg.Compress, TCP: strings.HasPrefix(p.tx.name(), "TCP")}
	if a := p.addr.Load(); a != nil {
		fr.IPv6 = a.Addr().Unmap().Is6()
	}
	if !c.AEAD() && s.dataAuth != nil {
		fr.Digest = s.dataAuth().Size()
	}
	return cfg.mssFix().MSS(fr)
}
