package conn

// Test hooks. The device does the RouteCache's jobs below itself (it roams
// with Set once per batch and waits with RCU.Synchronize), and nothing but
// the tests asks a Route or a StdBind these questions, so none of this is
// part of the API; the tests use them to state the package's contract.

// IsV6 reports whether the route's destination is an IPv6 (not 4in6) address.
func (r *Route) IsV6() bool { return r.v6 }

// HasIPv6 reports whether the open bind has an IPv6 socket.
func (b *StdBind) HasIPv6() bool {
	s := b.socks.Load()
	return s != nil && s.v6 != nil
}

// Replace publishes a route for ep like Set and, when that changed the
// route, waits for a grace period of d: once Replace returns, no sender
// inside a read section of d still holds the previous route, so no packet
// leaves for the old destination any more. It reports whether the route
// changed. It must not be called inside a read section of d.
func (c *RouteCache) Replace(ep Endpoint, d *RCU) bool {
	_, changed := c.Set(ep)
	if changed && d != nil {
		d.Synchronize()
	}
	return changed
}

// Roam applies one received batch to the cache. eps are the endpoints the
// batch's datagrams for this peer arrived from, in arrival order, and
// authed[i] tells whether datagram i authenticated (nil means all did; a
// short authed counts the missing entries as not authenticated). Only
// authenticated datagrams may move an endpoint, and the last one wins: Roam
// publishes at most one route per batch and none when the last authenticated
// endpoint (destination and sticky source) equals the current one. The
// unchanged case takes no lock. It reports whether a route was published.
func (c *RouteCache) Roam(eps []Endpoint, authed []bool) bool {
	last := -1
	for i := len(eps) - 1; i >= 0; i-- {
		if authed == nil || (i < len(authed) && authed[i]) {
			last = i
			break
		}
	}
	if last < 0 {
		return false
	}
	ep := eps[last]
	ep.Dst = normalize(ep.Dst)
	if cur := c.cur.Load(); cur != nil && cur.Endpoint == ep {
		return false
	}
	_, changed := c.Set(ep)
	return changed
}

// LockWriter takes the writer lock and returns its unlock function. Tests
// use it to show that senders never need it.
func (c *RouteCache) LockWriter() (unlock func()) {
	c.mu.Lock()
	return c.mu.Unlock
}
