// Package conntest provides conn.Bind implementations for tests: an
// in-memory network whose binds exchange datagrams through channels, with a
// hook that can drop, duplicate or hold back (reorder) datagrams, and a
// minimal loopback UDP bind (one datagram per call, no batching) for tests
// that talk to another implementation over real sockets.
//
//	Bind.Send --copy--> Network.hook --> destination Bind's queue (chan)
//	                                      --> ReceiveFunc (copies into bufs)
package conntest

import (
	"errors"
	"net"
	"net/netip"
	"sync"

	"github.com/wirelane/wirelane/conn"
)

// Action is what a Hook decides for one datagram.
type Action int

// Actions a Hook may return.
const (
	Pass      Action = iota // deliver it
	Drop                    // lose it
	Duplicate               // deliver it twice
	Hold                    // keep it until Network.ReleaseHeld
)

// Datagram is one datagram in flight.
type Datagram struct {
	From, To netip.AddrPort
	Data     []byte // owned by the network; a Hook must not keep it
}

// Hook inspects each datagram sent on a Network and decides its fate. It
// runs with the network's lock held: it must be quick and must not call
// the Network's methods.
type Hook func(d Datagram) Action

// Network connects in-memory Binds. It is safe for concurrent use.
type Network struct {
	mu       sync.Mutex                // guards the fields below
	binds    map[netip.AddrPort]*Bind  // open binds by address
	nextPort uint16                    // next port handed out for port 0
	hook     Hook                      // nil = pass everything
	held     []heldDatagram            // datagrams held back by the hook
	sent     map[netip.AddrPort]uint64 // datagrams sent to each destination
}

type heldDatagram struct {
	from, to netip.AddrPort
	data     []byte
}

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{
		binds:    make(map[netip.AddrPort]*Bind),
		nextPort: 40000,
		sent:     make(map[netip.AddrPort]uint64),
	}
}

// NewPair returns a network and two binds on it, at 192.0.2.1 and 192.0.2.2.
func NewPair() (*Network, *Bind, *Bind) {
	n := NewNetwork()
	return n, n.NewBind(netip.MustParseAddr("192.0.2.1")), n.NewBind(netip.MustParseAddr("192.0.2.2"))
}

// NewBind returns a closed bind on the network that will listen on addr.
func (n *Network) NewBind(addr netip.Addr) *Bind {
	return &Bind{net: n, ip: addr}
}

// SetHook installs h (nil = pass everything).
func (n *Network) SetHook(h Hook) {
	n.mu.Lock()
	n.hook = h
	n.mu.Unlock()
}

// ReleaseHeld delivers every held datagram, in the order they were held,
// and returns how many there were.
func (n *Network) ReleaseHeld() int {
	n.mu.Lock()
	held := n.held
	n.held = nil
	n.mu.Unlock()
	for _, h := range held {
		n.deliver(h.from, h.to, h.data)
	}
	return len(held)
}

// Inject delivers data to the bind listening on to as if it came from
// from, bypassing the hook. Tests use it to forge or relocate datagrams.
func (n *Network) Inject(from, to netip.AddrPort, data []byte) {
	n.deliver(from, to, data)
}

// SentTo returns how many datagrams were sent to dst (before the hook).
func (n *Network) SentTo(dst netip.AddrPort) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.sent[dst]
}

func (n *Network) route(from, to netip.AddrPort, data []byte) {
	n.mu.Lock()
	n.sent[to]++
	act := Pass
	if n.hook != nil {
		act = n.hook(Datagram{From: from, To: to, Data: data})
	}
	if act == Hold {
		n.held = append(n.held, heldDatagram{from, to, append([]byte(nil), data...)})
	}
	n.mu.Unlock()
	switch act {
	case Pass:
		n.deliver(from, to, data)
	case Duplicate:
		n.deliver(from, to, data)
		n.deliver(from, to, data)
	}
}

func (n *Network) deliver(from, to netip.AddrPort, data []byte) {
	n.mu.Lock()
	b := n.binds[to]
	n.mu.Unlock()
	if b == nil {
		return
	}
	b.enqueue(from, data)
}

// Bind is an in-memory conn.Bind on a Network.
type Bind struct {
	net *Network
	ip  netip.Addr

	mu     sync.RWMutex // guards the fields below; Send holds it for reading
	addr   netip.AddrPort
	queue  chan datagram // nil while closed
	closed chan struct{}
	mark   uint32
	pool   chan []byte // recycled datagram buffers

	hookMu sync.Mutex     // guards hooks and nextID
	hooks  map[int]func() // source-invalid hooks
	nextID int
}

type datagram struct {
	from netip.AddrPort
	data []byte
}

var _ conn.Bind = (*Bind)(nil)

// Addr returns the address the bind listens on (invalid while closed).
func (b *Bind) Addr() netip.AddrPort {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.addr
}

// Mark returns the last mark set with SetMark.
func (b *Bind) Mark() uint32 {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.mark
}

// Open starts listening on port (0 = pick one). A port already in use on
// the same address fails like a real socket would.
func (b *Bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queue != nil {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	n := b.net
	n.mu.Lock()
	if port == 0 {
		for {
			n.nextPort++
			if _, used := n.binds[netip.AddrPortFrom(b.ip, n.nextPort)]; !used {
				break
			}
		}
		port = n.nextPort
	}
	addr := netip.AddrPortFrom(b.ip, port)
	if _, used := n.binds[addr]; used {
		n.mu.Unlock()
		return nil, 0, &net.OpError{Op: "listen", Net: "udp", Err: errors.New("address already in use")}
	}
	n.binds[addr] = b
	n.mu.Unlock()
	b.addr = addr
	b.queue = make(chan datagram, 4096)
	b.closed = make(chan struct{})
	if b.pool == nil {
		b.pool = make(chan []byte, 8192)
	}
	q, closed := b.queue, b.closed
	fn := func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		return b.receive(q, closed, bufs, sizes, eps)
	}
	return []conn.ReceiveFunc{fn}, port, nil
}

func (b *Bind) receive(q chan datagram, closed chan struct{}, bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
	var d datagram
	select {
	case d = <-q:
	case <-closed:
		return 0, net.ErrClosed
	}
	n := 0
	for {
		sizes[n] = copy(bufs[n], d.data)
		eps[n] = conn.Endpoint{Dst: d.from, Src: b.ip}
		b.recycle(d.data)
		n++
		if n == len(bufs) {
			return n, nil
		}
		select {
		case d = <-q:
		default:
			return n, nil
		}
	}
}

func (b *Bind) recycle(buf []byte) {
	select {
	case b.pool <- buf[:0]:
	default:
	}
}

func (b *Bind) enqueue(from netip.AddrPort, data []byte) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.queue == nil {
		return
	}
	var buf []byte
	select {
	case buf = <-b.pool:
	default:
	}
	buf = append(buf[:0], data...)
	select {
	case b.queue <- datagram{from, buf}:
	default: // queue full: lost, as UDP would
	}
}

// Close stops listening. Sends still in progress finish before it returns.
func (b *Bind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.queue == nil {
		return nil
	}
	b.net.mu.Lock()
	delete(b.net.binds, b.addr)
	b.net.mu.Unlock()
	close(b.closed)
	b.queue = nil
	b.addr = netip.AddrPort{}
	return nil
}

// SetMark records mark; it has no other effect in memory.
func (b *Bind) SetMark(mark uint32) error {
	b.mu.Lock()
	b.mark = mark
	b.mu.Unlock()
	return nil
}

// Send delivers each buffer as a datagram to r's destination.
func (b *Bind) Send(bufs [][]byte, r *conn.Route) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.queue == nil {
		return net.ErrClosed
	}
	if len(bufs) > b.BatchSize() {
		return errors.New("conntest: batch larger than BatchSize")
	}
	to := r.Endpoint.Dst
	for _, buf := range bufs {
		b.net.route(b.addr, to, buf)
	}
	return nil
}

// BatchSize returns conn.IdealBatchSize.
func (b *Bind) BatchSize() int { return conn.IdealBatchSize }

// OnSourceInvalid registers fn to run on InvalidateSources, the way the
// kernel bind runs such hooks when local addresses change. The returned
// function unregisters fn.
func (b *Bind) OnSourceInvalid(fn func()) (remove func()) {
	b.hookMu.Lock()
	defer b.hookMu.Unlock()
	if b.hooks == nil {
		b.hooks = make(map[int]func())
	}
	id := b.nextID
	b.nextID++
	b.hooks[id] = fn
	return func() {
		b.hookMu.Lock()
		delete(b.hooks, id)
		b.hookMu.Unlock()
	}
}

// InvalidateSources runs every OnSourceInvalid hook once, as a local
// address change would.
func (b *Bind) InvalidateSources() {
	b.hookMu.Lock()
	fns := make([]func(), 0, len(b.hooks))
	for _, fn := range b.hooks {
		fns = append(fns, fn)
	}
	b.hookMu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
