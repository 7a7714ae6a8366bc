package server

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
)

// pool hands out client addresses from `server NET MASK` (topology subnet):
// the network's first host address is the server's, clients get the
// following ones up to the last address before broadcast.
type pool struct {
	network netip.Prefix
	server  netip.Addr

	mu    sync.Mutex          // guards inUse
	inUse map[netip.Addr]bool // guarded by mu
	first netip.Addr          // first client address
	last  netip.Addr          // last client address
}

// errPoolFull is returned when every address is taken.
var errPoolFull = errors.New("server: address pool exhausted")

func newPool(network netip.Prefix) (*pool, error) {
	network = network.Masked()
	if !network.Addr().Is4() || network.Bits() > 29 {
		return nil, fmt.Errorf("server: pool %s: want an IPv4 network of /29 or larger", network)
	}
	srv := network.Addr().Next()
	b := network.Addr().As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v |= ^uint32(0) >> network.Bits() // broadcast
	bcast := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	return &pool{network: network, server: srv, inUse: map[netip.Addr]bool{}, first: srv.Next(), last: bcast.Prev()}, nil
}

// size is the number of client addresses.
func (p *pool) size() int {
	a, b := p.first.As4(), p.last.As4()
	f := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	l := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return int(l-f) + 1
}

// get returns the lowest free address.
func (p *pool) get() (netip.Addr, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a := p.first; a.IsValid() && a.Compare(p.last) <= 0; a = a.Next() {
		if !p.inUse[a] {
			p.inUse[a] = true
			return a, nil
		}
	}
	return netip.Addr{}, errPoolFull
}

// put returns an address to the pool.
func (p *pool) put(a netip.Addr) {
	p.mu.Lock()
	delete(p.inUse, a)
	p.mu.Unlock()
}
