package device

// Protocol timers, one set per peer, following the whitepaper's section 6:
//
//	retransmitHandshake  RekeyTimeout+jitter after an initiation; resend,
//	                     or give up after RekeyAttemptTime
//	sendKeepalive        KeepaliveTimeout after data arrived with nothing
//	                     sent back; sends a keepalive
//	newHandshake         KeepaliveTimeout+RekeyTimeout+jitter after data was
//	                     sent with nothing received; starts a handshake
//	zeroKeyMaterial      3 x RejectAfterTime after a session was derived;
//	                     forgets every key
//	persistentKeepalive  the configured interval after any authenticated
//	                     packet either way; sends a keepalive
//
// The data path signals events once per batch; an event that would not
// change a timer's state is answered from an atomic flag without a lock.

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// peerTimer is one restartable timer of a peer.
type peerTimer struct {
	mu       sync.Mutex // guards t and deadline, serialises mod/del/expiry
	t        timer      // guarded by mu
	deadline time.Time  // guarded by mu; when the armed timer is due
	pending  atomic.Bool
	fire     func()
	p        *peer
}

func (t *peerTimer) init(p *peer, fire func()) {
	t.p, t.fire = p, fire
}

func (t *peerTimer) expired() {
	t.mu.Lock()
	// A call already on its way when the timer was deleted or re-armed is
	// stale: the timer's current state decides.
	if !t.pending.Load() || t.p.d.clock.Now().Before(t.deadline) {
		t.mu.Unlock()
		return
	}
	t.pending.Store(false)
	t.mu.Unlock()
	if !t.p.isRunning() {
		return
	}
	t.fire()
}

// mod (re)arms the timer to fire after d.
func (t *peerTimer) mod(d time.Duration) {
	t.mu.Lock()
	t.pending.Store(true)
	t.deadline = t.p.d.clock.Now().Add(d)
	if t.t == nil {
		t.t = t.p.d.clock.AfterFunc(d, t.expired)
	} else {
		t.t.Reset(d)
	}
	t.mu.Unlock()
}

// del disarms the timer.
func (t *peerTimer) del() {
	if !t.pending.Load() {
		return
	}
	t.mu.Lock()
	t.pending.Store(false)
	if t.t != nil {
		t.t.Stop()
	}
	t.mu.Unlock()
}

// peerTimers are a peer's protocol timers and the state they share.
type peerTimers struct {
	retransmitHandshake peerTimer
	sendKeepalive       peerTimer
	newHandshake        peerTimer
	zeroKeyMaterial     peerTimer
	persistentKeepalive peerTimer

	handshakeAttempts       atomic.Uint32
	needAnotherKeepalive    atomic.Bool
	sentLastMinuteHandshake atomic.Bool
}

func (ts *peerTimers) init(p *peer) {
	ts.retransmitHandshake.init(p, p.expiredRetransmitHandshake)
	ts.sendKeepalive.init(p, p.expiredSendKeepalive)
	ts.newHandshake.init(p, p.expiredNewHandshake)
	ts.zeroKeyMaterial.init(p, p.expiredZeroKeyMaterial)
	ts.persistentKeepalive.init(p, p.expiredPersistentKeepalive)
}

func (ts *peerTimers) stopAll() {
	ts.retransmitHandshake.del()
	ts.sendKeepalive.del()
	ts.newHandshake.del()
	ts.zeroKeyMaterial.del()
	ts.persistentKeepalive.del()
	ts.handshakeAttempts.Store(0)
	ts.needAnotherKeepalive.Store(false)
}

func jitter() time.Duration {
	return time.Duration(rand.Int64N(int64(RekeyTimeoutJitterMax)))
}

func (p *peer) expiredRetransmitHandshake() {
	tm := &p.d.tm
	if int(p.timers.handshakeAttempts.Load()) > tm.maxHandshakes() {
		p.d.log.Debug("handshake did not complete, giving up", "peer", p.pub.String())
		p.timers.sendKeepalive.del()
		p.dropStaged()
		if !p.timers.zeroKeyMaterial.pending.Load() {
			p.timers.zeroKeyMaterial.mod(tm.zeroKeyMaterial)
		}
		return
	}
	p.timers.handshakeAttempts.Add(1)
	p.d.log.Debug("handshake did not complete, retrying", "peer", p.pub.String(), "attempt", p.timers.handshakeAttempts.Load()+1)
	p.clearEndpointSrc()
	p.sendInitiation(true)
}

func (p *peer) expiredSendKeepalive() {
	p.sendKeepalive()
	if p.timers.needAnotherKeepalive.Swap(false) {
		p.timers.sendKeepalive.mod(p.d.tm.keepaliveTimeout)
	}
}

func (p *peer) expiredNewHandshake() {
	p.d.log.Debug("no reply to data, starting a handshake", "peer", p.pub.String())
	p.clearEndpointSrc()
	p.sendInitiation(false)
}

func (p *peer) expiredZeroKeyMaterial() {
	p.d.log.Debug("zeroing keys after no new handshake", "peer", p.pub.String())
	p.zeroKeys()
}

func (p *peer) expiredPersistentKeepalive() {
	if p.persistentKeepalive.Load() > 0 {
		p.sendKeepalive()
	}
}

// timersDataSent: a batch of data (not keepalives) left.
func (p *peer) timersDataSent() {
	if !p.timers.newHandshake.pending.Load() {
		p.timers.newHandshake.mod(p.d.tm.keepaliveTimeout + p.d.tm.rekeyTimeout + jitter())
	}
}

// timersDataReceived: a batch with data (not only keepalives) arrived.
func (p *peer) timersDataReceived() {
	if !p.timers.sendKeepalive.pending.Load() {
		p.timers.sendKeepalive.mod(p.d.tm.keepaliveTimeout)
	} else {
		p.timers.needAnotherKeepalive.Store(true)
	}
}

// timersAnyAuthenticatedPacketSent: anything authenticated left (data,
// keepalive, handshake).
func (p *peer) timersAnyAuthenticatedPacketSent() {
	p.timers.sendKeepalive.del()
}

// timersAnyAuthenticatedPacketReceived: anything authenticated arrived.
func (p *peer) timersAnyAuthenticatedPacketReceived() {
	p.timers.newHandshake.del()
}

// timersHandshakeInitiated: an initiation left.
func (p *peer) timersHandshakeInitiated() {
	p.timers.retransmitHandshake.mod(p.d.tm.rekeyTimeout + jitter())
}

// timersHandshakeComplete: a session was confirmed.
func (p *peer) timersHandshakeComplete() {
	p.timers.retransmitHandshake.del()
	p.timers.handshakeAttempts.Store(0)
	p.timers.sentLastMinuteHandshake.Store(false)
	p.lastHandshake.Store(p.d.clock.Now().UnixNano())
}

// timersSessionDerived: a new session exists.
func (p *peer) timersSessionDerived() {
	p.timers.zeroKeyMaterial.mod(p.d.tm.zeroKeyMaterial)
}

// timersAnyAuthenticatedPacketTraversal: anything authenticated went either
// way; it restarts the persistent keepalive interval.
func (p *peer) timersAnyAuthenticatedPacketTraversal() {
	if ka := p.persistentKeepalive.Load(); ka > 0 {
		p.timers.persistentKeepalive.mod(time.Duration(ka) * time.Second)
	}
}
