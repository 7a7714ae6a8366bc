package device

// The transfer counters (wg show's "transfer", UAPI rx_bytes/tx_bytes) are
// kept as the kernel keeps them: every message attributed to the peer
// counts, whole, in the direction it went: handshake initiations (148
// bytes) and responses (92) as well as transport messages (header, padded
// ciphertext, tag). Cookie replies are not attributed to a peer by the
// kernel (it consumes a received one before counting, and sends one to an
// address, not a peer), so they count nowhere. The kernel's self-test
// checks the figures after ten pings of 84-byte packets: the pinging side
// has sent 1428 bytes (initiation + 10 x 128) and received 1372
// (response + 10 x 128).

import (
	"net/netip"
	"testing"
)

func TestTransferCountsLikeTheKernel(t *testing.T) {
	p := newPair(t, pairOpts{fakeClock: true}) // no keepalive timer fires
	// Ten echo requests from A and ten replies from B, each an 84-byte
	// IPv4 packet like ping's default (padded to 96: 128 on the wire).
	for i := 0; i < 10; i++ {
		p.send(p.ta, p.tb, ipA4, ipB4, string(make([]byte, 55))+string(rune(i)))
		p.send(p.tb, p.ta, ipB4, ipA4, string(make([]byte, 55))+string(rune(i)))
	}
	const initiation, response, echo = 148, 92, 128
	// A sender counts a message once its send returns, which can be just
	// after the receiver has delivered it: wait for the last count.
	waitFor(t, "the last messages counted as sent", func() bool {
		return status(t, p.a).peers[0].TxBytes >= initiation+10*echo && status(t, p.b).peers[0].TxBytes >= response+10*echo
	})
	a, b := status(t, p.a).peers[0], status(t, p.b).peers[0]
	if a.TxBytes != initiation+10*echo || a.RxBytes != response+10*echo {
		t.Errorf("initiator: tx %d rx %d, want tx %d rx %d (the kernel's figures)",
			a.TxBytes, a.RxBytes, initiation+10*echo, response+10*echo)
	}
	if b.TxBytes != response+10*echo || b.RxBytes != initiation+10*echo {
		t.Errorf("responder: tx %d rx %d, want tx %d rx %d",
			b.TxBytes, b.RxBytes, response+10*echo, initiation+10*echo)
	}
}

// TestTransferSkipsDroppedContent: a transport message that authenticates
// but carries a packet the peer may not send (a source outside its
// allowed IPs, a malformed inner packet) does not count, as in the
// kernel; a keepalive does.
func TestTransferSkipsDroppedContent(t *testing.T) {
	p := newPair(t, pairOpts{fakeClock: true})
	p.send(p.ta, p.tb, ipA4, ipB4, "establish")
	before := status(t, p.b).peers[0].RxBytes
	spoofed := ipPacket(netip.MustParseAddr("10.9.9.9"), ipB4, make([]byte, 56))
	if err := p.ta.Inject(spoofed); err != nil {
		t.Fatal(err)
	}
	// A's allowed IPs for B route by destination, so the spoofed source
	// leaves A and is dropped by B's crypto-routing.
	p.send(p.ta, p.tb, ipA4, ipB4, string(make([]byte, 56)))
	got := status(t, p.b).peers[0].RxBytes - before
	if got != 128 {
		t.Errorf("B counted %d bytes for one delivered and one dropped message, want 128", got)
	}
	peerOf(p.a, p.kb).sendKeepalive()
	waitFor(t, "the keepalive counted", func() bool {
		return status(t, p.b).peers[0].RxBytes-before == 128+32
	})
}
