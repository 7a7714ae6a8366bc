package conntest

import (
	"errors"
	"net"
	"net/netip"
	"sync"

	"github.com/wirelane/wirelane/conn"
)

// UDPBind is a minimal conn.Bind over real UDP sockets: one IPv4 and one
// IPv6 socket on the same port, one datagram per system call, no sticky
// source. Tests use it to talk to other implementations over loopback.
type UDPBind struct {
	mu  sync.RWMutex // guards v4 and v6; Send holds it for reading
	v4  *net.UDPConn
	v6  *net.UDPConn
	mrk uint32
}

var _ conn.Bind = (*UDPBind)(nil)

// NewUDPBind returns a closed UDPBind.
func NewUDPBind() *UDPBind { return &UDPBind{} }

// Open listens on port (0 = any) on all IPv4 and, when available, IPv6
// addresses.
func (b *UDPBind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.v4 != nil || b.v6 != nil {
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	v4, err := net.ListenUDP("udp4", &net.UDPAddr{Port: int(port)})
	if err != nil {
		return nil, 0, err
	}
	actual := uint16(v4.LocalAddr().(*net.UDPAddr).Port)
	v6, err := net.ListenUDP("udp6", &net.UDPAddr{IP: net.IPv6zero, Port: int(actual)})
	if err != nil {
		v6 = nil // no IPv6 on this host: IPv4 only
	}
	b.v4, b.v6 = v4, v6
	fns := []conn.ReceiveFunc{receiveFrom(v4)}
	if v6 != nil {
		fns = append(fns, receiveFrom(v6))
	}
	return fns, actual, nil
}

func receiveFrom(c *net.UDPConn) conn.ReceiveFunc {
	return func(bufs [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		n, from, err := c.ReadFromUDPAddrPort(bufs[0])
		if err != nil {
			return 0, err
		}
		sizes[0] = n
		eps[0] = conn.Endpoint{Dst: netip.AddrPortFrom(from.Addr().Unmap(), from.Port())}
		return 1, nil
	}
}

// Close closes both sockets.
func (b *UDPBind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var err error
	if b.v4 != nil {
		err = b.v4.Close()
	}
	if b.v6 != nil {
		if e := b.v6.Close(); err == nil {
			err = e
		}
	}
	b.v4, b.v6 = nil, nil
	return err
}

// SetMark records mark without applying it (loopback tests need none).
func (b *UDPBind) SetMark(mark uint32) error {
	b.mu.Lock()
	b.mrk = mark
	b.mu.Unlock()
	return nil
}

// Send writes each buffer to r's destination.
func (b *UDPBind) Send(bufs [][]byte, r *conn.Route) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	dst := r.Endpoint.Dst
	c := b.v4
	if !dst.Addr().Unmap().Is4() {
		c = b.v6
	}
	if c == nil {
		return net.ErrClosed
	}
	if dst.Addr().Is4In6() {
		dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	}
	var first error
	for _, buf := range bufs {
		if _, err := c.WriteToUDPAddrPort(buf, dst); err != nil && first == nil {
			first = err
		}
	}
	if first != nil && errors.Is(first, net.ErrClosed) {
		return net.ErrClosed
	}
	return first
}

// BatchSize returns conn.IdealBatchSize.
func (b *UDPBind) BatchSize() int { return conn.IdealBatchSize }
