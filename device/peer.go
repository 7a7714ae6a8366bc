package device

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun"
)

// peer is one remote WireGuard endpoint: its handshake, sessions, route,
// queues, timers and counters.
type peer struct {
	d   *Device
	pub noise.PublicKey

	// hs is the handshake state, replaced (never modified by us) when the
	// device's private key changes; nil while the device has none.
	hs atomic.Pointer[noise.Handshake]
	// hsMu serialises our use of hs: creating initiations, deriving
	// sessions, and the fields below.
	hsMu         sync.Mutex
	psk          noise.PresharedKey // guarded by hsMu
	hsIndex      uint32             // index of the initiation in flight; guarded by hsMu
	lastInitSent atomic.Int64       // a stamp (Device.stamp), 0 = never; written under hsMu
	// cookieResends counts initiations resent at once after a cookie
	// reply since the last one sent on schedule; guarded by hsMu.
	cookieResends int
	cookieGen     *noise.CookieGenerator

	// routes is the current route, borrowed by senders without a lock.
	routes conn.RouteCache
	// refEP is the endpoint for the ref-mode send path (refmode.go), kept
	// in step with routes; it has its own mutex, taken per batch by
	// ref-mode senders.
	refEP refEndpoint

	kpMu     sync.Mutex // guards keypairs.previous/next and writes of current
	keypairs keypairs

	// stageMu guards staged; nonces are assigned under it so that the
	// order of the outbound queue is the order of the counters.
	stageMu sync.Mutex
	staged  []*packet

	// recvMu serialises the delivery of opened batches (replay window, TUN
	// write), whether by the peer's receiver goroutine or directly by a
	// socket's receive goroutine; it guards heads.
	recvMu sync.Mutex
	heads  tun.HeadRoom // guarded by recvMu

	// lifecycle: run is replaced on every start; stop closes run.stopped.
	// The data path loads run without a lock; runMu serialises start/stop.
	runMu sync.Mutex
	run   atomic.Pointer[peerRun]

	timers              peerTimers
	persistentKeepalive atomic.Uint32 // seconds; 0 = off
	lastHandshake       atomic.Int64  // unix nanoseconds; 0 = never
	txBytes, rxBytes    atomic.Uint64
	initPending         atomic.Bool // a goroutine is about to send an initiation
}

// peerRun is one start..stop span of a peer: its queues and goroutines.
type peerRun struct {
	outbound chan *batch // sealed batches in counter order
	inbound  chan *batch // opened batches in arrival order
	stopped  chan struct{}
	wg       sync.WaitGroup
	// pending counts batches queued on outbound and not yet sent; the
	// TUN reader sends directly only when it is zero (read under stageMu).
	pending atomic.Int32
	// pendingIn counts batches queued on inbound and not yet delivered; a
	// socket's receive goroutine delivers directly only when it is zero.
	pendingIn atomic.Int32
	// gathered is set while the TUN reader holds a sealed batch of this
	// run in its gather (txGather), not yet sent.
	gathered atomic.Bool
}

func (d *Device) newPeer(pub noise.PublicKey) *peer {
	p := &peer{d: d, pub: pub, cookieGen: noise.NewCookieGenerator(pub)}
	if id := d.ident.Load(); id != nil {
		p.hs.Store(noise.NewHandshake(id.local, pub, noise.PresharedKey{}))
	}
	p.staged = make([]*packet, 0, 64)
	p.timers.init(p)
	return p
}

// current returns the peer's run, or nil when stopped.
func (p *peer) current() *peerRun { return p.run.Load() }

// isRunning reports whether the peer is started.
func (p *peer) isRunning() bool { return p.current() != nil }

// start launches the peer's sequential goroutines.
func (p *peer) start() {
	p.runMu.Lock()
	defer p.runMu.Unlock()
	if p.run.Load() != nil {
		return
	}
	r := &peerRun{
		outbound: make(chan *batch, PeerQueueBatches),
		inbound:  make(chan *batch, PeerQueueBatches),
		stopped:  make(chan struct{}),
	}
	r.wg.Add(2)
	go p.runSender(r)
	go p.runReceiver(r)
	p.run.Store(r)
}

// stop ends the peer's goroutines, cancels its timers and drops queued
// packets. Sessions are kept; see zeroKeys.
func (p *peer) stop() {
	p.runMu.Lock()
	defer p.runMu.Unlock()
	r := p.run.Swap(nil)
	if r == nil {
		return
	}
	close(r.stopped)
	// Wait out a direct send from the TUN reader (made under stageMu).
	p.stageMu.Lock()
	p.stageMu.Unlock() //nolint:staticcheck // empty critical section is the barrier
	// and out a gathered batch, sent by the TUN reader once its read is
	// dispatched (txGather).
	for r.gathered.Load() {
		runtime.Gosched()
	}
	// Likewise a direct delivery from a socket's receive goroutine.
	p.recvMu.Lock()
	p.recvMu.Unlock() //nolint:staticcheck // empty critical section is the barrier
	r.wg.Wait()
	p.timers.stopAll()
	p.dropStaged()
	if hs := p.hs.Load(); hs != nil {
		hs.Clear()
	}
	p.hsMu.Lock()
	p.d.indices.release(p.hsIndex, p)
	p.hsIndex = 0
	p.hsMu.Unlock()
}

// dropStaged discards packets waiting for a session.
func (p *peer) dropStaged() {
	p.stageMu.Lock()
	p.d.pool.putPackets(p.staged)
	clear(p.staged)
	p.staged = p.staged[:0]
	p.stageMu.Unlock()
}

// setEndpoint publishes ep as the peer's route and reports whether it
// changed. Callers that must guarantee no later packet goes to the old
// endpoint follow it with Device.syncSenders.
func (p *peer) setEndpoint(ep conn.Endpoint) bool {
	if r := p.routes.Borrow(); r != nil && r.Endpoint == ep {
		return false // the common case on receive: no lock taken
	}
	_, changed := p.routes.Set(ep)
	if changed {
		p.d.ctr.routePublications.Add(1)
	}
	if changed && p.d.refMode {
		p.refEP.set(ep)
	}
	return changed
}

// clearEndpointSrc forgets the sticky source so that the kernel picks one
// again (after a handshake timeout, the source may no longer be valid).
func (p *peer) clearEndpointSrc() {
	if p.routes.ClearSrc() {
		p.d.ctr.routePublications.Add(1)
		if p.d.refMode {
			p.refEP.clearSrc()
		}
	}
}

// syncSenders waits until no sender can still be using a route or endpoint
// published before the call: an RCU grace period for the lock-free path and
// a pass through the device lock for ref mode.
func (d *Device) syncSenders() {
	d.rcu.Synchronize()
	d.mu.Lock()
	d.mu.Unlock() //nolint:staticcheck // empty critical section is the barrier
}

// rotateOnConfirm promotes kp when it is the responder's next session (its
// first packet arrived: the key is confirmed). It reports whether it did.
func (p *peer) rotateOnConfirm(kp *keypair) bool {
	p.kpMu.Lock()
	defer p.kpMu.Unlock()
	if p.keypairs.next != kp {
		return false
	}
	old := p.keypairs.previous
	p.keypairs.previous = p.keypairs.current.Load()
	p.keypairs.current.Store(kp)
	p.keypairs.next = nil
	p.d.indices.releaseKeypair(old)
	return true
}

// installSession adds a freshly derived session: an initiator's becomes
// current at once, a responder's waits in next for confirmation.
func (p *peer) installSession(kp *keypair) {
	p.kpMu.Lock()
	defer p.kpMu.Unlock()
	cur := p.keypairs.current.Load()
	if kp.isInitiator {
		if p.keypairs.next != nil {
			// A responder session never confirmed: it becomes previous so
			// that late packets under it still decrypt.
			p.d.indices.releaseKeypair(p.keypairs.previous)
			p.keypairs.previous = p.keypairs.next
			p.keypairs.next = nil
			p.d.indices.releaseKeypair(cur)
		} else {
			p.d.indices.releaseKeypair(p.keypairs.previous)
			p.keypairs.previous = cur
		}
		p.keypairs.current.Store(kp)
		return
	}
	p.d.indices.releaseKeypair(p.keypairs.next)
	p.keypairs.next = kp
	p.d.indices.releaseKeypair(p.keypairs.previous)
	p.keypairs.previous = nil
}

// expireCurrent makes the current session unusable for sending, so that
// the next packet starts a handshake, and lifts the RekeyTimeout spacing
// of initiations (as the kernel does on a key change), so that the
// handshake starts with that packet even when one was sent just before.
func (p *peer) expireCurrent() {
	p.hsMu.Lock()
	p.lastInitSent.Store(0)
	p.hsMu.Unlock()
	p.kpMu.Lock()
	if kp := p.keypairs.next; kp != nil {
		kp.sendNonce.Store(RejectAfterMessages)
	}
	if kp := p.keypairs.current.Load(); kp != nil {
		kp.sendNonce.Store(RejectAfterMessages)
	}
	p.kpMu.Unlock()
}

// zeroKeys forgets every session and the handshake state.
func (p *peer) zeroKeys() {
	p.kpMu.Lock()
	for _, kp := range []*keypair{p.keypairs.previous, p.keypairs.current.Load(), p.keypairs.next} {
		p.d.indices.releaseKeypair(kp)
	}
	p.keypairs.previous, p.keypairs.next = nil, nil
	p.keypairs.current.Store(nil)
	p.kpMu.Unlock()
	p.hsMu.Lock()
	if hs := p.hs.Load(); hs != nil {
		hs.Clear()
	}
	p.d.indices.release(p.hsIndex, p)
	p.hsIndex = 0
	p.hsMu.Unlock()
}
