package conn

// Benchmarks of the send path, noref beside ref (invariant 7). One op is
// one batch of benchBatch datagrams of benchSize bytes.
//
//	go test -run '^$' -bench Send -benchmem -benchtime 100ms -cpu 1,2,4,8 ./conn/
//
// Every sending goroutine has its own Sender, as in the device. "loopback"
// sends through a real StdBind to a UDP socket on 127.0.0.1 that
// nobody reads (the kernel drops past its buffer, after doing the send
// work); "sink" sends to a Bind that only reads the route, to isolate what
// the route costs.

import (
	"net"
	"net/netip"
	"sync"
	"testing"

	"golang.org/x/net/ipv4"
)

const (
	benchBatch = 32
	benchSize  = 1200
)

// sinkBind is a Bind whose Send touches the route like a real send would
// and writes nothing.
type sinkBind struct{ n int }

func (*sinkBind) Open(uint16) ([]ReceiveFunc, uint16, error) { return nil, 0, nil }
func (*sinkBind) Close() error                               { return nil }
func (*sinkBind) SetMark(uint32) error                       { return nil }
func (*sinkBind) BatchSize() int                             { return IdealBatchSize }
func (s *sinkBind) Send(bufs [][]byte, r *Route) error {
	if r.saLen == 0 || len(bufs) == 0 {
		return ErrNoRoute
	}
	return nil
}

type benchTarget struct {
	name string
	bind func(b *testing.B) (Bind, *RCU, netip.AddrPort)
}

func benchTargets() []benchTarget {
	return []benchTarget{
		{"loopback", func(b *testing.B) (Bind, *RCU, netip.AddrPort) {
			sb, _, _ := openBind(b, Options{DisableGRO: true, DisableSourceWatch: true})
			c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { c.Close() })
			return sb, sb.RCU(), c.LocalAddr().(*net.UDPAddr).AddrPort()
		}},
		{"sink", func(b *testing.B) (Bind, *RCU, netip.AddrPort) {
			return &sinkBind{}, new(RCU), netip.MustParseAddrPort("192.0.2.1:51820")
		}},
	}
}

// lockedEndpoint is the conventional locked endpoint the device's ref mode
// keeps (device/refmode.go), for the "ref" side of BenchmarkSend: the
// device read lock around the batch, the endpoint mutex around the copy, a
// Route built per batch.
type lockedEndpoint struct {
	mu  sync.Mutex // guards ep and gen
	ep  Endpoint
	gen uint64
}

func (e *lockedEndpoint) send(tx Sender, dev *sync.RWMutex, bufs [][]byte) error {
	dev.RLock()
	defer dev.RUnlock()
	e.mu.Lock()
	ep, gen := e.ep, e.gen
	e.mu.Unlock()
	return tx.Send(bufs, NewRoute(ep, gen))
}

func BenchmarkSend(b *testing.B) {
	for _, tgt := range benchTargets() {
		for _, sticky := range []bool{false, true} {
			name := tgt.name
			if sticky {
				name += "/sticky"
			}
			b.Run(name+"/noref", func(b *testing.B) {
				bind, rcu, dst := tgt.bind(b)
				var cache RouteCache
				ep := Endpoint{Dst: dst}
				if sticky {
					ep.Src, ep.SrcIfindex = netip.MustParseAddr("127.0.0.1"), 1
				}
				cache.Set(ep)
				b.SetBytes(benchBatch * benchSize)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					rd := rcu.NewReader()
					defer rd.Release()
					tx, release := NewSender(bind)
					defer release()
					bufs := makeBufs(benchBatch, benchSize)
					for pb.Next() {
						rd.Enter()
						if err := tx.Send(bufs, cache.Borrow()); err != nil {
							b.Error(err)
						}
						rd.Exit()
					}
				})
			})
			b.Run(name+"/ref", func(b *testing.B) {
				bind, _, dst := tgt.bind(b)
				var dev sync.RWMutex
				ep := Endpoint{Dst: dst}
				if sticky {
					ep.Src, ep.SrcIfindex = netip.MustParseAddr("127.0.0.1"), 1
				}
				e := &lockedEndpoint{ep: ep, gen: 1}
				b.SetBytes(benchBatch * benchSize)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					tx, release := NewSender(bind)
					defer release()
					bufs := makeBufs(benchBatch, benchSize)
					for pb.Next() {
						if err := e.send(tx, &dev, bufs); err != nil {
							b.Error(err)
						}
					}
				})
			})
		}
	}
}

// BenchmarkXNetWriteBatch measures x/net's WriteBatch on the same batch,
// the path the raw sendmmsg replaces (see its allocations).
func BenchmarkXNetWriteBatch(b *testing.B) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	d, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	pc := ipv4.NewPacketConn(c)
	r := NewRoute(Endpoint{Dst: d.LocalAddr().(*net.UDPAddr).AddrPort()}, 1)
	msgs := make([]ipv4.Message, benchBatch)
	bufs := makeBufs(benchBatch, benchSize)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{bufs[i]}
		msgs[i].Addr = r.UDPAddr()
	}
	b.SetBytes(benchBatch * benchSize)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := pc.WriteBatch(msgs, 0); err != nil {
			b.Fatal(err)
		}
	}
}
