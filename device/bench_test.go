package device

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn/conntest"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

// benchPair is an established pair of devices for pipeline benchmarks.
func benchPair(b *testing.B, ref bool) *pair {
	b.Helper()
	p := &pair{}
	p.nw, p.ba, p.bb = conntest.NewPair()
	p.ta, p.tb = memtun.New("a", 1420), memtun.New("b", 1420)
	p.a = newDevice(p.ta, p.ba, Options{}, nil, ref)
	p.b = newDevice(p.tb, p.bb, Options{}, nil, ref)
	b.Cleanup(func() { p.a.Close(); p.b.Close() })
	var err error
	if p.ka, err = noise.GeneratePrivateKey(); err != nil {
		b.Fatal(err)
	}
	if p.kb, err = noise.GeneratePrivateKey(); err != nil {
		b.Fatal(err)
	}
	if err := p.a.Up(); err != nil {
		b.Fatal(err)
	}
	if err := p.b.Up(); err != nil {
		b.Fatal(err)
	}
	epA, epB := p.ba.Addr(), p.bb.Addr()
	if err := p.a.Configure(connectConfig(p.ka, p.kb.PublicKey(), epB, "10.0.0.2/32")); err != nil {
		b.Fatal(err)
	}
	if err := p.b.Configure(connectConfig(p.kb, p.ka.PublicKey(), epA, "10.0.0.1/32")); err != nil {
		b.Fatal(err)
	}
	// Establish the session with one packet.
	pkt := ipPacket(ipA4, ipB4, []byte("hello"))
	p.ta.Inject(pkt)
	select {
	case <-p.tb.Outbound():
	case <-time.After(5 * time.Second):
		b.Fatal("no handshake")
	}
	// Warm the buffer pools: steady state must not allocate.
	big := ipPacket(ipA4, ipB4, make([]byte, benchPayload))
	var got atomic.Int64
	p.tb.SetWriteHook(func(pkts [][]byte, off int) { got.Add(int64(len(pkts))) })
	const warm = 32768
	for i := 0; i < warm; i++ {
		p.ta.Inject(big)
	}
	deadline := time.Now().Add(10 * time.Second)
	for got.Load() < warm*9/10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond)
	p.tb.SetWriteHook(nil)
	return p
}

const benchPayload = 1420 - 28 // a full-MTU IPv4/UDP packet

// BenchmarkSendPipeline measures TUN read -> route -> nonce -> parallel
// seal -> per-peer order -> Bind.Send, per packet. Datagrams are counted
// and dropped at the in-memory network.
func BenchmarkSendPipeline(b *testing.B) {
	for _, ref := range []bool{false, true} {
		b.Run(fmt.Sprintf("refmode=%v", ref), func(b *testing.B) {
			p := benchPair(b, ref)
			var sent atomic.Int64
			from := p.ba.Addr()
			p.nw.SetHook(func(dg conntest.Datagram) conntest.Action {
				if dg.From == from && len(dg.Data) > noise.MessageTransportOverhead {
					sent.Add(1)
				}
				return conntest.Drop
			})
			pkt := ipPacket(ipA4, ipB4, make([]byte, benchPayload))
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				p.ta.Inject(pkt)
			}
			for sent.Load() < int64(b.N) {
				time.Sleep(50 * time.Microsecond)
			}
		})
	}
}

// BenchmarkReceivePipeline measures Bind receive -> index lookup ->
// parallel open -> per-peer order, replay, crypto-routing -> TUN write,
// per packet. The datagrams are sealed outside the timed region.
func BenchmarkReceivePipeline(b *testing.B) {
	p := benchPair(b, false)
	var delivered atomic.Int64
	p.tb.SetWriteHook(func(pkts [][]byte, off int) { delivered.Add(int64(len(pkts))) })
	kp := peerOf(p.a, p.kb).keypairs.current.Load()
	plain := ipPacket(ipA4, ipB4, make([]byte, benchPayload))
	const chunk = 1024
	msgs := make([][]byte, chunk)
	for i := range msgs {
		msgs[i] = make([]byte, 0, len(plain)+noise.MessageTransportOverhead+16)
	}
	nonce := make([]byte, 12)
	from, to := p.ba.Addr(), p.bb.Addr()
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(chunk, b.N-done)
		b.StopTimer()
		for i := 0; i < n; i++ {
			ctr := kp.sendNonce.Add(1) - 1
			m := msgs[i][:noise.MessageTransportHeaderSize]
			noise.PutTransportHeader(m, kp.remoteIndex, ctr)
			binary.LittleEndian.PutUint64(nonce[4:], ctr)
			msgs[i] = kp.send.Seal(m, nonce, plain, nil)
		}
		b.StartTimer()
		target := delivered.Load() + int64(n)
		for i := 0; i < n; i++ {
			p.nw.Inject(from, to, msgs[i])
		}
		for delivered.Load() < target {
			time.Sleep(20 * time.Microsecond)
		}
		done += n
	}
}

// BenchmarkRoundTripPipeline moves packets from A's TUN to B's TUN:
// both pipelines and the in-memory network, per packet.
func BenchmarkRoundTripPipeline(b *testing.B) {
	p := benchPair(b, false)
	var delivered atomic.Int64
	p.tb.SetWriteHook(func(pkts [][]byte, off int) { delivered.Add(int64(len(pkts))) })
	pkt := ipPacket(ipA4, ipB4, make([]byte, benchPayload))
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p.ta.Inject(pkt)
		if i%512 == 511 {
			// Do not outrun the receiver's socket queue.
			for delivered.Load() < int64(i-1024) {
				time.Sleep(20 * time.Microsecond)
			}
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for delivered.Load() < int64(b.N)*99/100 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Microsecond)
	}
}

// BenchmarkSendPipelinePeers sends round-robin to several peers at once,
// where the locked path's per-batch device lock and endpoint mutexes are
// shared by all peer senders.
func BenchmarkSendPipelinePeers(b *testing.B) {
	const peers = 4
	for _, ref := range []bool{false, true} {
		b.Run(fmt.Sprintf("peers=%d/refmode=%v", peers, ref), func(b *testing.B) {
			nw := conntest.NewNetwork()
			hubTun := memtun.New("hub", 1420)
			hubBind := nw.NewBind(netip.MustParseAddr("192.0.2.1"))
			hub := newDevice(hubTun, hubBind, Options{}, nil, ref)
			b.Cleanup(hub.Close)
			hubKey, _ := noise.GeneratePrivateKey()
			if err := hub.Up(); err != nil {
				b.Fatal(err)
			}
			hubEP := hubBind.Addr()
			req := &Config{PrivateKey: ptr(hubKey)}
			var pkts [][]byte
			var tuns []*memtun.Device
			for i := 0; i < peers; i++ {
				k, _ := noise.GeneratePrivateKey()
				ip := netip.AddrFrom4([4]byte{10, 0, 1, byte(i + 1)})
				tn := memtun.New("s", 1420)
				bd := nw.NewBind(netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)}))
				d := NewDevice(tn, bd, Options{})
				b.Cleanup(d.Close)
				if err := d.Up(); err != nil {
					b.Fatal(err)
				}
				if err := d.Configure(&Config{PrivateKey: ptr(k), Peers: []PeerConfig{{
					PublicKey: hubKey.PublicKey(), Endpoint: &hubEP, AllowedIPs: prefixes("10.0.0.1/32"),
				}}}); err != nil {
					b.Fatal(err)
				}
				ep := bd.Addr()
				req.Peers = append(req.Peers, PeerConfig{PublicKey: k.PublicKey(), Endpoint: &ep,
					AllowedIPs: prefixes(netip.PrefixFrom(ip, 32).String())})
				pkts = append(pkts, ipPacket(netip.MustParseAddr("10.0.0.1"), ip, make([]byte, benchPayload)))
				tuns = append(tuns, tn)
			}
			if err := hub.Configure(req); err != nil {
				b.Fatal(err)
			}
			for i, tn := range tuns { // establish every session before timing
				hubTun.Inject(pkts[i])
				select {
				case <-tn.Outbound():
				case <-time.After(5 * time.Second):
					b.Fatal("no handshake")
				}
			}
			var sent atomic.Int64
			nw.SetHook(func(dg conntest.Datagram) conntest.Action {
				if dg.From == hubEP && len(dg.Data) > noise.MessageTransportOverhead {
					sent.Add(1)
				}
				return conntest.Drop
			})
			// Warm the pools.
			for i := 0; i < 32768; i++ {
				hubTun.Inject(pkts[i%peers])
			}
			for sent.Load() < 32768*9/10 {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(10 * time.Millisecond)
			start := sent.Load()
			b.SetBytes(int64(len(pkts[0])))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				hubTun.Inject(pkts[i%peers])
			}
			for sent.Load()-start < int64(b.N) {
				time.Sleep(50 * time.Microsecond)
			}
		})
	}
}
