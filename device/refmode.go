package device

// Ref mode: the conventional, locked way of keeping and using a peer's
// endpoint, kept so that the borrowed route can be measured against it in
// the same binary (the "ref" side of an A/B run). It is chosen when a
// device is created, by internal/sys/refmode (the benchmark harness, or a
// binary built with -tags wirelane_refmode), never by the product's API.
// Each send takes the device-wide read lock for the whole batch and the
// endpoint's own mutex to copy the endpoint, and builds a fresh Route
// (sockaddr and control message) for the batch, which allocates: the
// userspace counterparts of dst_hold/dst_release and of a route looked up
// per packet.

import (
	"net/netip"
	"sync"

	"github.com/wirelane/wirelane/conn"
)

// refEndpoint is a peer's endpoint on the ref path, kept in step with the
// peer's RouteCache.
type refEndpoint struct {
	mu  sync.Mutex // guards ep, ok and gen
	ep  conn.Endpoint
	ok  bool
	gen uint64
}

// set replaces the endpoint.
func (e *refEndpoint) set(ep conn.Endpoint) {
	if a := ep.Dst.Addr(); a.Is4In6() {
		ep.Dst = netip.AddrPortFrom(a.Unmap(), ep.Dst.Port()) // as conn keeps it
	}
	e.mu.Lock()
	e.ep, e.ok = ep, true
	e.gen++
	e.mu.Unlock()
}

// clearSrc forgets the sticky source.
func (e *refEndpoint) clearSrc() {
	e.mu.Lock()
	e.ep.Src, e.ep.SrcIfindex = netip.Addr{}, 0
	e.gen++
	e.mu.Unlock()
}

// clear forgets the endpoint (the peer is removed): later sends fail with
// conn.ErrNoRoute until set.
func (e *refEndpoint) clear() {
	e.mu.Lock()
	e.ep, e.ok = conn.Endpoint{}, false
	e.gen++
	e.mu.Unlock()
}

// endpoint returns a copy of the endpoint and whether there is one.
func (e *refEndpoint) endpoint() (conn.Endpoint, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ep, e.ok
}

// send sends bufs the conventional way: devLock (the device's peer lock;
// nil for none) is read-locked around the whole send, the endpoint mutex
// around the copy, and a Route is built for this batch alone.
func (e *refEndpoint) send(tx conn.Sender, devLock *sync.RWMutex, bufs [][]byte) error {
	if devLock != nil {
		devLock.RLock()
		defer devLock.RUnlock()
	}
	e.mu.Lock()
	ep, ok, gen := e.ep, e.ok, e.gen
	e.mu.Unlock()
	if !ok {
		return conn.ErrNoRoute
	}
	return tx.Send(bufs, conn.NewRoute(ep, gen))
}
