package client

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/internal/rawstream"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// transport moves whole OpenVPN packets to and from the server.
//
// send takes the packet buf[off:off+n]; the two bytes before off are free
// (TCP writes its length prefix there), so no transport copies.
// serve starts the receive goroutines: each takes its own rxBatch from
// newRx, calls its handle for every packet from the server (pkt has at
// least data.Tailroom spare capacity, valid only during the call), its
// flush after each receive batch (before waiting for more), and fail when
// its socket breaks.
type transport interface {
	send(buf []byte, off, n int) error
	// sendBatch sends several packets at once; each pkts[i] starts with
	// sendHeadroom free bytes followed by the packet.
	sendBatch(pkts [][]byte) error
	remote() netip.AddrPort // the server's transport address
	serve(wg *sync.WaitGroup, newRx func() *rxBatch, fail func(error))
	close() error
	name() string // "UDPv4", "TCPv4_CLIENT", ... for the options string
}

// sendHeadroom is the space every send buffer keeps before the packet.
const sendHeadroom = wire.TCPPrefixLen

// udpBatch is how many datagrams one receive call may return: with
// UDP_GRO a train of up to 64 segments is cut into separate buffers.
const udpBatch = 64

// udpTransport sends through conn.StdBind to a route borrowed from the
// session's conn.RouteCache with one atomic load per packet, like
// WireGuard peers do.
type udpTransport struct {
	bind   *conn.StdBind
	fns    []conn.ReceiveFunc
	routes conn.RouteCache
	server netip.AddrPort
	pool   sync.Pool // *[1][]byte scratch for Send
}

func newUDP(server netip.AddrPort, wrap func(func()) error) (*udpTransport, error) {
	// GRO is on: the bind cuts coalesced trains into separate buffers, so
	// each datagram keeps its own tailroom for decryption.
	t := &udpTransport{bind: conn.NewStdBindOptions(conn.Options{DisableSourceWatch: true}), server: server}
	var err error
	open := func() { t.fns, _, err = t.bind.Open(0) }
	if wrap != nil {
		if werr := wrap(open); werr != nil {
			return nil, werr
		}
	} else {
		open()
	}
	if err != nil {
		return nil, err
	}
	t.routes.Set(conn.Endpoint{Dst: server})
	t.pool.New = func() any { return new([1][]byte) }
	return t, nil
}

func (t *udpTransport) send(buf []byte, off, n int) error {
	bufs := t.pool.Get().(*[1][]byte)
	bufs[0] = buf[off : off+n]
	err := t.bind.Send(bufs[:], t.routes.Borrow())
	bufs[0] = nil
	t.pool.Put(bufs)
	return err
}

func (t *udpTransport) sendBatch(pkts [][]byte) error {
	for i := range pkts {
		pkts[i] = pkts[i][sendHeadroom:]
	}
	ep := t.routes.Borrow()
	// The bind keeps each UDP_SEGMENT message below the 64 KiB a device
	// takes whole (conn.StdBind); only its batch size bounds a Send.
	for len(pkts) > 0 {
		n := min(len(pkts), conn.IdealBatchSize)
		if err := t.bind.Send(pkts[:n], ep); err != nil {
			return err
		}
		pkts = pkts[n:]
	}
	return nil
}

func (t *udpTransport) remote() netip.AddrPort { return t.server }

func (t *udpTransport) serve(wg *sync.WaitGroup, newRx func() *rxBatch, fail func(error)) {
	for _, fn := range t.fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rx := newRx()
			const stride = maxPkt + data.Tailroom
			slab := make([]byte, udpBatch*stride)
			bufs := make([][]byte, udpBatch)
			for i := range bufs {
				bufs[i] = slab[i*stride : i*stride+maxPkt]
			}
			sizes := make([]int, udpBatch)
			eps := make([]conn.Endpoint, udpBatch)
			for {
				n, err := fn(bufs, sizes, eps)
				if err != nil {
					fail(fmt.Errorf("client: transport: %w", err))
					return
				}
				for i := 0; i < n; i++ {
					if eps[i].Dst != t.server || sizes[i] == 0 {
						continue // not from the server
					}
					// Capacity runs to the end of this buffer's stride, so
					// Decrypt has its tailroom without touching the next.
					rx.handle(slab[i*stride : i*stride+sizes[i] : (i+1)*stride])
				}
				rx.flush()
			}
		}()
	}
}

func (t *udpTransport) close() error { return t.bind.Close() }

func (t *udpTransport) name() string {
	if t.server.Addr().Unmap().Is4() {
		return "UDPv4"
	}
	return "UDPv6"
}

// tcpTransport frames packets with wire's TCP framer, over raw reads and
// writes of the connection (rawstream: no scheduler hand-off per system
// call).
type tcpTransport struct {
	c  net.Conn
	s  rawstream.Stream // over c
	w  *wire.TCPWriter  // over s
	v6 bool
}

func (t *tcpTransport) send(buf []byte, off, n int) error { return t.w.Write(buf, off, n) }

func (t *tcpTransport) sendBatch(pkts [][]byte) error { return t.w.WriteBatch(pkts) }

func (t *tcpTransport) remote() netip.AddrPort {
	if a, ok := t.c.RemoteAddr().(*net.TCPAddr); ok {
		ap := a.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

func (t *tcpTransport) serve(wg *sync.WaitGroup, newRx func() *rxBatch, fail func(error)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		rx := newRx()
		// Frames are read from a buffer, so one read system call takes
		// many; the batch is flushed before a read may wait.
		r := wire.NewTCPReader(t.s, 256<<10, maxPkt, data.Tailroom)
		for {
			if !r.Ready() {
				rx.flush()
			}
			pkt, err := r.Next()
			if err != nil {
				fail(fmt.Errorf("client: transport: %w", err))
				return
			}
			rx.handle(pkt)
		}
	}()
}

func (t *tcpTransport) close() error { return t.c.Close() }

func (t *tcpTransport) name() string {
	if t.v6 {
		return "TCPv6_CLIENT"
	}
	return "TCPv4_CLIENT"
}

// openTransport opens the socket to server, inside o.WrapSocket when
// set.
func openTransport(ctx context.Context, o *Options, server netip.AddrPort, tcp bool) (transport, error) {
	if !tcp {
		return newUDP(server, o.WrapSocket)
	}
	var c net.Conn
	var err error
	dial := func() {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", server.String())
	}
	if o.WrapSocket != nil {
		if werr := o.WrapSocket(dial); werr != nil {
			return nil, werr
		}
	} else {
		dial()
	}
	if err != nil {
		return nil, err
	}
	s := rawstream.New(c)
	return &tcpTransport{c: c, s: s, w: wire.NewTCPWriter(s), v6: server.Addr().Is6()}, nil
}
