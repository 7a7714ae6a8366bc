package server

import (
	"crypto/rand"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/keys"
	"github.com/wirelane/wirelane/ovpn/wire"
	"github.com/wirelane/wirelane/tun/memtun"
)

// benchPeer registers a client at a local sink socket with fresh data
// keys, as a finished handshake would, and returns the client's side of
// the data channel.
func benchPeer(b *testing.B, s *Server, sink *net.UDPConn, c data.Cipher) (*peer, *data.Channel) {
	b.Helper()
	var m keys.Material
	rand.Read(m[:])
	from := sink.LocalAddr().(*net.UDPAddr).AddrPort()
	p, err := s.newPeer(from, wire.SessionID{1}, wire.SessionID{2}, nil, nil, true)
	if err != nil {
		b.Fatal(err)
	}
	mk := func(client bool, peerID uint32) *data.Channel {
		send, recv := m.Split(c.KeyLen(), client)
		k, err := data.NewKey(0, c, send.Key, send.ImplicitIV, recv.Key, recv.ImplicitIV)
		if err != nil {
			b.Fatal(err)
		}
		ch := data.NewChannel(peerID)
		ch.Install(k)
		return ch
	}
	addr := netip.MustParseAddr("10.8.0.2")
	p.data.Store(mk(false, p.id))
	p.vaddr.Store(&addr)
	s.mu.Lock()
	s.byVaddr[addr] = p
	s.mu.Unlock()
	return p, mk(true, p.id)
}

func benchServer(b *testing.B) (*Server, *net.UDPConn) {
	f := newFixture(b)
	s, err := New(f.serverConfig(UDP), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	sink, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sink.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			if _, err := sink.Read(buf); err != nil {
				return
			}
		}
	}()
	return s, sink
}

// Host to client: route by destination, encrypt, one UDP send.
func BenchmarkWritePacket(b *testing.B) {
	for _, size := range []int{64, 1420} {
		b.Run(map[int]string{64: "64B", 1420: "1420B"}[size], func(b *testing.B) {
			s, sink := benchServer(b)
			benchPeer(b, s, sink, data.AES256GCM)
			pkt := testnet.ICMPEcho(8, netip.MustParseAddr("10.8.0.1"), netip.MustParseAddr("10.8.0.2"), 1, 1, make([]byte, size-28))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.WritePacket(pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Client to host: the client's encryption (outside the server) and the
// server's decryption, source check and hand-off to ReadPacket.
func BenchmarkHandleData(b *testing.B) {
	s, sink := benchServer(b)
	p, cli := benchPeer(b, s, sink, data.AES256GCM)
	go func() {
		buf := make([]byte, 65535)
		for {
			if _, err := s.ReadPacket(buf); err != nil {
				return
			}
		}
	}()
	payload := testnet.ICMPEcho(8, netip.MustParseAddr("10.8.0.2"), netip.MustParseAddr("10.8.0.1"), 1, 1, make([]byte, 1420-28))
	buf := make([]byte, data.Headroom+len(payload)+data.Tailroom)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pkt, err := cli.EncryptPayload(buf, payload)
		if err != nil {
			b.Fatal(err)
		}
		s.handleData(p, pkt, nil)
	}
	b.StopTimer()
	if bad := s.Stats().BadData.Load() + s.Stats().Spoofed.Load(); bad != 0 {
		b.Fatalf("%d packets rejected", bad)
	}
	time.Sleep(10 * time.Millisecond)
}

// Host to client in batches of 32 equal-size packets: route, encrypt, one
// sendmmsg carrying UDP_SEGMENT messages.
func BenchmarkWritePackets32x1420(b *testing.B) {
	s, sink := benchServer(b)
	benchPeer(b, s, sink, data.AES256GCM)
	pkts := make([][]byte, 32)
	for i := range pkts {
		pkts[i] = testnet.ICMPEcho(8, netip.MustParseAddr("10.8.0.1"), netip.MustParseAddr("10.8.0.2"), 1, uint16(i), make([]byte, 1420-28))
	}
	b.SetBytes(32 * 1420)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.WritePackets(pkts); err != nil {
			b.Fatal(err)
		}
	}
}

// Client to host with a TUN device attached: decryption, source check and
// the copy into the UDP reader's device batch, one device Write per 32
// packets (the device itself discards).
func BenchmarkHandleDataToTUN(b *testing.B) {
	s, sink := benchServer(b)
	p, cli := benchPeer(b, s, sink, data.AES256GCM)
	dev := memtun.New("bench", 1500)
	defer dev.Close()
	dev.SetWriteHook(func([][]byte, int) {})
	s.tun.Store(&attached{dev: dev})
	k := s.sinkFor(nil)
	payload := testnet.ICMPEcho(8, netip.MustParseAddr("10.8.0.2"), netip.MustParseAddr("10.8.0.1"), 1, 1, make([]byte, 1420-28))
	buf := make([]byte, data.Headroom+len(payload)+data.Tailroom)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		pkt, err := cli.EncryptPayload(buf, payload)
		if err != nil {
			b.Fatal(err)
		}
		s.handleData(p, pkt, k)
		if i%32 == 31 {
			s.flushTUN(k)
		}
	}
	b.StopTimer()
	if bad := s.Stats().BadData.Load() + s.Stats().Spoofed.Load() + s.Stats().TUNErrors.Load(); bad != 0 {
		b.Fatalf("%d packets rejected", bad)
	}
}
