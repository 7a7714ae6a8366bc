package server

import (
	"encoding/binary"
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
	// reserved are the fixed addresses of client-config entries (by
	// file name): get never hands them out. Immutable once the pool is
	// in force.
	reserved map[netip.Addr]string
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
		if _, fixed := p.reserved[a]; !p.inUse[a] && !fixed {
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

// v6OnlySlots numbers the clients of an IPv6-only server (`server-ipv6`
// without `server`): the IPv4 pool still hands out one slot per client,
// and each slot picks the client's IPv6 address, but the slot's IPv4
// address is never pushed, routed or accepted as a source.
var v6OnlySlots = netip.MustParsePrefix("10.0.0.0/17")

// slotNetwork is the network whose pool numbers the clients: the IPv4
// pool, or v6OnlySlots for an IPv6-only server.
func slotNetwork(network netip.Prefix) netip.Prefix {
	if network.IsValid() {
		return network
	}
	return v6OnlySlots
}

// pool6Offset is where client addresses start in a server-ipv6 prefix,
// as in OpenVPN: PREFIX::1 is the server, clients from PREFIX::1000.
const pool6Offset = 0x1000

// pool6 is the IPv6 pool of `server-ipv6 PREFIX/LEN`. It has no state of
// its own: the client holding the i-th address of the IPv4 pool gets
// PREFIX::1000 + i, so the IPv4 allocation takes and frees both (OpenVPN
// pairs its pools the same way). Immutable.
type pool6 struct {
	network netip.Prefix
	server  netip.Addr // PREFIX::1
	v4first netip.Addr // the IPv4 pool's first client address
}

// newPool6 checks that network (a /64 to /112) holds v4's clients.
func newPool6(network netip.Prefix, v4 *pool) (*pool6, error) {
	network = network.Masked()
	if !network.Addr().Is6() || network.Addr().Is4In6() || network.Bits() < 64 || network.Bits() > 112 {
		return nil, fmt.Errorf("server: IPv6 pool %s: want an IPv6 prefix of /64 to /112", network)
	}
	if hostBits := 128 - network.Bits(); hostBits < 64 && uint64(pool6Offset+v4.size()) >= uint64(1)<<hostBits {
		return nil, fmt.Errorf("server: IPv6 pool %s: too small for the %d clients of the IPv4 pool %s (client addresses start at ::%x)",
			network, v4.size(), v4.network, pool6Offset)
	}
	return &pool6{network: network, server: network.Addr().Next(), v4first: v4.first}, nil
}

// addrFor returns the IPv6 address paired with the IPv4 pool address a.
func (p *pool6) addrFor(a netip.Addr) netip.Addr {
	x, f := a.As4(), p.v4first.As4()
	i := (uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3])) -
		(uint32(f[0])<<24 | uint32(f[1])<<16 | uint32(f[2])<<8 | uint32(f[3]))
	b := p.network.Addr().As16()
	lo := binary.BigEndian.Uint64(b[8:]) + pool6Offset + uint64(i)
	binary.BigEndian.PutUint64(b[8:], lo)
	return netip.AddrFrom16(b)
}
