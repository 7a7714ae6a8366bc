package device

// Handshake flow (whitepaper section 5.4), driven by the data path and the
// timers on one side and by the handshake workers on the other:
//
//	initiator                                responder
//	sendInitiation -- initiation (mac1[,mac2]) --> handleInitiation
//	                                              under load without mac2:
//	               <-- cookie reply ------------  (answer, do no DH)
//	handleCookieReply (keep cookie; the retransmit carries mac2)
//	                                              session in "next"
//	handleResponse <-- response ----------------- sendResponse
//	session current; keepalive or staged data --> first packet confirms
//	                                              "next" becomes current
//
// Handshake workers (runtime.NumCPU) take messages from a bounded queue;
// while it is filling, or handshake messages arrive fast (under load),
// every initiation and response must carry a valid mac2: the receive path
// checks mac1 and mac2 itself, answers those without a valid mac2 with a
// cookie reply on the spot, and queues those with one on a priority queue
// the workers serve first; a per-source-IP token bucket limits the work
// done for each address. An initiator whose initiation is answered with
// a cookie sends it again at once, with mac2 (sendInitiationAfter).

import (
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
)

// sendControl sends one handshake message to the peer's current route, in
// the control read section so that grace periods cover it. A message sent
// counts in the peer's transfer, as the kernel counts it (every message
// attributed to the peer: initiations and responses as well as data).
func (p *peer) sendControl(msg []byte) bool {
	d := p.d
	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	d.ctrlReader.Enter()
	defer d.ctrlReader.Exit()
	rt := p.routes.Borrow()
	if rt == nil {
		return false
	}
	if err := d.bind.Send([][]byte{msg}, rt); err != nil {
		d.ctr.socketSendErrors.Add(1)
		d.log.Debug("handshake send failed", "peer", p.pub.String(), "err", err)
		return false
	}
	p.txBytes.Add(uint64(len(msg)))
	return true
}

// sendTo sends one message to an address that is not a peer's route (a
// cookie reply).
func (d *Device) sendTo(msg []byte, ep conn.Endpoint) {
	d.ctrlMu.Lock()
	defer d.ctrlMu.Unlock()
	d.ctrlReader.Enter()
	defer d.ctrlReader.Exit()
	if err := d.bind.Send([][]byte{msg}, conn.NewRoute(ep, 0)); err != nil {
		d.ctr.socketSendErrors.Add(1) // a lost reply is retried by the peer
	}
}

// sendInitiation starts a handshake. A retry keeps counting attempts; a
// fresh start resets them. Initiations are at most one per RekeyTimeout.
func (p *peer) sendInitiation(retry bool) { p.sendInitiationAfter(retry, 0) }

// maxCookieResends bounds the initiations sent at once after a cookie
// reply, per RekeyTimeout.
const maxCookieResends = 2

// sendInitiationAfter is sendInitiation; a non-zero cookieFor is the
// index of the initiation a cookie reply has just answered: if it is still
// the one in flight, the initiation goes again at once, now with mac2,
// instead of RekeyTimeout later (so that a responder under load answers
// within two round trips), at most maxCookieResends times per RekeyTimeout.
func (p *peer) sendInitiationAfter(retry bool, cookieFor uint32) {
	d := p.d
	if !retry {
		p.timers.handshakeAttempts.Store(0)
	}
	if !p.isRunning() {
		return
	}
	hs := p.hs.Load()
	if hs == nil {
		return
	}
	now := d.clock.Now()
	p.hsMu.Lock()
	if last := p.lastInitSent.Load(); last != 0 && d.stamp(now)-last < int64(d.tm.rekeyTimeout) {
		if cookieFor == 0 || cookieFor != p.hsIndex || p.cookieResends >= maxCookieResends {
			p.hsMu.Unlock()
			return
		}
		p.cookieResends++
	} else {
		p.cookieResends = 0
	}
	p.lastInitSent.Store(d.stamp(now))
	d.indices.release(p.hsIndex, p)
	idx := d.indices.newIndex(indexEntry{peer: p})
	p.hsIndex = idx
	m, err := hs.CreateInitiation(idx, now)
	p.hsMu.Unlock()
	if err != nil {
		d.log.Debug("cannot create initiation", "peer", p.pub.String(), "err", err)
		return
	}
	var buf [noise.MessageInitiationSize]byte
	msg := m.MarshalTo(buf[:0])
	p.cookieGen.AddMACs(msg, now)
	p.timersAnyAuthenticatedPacketTraversal()
	p.timersAnyAuthenticatedPacketSent()
	p.timersHandshakeInitiated()
	if p.sendControl(msg) {
		d.ctr.initiationsSent.Add(1)
		d.log.Debug("sent handshake initiation", "peer", p.pub.String())
	}
}

// runHandshakeWorker processes handshake messages until the device closes,
// those whose mac2 the receive path verified first (hsPriority): under a
// flood, an initiator that answered our cookie is not queued behind the
// flood's messages.
func (d *Device) runHandshakeWorker() {
	defer d.workersWG.Done()
	for {
		var hm *hsMessage
		select {
		case hm = <-d.hsPriority:
		default:
			select {
			case hm = <-d.hsPriority:
			case hm = <-d.handshakes:
			case <-d.quit:
				return
			}
		}
		d.handleHandshakeChecked(hm.buf[:hm.n], hm.ep, hm.macsOK)
		d.putHSMessage(hm)
	}
}

// handleHandshake checks the MACs (and, under load, the cookie and the rate
// limit) of one message and dispatches it.
func (d *Device) handleHandshake(msg []byte, src conn.Endpoint) {
	d.handleHandshakeChecked(msg, src, false)
}

// handleHandshakeChecked is handleHandshake; macsOK says the receive path
// has already verified mac1 and mac2 (under load).
func (d *Device) handleHandshakeChecked(msg []byte, src conn.Endpoint, macsOK bool) {
	id := d.ident.Load()
	if id == nil || !d.up.Load() {
		return
	}
	now := d.clock.Now()
	typ := noise.MessageType(msg)
	if typ == noise.MessageCookieReplyType {
		d.handleCookieReply(msg)
		return
	}
	if !macsOK && !id.checker.CheckMAC1(msg) {
		d.reject(RejectMAC1)
		return
	}
	if macsOK || d.underLoad() {
		if !macsOK && !id.checker.CheckMAC2(msg, src.Dst, now) {
			if d.sendCookieReply(id, msg, src, now) {
				d.cookieRepliesSent.Add(1)
			}
			d.reject(RejectCookie)
			return
		}
		if !d.limiter.allow(src.Dst.Addr(), now) {
			d.reject(RejectRateLimit)
			return
		}
	}
	switch typ {
	case noise.MessageInitiationType:
		d.handleInitiation(id, msg, src)
	case noise.MessageResponseType:
		d.handleResponse(id, msg, src)
	}
}

// sendCookieReply answers msg, an initiation or response with a valid mac1
// and no valid mac2, with a cookie reply (64 bytes, smaller than either,
// so never an amplification) and reports whether it sent one.
func (d *Device) sendCookieReply(id *identity, msg []byte, src conn.Endpoint, now time.Time) bool {
	var buf [noise.MessageCookieReplySize]byte
	reply := makeCookieReply(id, msg, src, now, buf[:0])
	if reply == nil {
		return false
	}
	d.sendTo(reply, src)
	return true
}

// makeCookieReply appends the cookie reply to msg (see sendCookieReply) to
// out; nil when msg is not an initiation or response.
func makeCookieReply(id *identity, msg []byte, src conn.Endpoint, now time.Time, out []byte) []byte {
	var sender uint32
	switch noise.MessageType(msg) {
	case noise.MessageInitiationType:
		var m noise.MessageInitiation
		if m.Unmarshal(msg) != nil {
			return nil
		}
		sender = m.Sender
	case noise.MessageResponseType:
		var m noise.MessageResponse
		if m.Unmarshal(msg) != nil {
			return nil
		}
		sender = m.Sender
	default:
		return nil
	}
	reply, err := id.checker.CreateReply(msg, sender, src.Dst, now)
	if err != nil {
		return nil
	}
	return reply.MarshalTo(out)
}

func (d *Device) handleCookieReply(msg []byte) {
	var m noise.MessageCookieReply
	if m.Unmarshal(msg) != nil {
		return
	}
	e, ok := d.indices.lookup(m.Receiver)
	if !ok || e.peer == nil || !e.peer.isRunning() {
		return
	}
	if e.peer.cookieGen.ConsumeReply(&m, d.clock.Now()) {
		d.cookieRepliesReceived.Add(1)
		d.log.Debug("received cookie reply", "peer", e.peer.pub.String())
		if e.kp == nil {
			// Our initiation was answered with a cookie: send it again
			// now, with mac2, rather than after RekeyTimeout.
			e.peer.sendInitiationAfter(true, m.Receiver)
		}
	}
}

func (d *Device) handleInitiation(id *identity, msg []byte, src conn.Endpoint) {
	var m noise.MessageInitiation
	if m.Unmarshal(msg) != nil {
		return
	}
	now := d.clock.Now()
	var p *peer
	hs, err := noise.ConsumeInitiation(id.local, &m, now, func(pk noise.PublicKey) *noise.Handshake {
		p = d.lookupPeer(pk)
		if p == nil {
			return nil
		}
		return p.hs.Load()
	})
	if err != nil || p == nil || hs == nil {
		d.reject(RejectInvalid)
		return
	}
	if !p.isRunning() {
		d.reject(RejectStale)
		return
	}
	// Consumed: it counts in the peer's transfer, as in the kernel.
	p.rxBytes.Add(uint64(len(msg)))
	p.timersAnyAuthenticatedPacketTraversal()
	p.timersAnyAuthenticatedPacketReceived()
	p.setEndpoint(src)

	p.hsMu.Lock()
	if p.hs.Load() != hs {
		p.hsMu.Unlock()
		return // the private key changed meanwhile
	}
	d.indices.release(p.hsIndex, p)
	idx := d.indices.newIndex(indexEntry{peer: p})
	p.hsIndex = 0
	resp, err := hs.CreateResponse(idx)
	if err != nil {
		d.indices.release(idx, p)
		p.hsMu.Unlock()
		d.log.Debug("cannot create response", "peer", p.pub.String(), "err", err)
		return
	}
	sess, err := hs.DeriveSession(now)
	if err != nil {
		d.indices.release(idx, p)
		p.hsMu.Unlock()
		return
	}
	kp := newKeypair(sess, p)
	d.indices.set(idx, indexEntry{peer: p, kp: kp})
	p.installSession(kp)
	p.hsMu.Unlock()

	var buf [noise.MessageResponseSize]byte
	out := resp.MarshalTo(buf[:0])
	p.cookieGen.AddMACs(out, now)
	p.timersSessionDerived()
	p.timersAnyAuthenticatedPacketTraversal()
	p.timersAnyAuthenticatedPacketSent()
	if p.sendControl(out) {
		d.ctr.completedResponder.Add(1)
	}
	d.log.Debug("answered handshake initiation", "peer", p.pub.String())
}

func (d *Device) handleResponse(id *identity, msg []byte, src conn.Endpoint) {
	var m noise.MessageResponse
	if m.Unmarshal(msg) != nil {
		return
	}
	var p *peer
	hs, err := noise.ConsumeResponse(id.local, &m, func(i uint32) *noise.Handshake {
		e, ok := d.indices.lookup(i)
		if !ok || e.kp != nil || e.peer == nil {
			return nil
		}
		p = e.peer
		return p.hs.Load()
	})
	if err != nil || p == nil || hs == nil {
		if p == nil {
			d.reject(RejectStale) // an index the device does not wait on
		} else {
			d.reject(RejectInvalid)
		}
		return
	}
	if !p.isRunning() {
		d.reject(RejectStale)
		return
	}
	// Consumed: it counts in the peer's transfer, as in the kernel.
	p.rxBytes.Add(uint64(len(msg)))
	now := d.clock.Now()
	p.hsMu.Lock()
	if p.hs.Load() != hs || hs.LocalIndex() != m.Receiver || p.hsIndex != m.Receiver {
		p.hsMu.Unlock()
		d.reject(RejectStale)
		return
	}
	sess, err := hs.DeriveSession(now)
	if err != nil {
		p.hsMu.Unlock()
		return
	}
	kp := newKeypair(sess, p)
	if !d.indices.set(m.Receiver, indexEntry{peer: p, kp: kp}) {
		p.hsMu.Unlock()
		return
	}
	p.hsIndex = 0
	p.installSession(kp)
	p.hsMu.Unlock()
	d.ctr.completedInitiator.Add(1)

	p.timersAnyAuthenticatedPacketTraversal()
	p.timersAnyAuthenticatedPacketReceived()
	p.timersHandshakeComplete()
	p.timersSessionDerived()
	p.setEndpoint(src)
	d.log.Debug("handshake complete", "peer", p.pub.String())
	// Confirm the session at once: staged data if any, else a keepalive.
	p.sendKeepalive()
}
