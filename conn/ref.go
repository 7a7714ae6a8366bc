package conn

import "sync"

// RefEndpoint is the conventional, locked way to keep a peer's endpoint,
// kept so that the noref path can be measured against it in the same binary
// (the "ref" mode of an A/B run). Each send takes the device-wide read lock
// for the whole batch and the endpoint's own mutex to copy the endpoint, and
// builds a fresh Route (sockaddr and control message) for the batch, which
// allocates: the userspace counterparts of dst_hold/dst_release and of a
// route looked up per packet.
type RefEndpoint struct {
	mu  sync.Mutex // guards ep, ok and gen
	ep  Endpoint
	ok  bool
	gen uint64
}

// Set replaces the endpoint.
func (e *RefEndpoint) Set(ep Endpoint) {
	e.mu.Lock()
	e.ep, e.ok = Endpoint{Dst: normalize(ep.Dst), Src: ep.Src, SrcIfindex: ep.SrcIfindex}, true
	e.gen++
	e.mu.Unlock()
}

// ClearSrc forgets the sticky source.
func (e *RefEndpoint) ClearSrc() {
	e.mu.Lock()
	e.ep.Src, e.ep.SrcIfindex = netipZero, 0
	e.gen++
	e.mu.Unlock()
}

// Clear forgets the endpoint: later sends fail with ErrNoRoute until Set.
// It is the locked counterpart of RouteCache.Clear, used when a peer is
// removed.
func (e *RefEndpoint) Clear() {
	e.mu.Lock()
	e.ep, e.ok = Endpoint{}, false
	e.gen++
	e.mu.Unlock()
}

// LockWriter takes the endpoint's mutex and returns its unlock function.
// Tests use it to show that ref-mode senders do wait for it.
func (e *RefEndpoint) LockWriter() (unlock func()) {
	e.mu.Lock()
	return e.mu.Unlock
}

// Endpoint returns a copy of the endpoint and whether there is one.
func (e *RefEndpoint) Endpoint() (Endpoint, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ep, e.ok
}

// Send sends bufs the conventional way: devLock (the device's network lock;
// nil for none) is read-locked around the whole send, the endpoint mutex
// around the copy, and a Route is built for this batch alone.
func (e *RefEndpoint) Send(b Sender, devLock *sync.RWMutex, bufs [][]byte) error {
	if devLock != nil {
		devLock.RLock()
		defer devLock.RUnlock()
	}
	e.mu.Lock()
	ep, ok, gen := e.ep, e.ok, e.gen
	e.mu.Unlock()
	if !ok {
		return ErrNoRoute
	}
	return b.Send(bufs, NewRoute(ep, gen))
}
