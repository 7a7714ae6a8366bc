package conn

import (
	"net"
	"sync"
	"sync/atomic"
)

// Route is an immutable snapshot of everything the send path needs to reach
// one peer: the endpoint, its family, a ready-made destination address (both
// as *net.UDPAddr and as a raw sockaddr for sendmmsg) and a ready-made
// sticky-source control message. Once published by a RouteCache nothing
// writes to a Route again, so senders may read it without a lock.
type Route struct {
	// Endpoint is the destination and the sticky source.
	Endpoint Endpoint
	// Gen is the cache's generation at publication; it only grows.
	Gen uint64

	v6      bool         // destination is IPv6 (not 4in6)
	udpAddr *net.UDPAddr // ready-made destination for x/net batch writes
	ctrl    []byte       // ready-made IP_PKTINFO / IPV6_PKTINFO; nil when no sticky source
	sa      rawSockaddr  // ready-made sockaddr_in / sockaddr_in6
	saLen   uint32       // bytes of sa the kernel reads
}

// UDPAddr returns the ready-made destination address. It must not be modified.
func (r *Route) UDPAddr() *net.UDPAddr { return r.udpAddr }

// Control returns the ready-made source control message, or nil. It must not
// be modified.
func (r *Route) Control() []byte { return r.ctrl }

// NewRoute builds an owned route for ep with generation gen. Callers outside
// a RouteCache use it for one-off sends (handshake replies to an address that
// is not yet a peer's endpoint) and tests. It allocates; the send path never
// calls it.
func NewRoute(ep Endpoint, gen uint64) *Route {
	ep.Dst = normalize(ep.Dst)
	r := &Route{Endpoint: ep, Gen: gen}
	r.v6 = ep.Dst.Addr().Is6()
	r.udpAddr = net.UDPAddrFromAddrPort(ep.Dst)
	r.ctrl = stickyControl(ep)
	r.saLen = putSockaddr(&r.sa, ep.Dst)
	return r
}

// RouteCache holds one peer's current route. Senders borrow it with Borrow
// (one atomic load); writers publish a new owned copy with Set, ClearSrc or
// Clear when handshake state changes. A writer that must know no sender
// still uses the previous route follows the publication with
// RCU.Synchronize.
type RouteCache struct {
	cur atomic.Pointer[Route] // the published route; stored only under mu, loaded anywhere

	mu  sync.Mutex // serialises writers
	gen uint64     // guarded by mu
}

// Borrow returns the current route, or nil when the peer has no endpoint.
// The result is valid for one read section (see RCU); it costs one atomic
// load, takes no lock and allocates nothing.
func (c *RouteCache) Borrow() *Route { return c.cur.Load() }

// Set publishes a route for ep unless the current route already has exactly
// that endpoint, and returns the current route and whether it changed.
func (c *RouteCache) Set(ep Endpoint) (*Route, bool) {
	ep.Dst = normalize(ep.Dst)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.setLocked(ep)
}

func (c *RouteCache) setLocked(ep Endpoint) (*Route, bool) {
	if cur := c.cur.Load(); cur != nil && cur.Endpoint == ep {
		return cur, false
	}
	c.gen++
	r := NewRoute(ep, c.gen)
	c.cur.Store(r)
	return r, true
}

// ClearSrc publishes a copy of the current route without its sticky source,
// unless it has none. It reports whether a new route was published.
func (c *RouteCache) ClearSrc() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := c.cur.Load()
	if cur == nil || (!cur.Endpoint.Src.IsValid() && cur.Endpoint.SrcIfindex == 0) {
		return false
	}
	c.gen++
	c.cur.Store(NewRoute(Endpoint{Dst: cur.Endpoint.Dst}, c.gen))
	return true
}

// Clear removes the route; later Borrows return nil.
func (c *RouteCache) Clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur.Load() != nil {
		c.gen++
		c.cur.Store(nil)
	}
}

// Endpoint returns an owned copy of the current endpoint and whether there is
// one. Code that keeps an endpoint past one send (timers, handshakes in
// flight) keeps this value, never a borrowed *Route.
func (c *RouteCache) Endpoint() (Endpoint, bool) {
	if r := c.cur.Load(); r != nil {
		return r.Endpoint, true
	}
	return Endpoint{}, false
}
