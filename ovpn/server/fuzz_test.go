package server

import (
	"net/netip"
	"testing"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// Arbitrary datagrams from an unknown address must never create a client
// (only an acknowledged cookie does), and no input may panic the control
// session or the data path.
func FuzzServerPacket(f *testing.F) {
	reset, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.HardResetClientV2, Session: wire.SessionID{1}})
	ack, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.AckV1, Session: wire.SessionID{1}, NumAcks: 1, Remote: wire.SessionID{9}})
	ctl, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.ControlV1, Session: wire.SessionID{2}, NumAcks: 2, Remote: wire.SessionID{3}, ID: 1, Payload: []byte{0x16, 3, 1}})
	soft, _ := wire.AppendControl(nil, &wire.ControlPacket{Op: wire.SoftResetV1, KeyID: 1, Session: wire.SessionID{2}, ID: 0})
	for _, seed := range [][]byte{reset, ack, ctl, soft, {0x48, 0, 0, 0, 0, 0, 0, 0, 1}, {0x30}, {}} {
		f.Add(seed)
	}
	fx := newFixture(f)
	s, err := New(fx.serverConfig(UDP), Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	from := netip.MustParseAddrPort("127.0.0.1:9")
	buf := make([]byte, 70000)
	f.Fuzz(func(t *testing.T, pkt []byte) {
		if len(pkt) == 0 || len(pkt) > 65535 {
			return
		}
		cs, _ := control.NewServerChannel(control.ChannelConfig{Send: func([]byte) error { return nil },
			OnSoftReset: func(*control.KeyState) {}}, wire.SessionID{3}, wire.SessionID{2}, true)
		defer cs.Close()
		_ = cs.HandlePacket(pkt)
		cs.Flush()
		op, _ := wire.Header(pkt[0])
		if op.IsData() {
			s.udpData(from, buf[:copy(buf[:65535], pkt)], nil)
			ch := data.NewChannel(0)
			_, _, _ = ch.Decrypt(buf[:copy(buf[:65535], pkt)])
			return
		}
		s.udpUnknown(from, pkt)
		if n := s.peerCount(); n != 0 {
			t.Fatalf("a datagram from an unknown address created %d client(s)", n)
		}
	})
}
