package client

// MSS clamping on the client: the data channel lowers the MSS of every
// TCP SYN it carries, both ways, to what the file's mssfix leaves room
// for with the negotiated cipher, framing and transport (ovpn/data's
// mss.go). Without an mssfix line it is OpenVPN 2.6's default: 1492 mtu,
// or TUN-MTU fixed with a tun-mtu other than 1500 in the file
// (config.ClientMSS). mssfix is not a pushable option in OpenVPN 2.6.

import (
	"strings"

	"github.com/wirelane/wirelane/ovpn/data"
)

// mssFor is the MSS clamp of a data channel with cipher c, framing f and
// a peer-id (dataV2) over the session's transport; 0 is off.
func (s *Session) mssFor(c data.Cipher, f data.Framing, dataV2 bool) int {
	name := s.tr.name()
	fr := data.Frame{Cipher: c, DataV2: dataV2, Framing: f,
		TCP: strings.HasPrefix(name, "TCP"), IPv6: strings.Contains(name, "v6")}
	if !c.AEAD() && s.kx.Auth != nil {
		fr.Digest = s.kx.Auth().Size()
	}
	return s.cfg.ClientMSS().MSS(fr)
}
