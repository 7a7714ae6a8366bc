package device

import (
	"net/netip"
	"testing"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
)

// FuzzInboundDatagram feeds arbitrary datagrams to an established device:
// through the handshake handler directly, through the inner-packet parser,
// and through the whole receive path. Nothing may panic, and nothing
// unauthenticated may reach the TUN device.
func FuzzInboundDatagram(f *testing.F) {
	p := newPair(f, pairOpts{})
	init := floodInitiations(f, p.kb.PublicKey(), 1)[0]
	f.Add(init)
	f.Add(make([]byte, noise.MessageResponseSize))
	f.Add(make([]byte, noise.MessageCookieReplySize))
	f.Add([]byte{4, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9})
	f.Add(ipPacket(ipA4, ipB4, []byte("inner")))
	f.Add(ipPacket(ipA6, ipB6, []byte("inner6")))
	f.Add([]byte{0x45})
	from := netip.MustParseAddrPort("198.51.100.3:3")
	f.Fuzz(func(t *testing.T, data []byte) {
		if handshakeSizeOK(data) {
			p.b.handleHandshake(data, conn.Endpoint{Dst: from})
		}
		if src, l, ok := innerSource(data); ok && (l > len(data) || (len(src) != 4 && len(src) != 16)) {
			t.Fatalf("innerSource returned length %d of %d, source %d bytes", l, len(data), len(src))
		}
		p.nw.Inject(from, p.bb.Addr(), data)
		select {
		case got := <-p.tb.Outbound():
			t.Fatalf("forged datagram delivered %x", got)
		default:
		}
	})
}
