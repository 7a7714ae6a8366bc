package server

import (
	"bytes"
	"crypto/rand"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/keys"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// A client without DATA_V2 (no IV_PROTO bit 2) gets no peer-id and its
// DATA_V1 packets are matched by address, both ways.
func TestDataV1ClientByAddress(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	sock, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	from := sock.LocalAddr().(*net.UDPAddr).AddrPort()
	p, err := s.newPeer(from, wire.SessionID{1}, wire.SessionID{2}, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.setup("v1client", parsePeerInfo("IV_PROTO=0\nIV_NCP=2\n"), ""); err != nil {
		t.Fatal(err)
	}
	opts := strings.Join(p.pushOptions(), ",")
	if strings.Contains(opts, "peer-id") || strings.Contains(opts, "protocol-flags") || !strings.Contains(opts, "cipher AES-256-GCM") {
		t.Fatalf("push options for a 2.3-style client: %s", opts)
	}
	var m keys.Material
	rand.Read(m[:])
	mk := func(client bool) *data.Key {
		send, recv := m.Split(32, client)
		k, err := data.NewKey(0, data.AES256GCM, send.Key, send.ImplicitIV, recv.Key, recv.ImplicitIV)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	p.data.Load().Install(mk(false))
	cli := data.NewChannel(wire.UndefinedPeerID)
	cli.Install(mk(true))

	// Client to host.
	src := p.vaddrLoad()
	pkt := testnet.ICMPEcho(8, src, s.TunnelAddress().Addr(), 1, 1, []byte("v1"))
	buf := make([]byte, data.Headroom+len(pkt)+data.Tailroom)
	enc, err := cli.EncryptPayload(buf, pkt)
	if err != nil {
		t.Fatal(err)
	}
	if op, _ := wire.Header(enc[0]); op != wire.DataV1 {
		t.Fatalf("client sent %v", op)
	}
	s.udpData(from, enc, nil)
	got := make([]byte, 2048)
	n, err := s.ReadPacket(got)
	if err != nil || !bytes.Equal(got[:n], pkt) {
		t.Fatalf("host side got %x %v", got[:n], err)
	}
	// The same packet from another address is not this client's.
	enc, _ = cli.EncryptPayload(buf, pkt)
	s.udpData(netip.MustParseAddrPort("127.0.0.1:9"), enc, nil)
	if s.Stats().BadData.Load() != 1 {
		t.Fatalf("bad data count %d", s.Stats().BadData.Load())
	}
	// Host to client: a DATA_V1 packet arrives at the client's socket.
	reply := testnet.ICMPEcho(0, s.TunnelAddress().Addr(), src, 1, 1, []byte("v1"))
	if err := s.WritePacket(reply); err != nil {
		t.Fatal(err)
	}
	rb := make([]byte, 2048)
	var k int
	for {
		sock.SetReadDeadline(time.Now().Add(2 * time.Second))
		if k, err = sock.Read(rb); err != nil {
			t.Fatal(err)
		}
		op, _ := wire.Header(rb[0])
		if op.IsData() {
			if op != wire.DataV1 {
				t.Fatalf("server sent %v", op)
			}
			break
		}
		// Control packets (the acknowledgement of the reset) come too.
	}
	plain, kind, err := cli.Decrypt(rb[:k])
	if err != nil || kind != data.KindPacket || !bytes.Equal(plain, reply) {
		t.Fatalf("client decrypted %x kind %v err %v", plain, kind, err)
	}
}
