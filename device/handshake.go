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
// while it is filling (under load) every initiation and response must carry
// a valid mac2, others get a cookie reply, and a per-source-IP token bucket
// limits the work done for each address.

import (
	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
)

// sendControl sends one handshake message to the peer's current route, in
// the control read section so that grace periods cover it.
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
		d.ctr.socketSendErrors.Add(1)
		d.log.Debug("cookie reply send failed", "to", ep.Dst, "err", err)
	}
}

// sendInitiation starts a handshake. A retry keeps counting attempts; a
// fresh start resets them. Initiations are at most one per RekeyTimeout.
func (p *peer) sendInitiation(retry bool) {
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
	if last := p.lastInitSent.Load(); last != 0 && now.UnixNano()-last < int64(d.tm.rekeyTimeout) {
		p.hsMu.Unlock()
		return
	}
	p.lastInitSent.Store(now.UnixNano())
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

// runHandshakeWorker processes handshake messages until the device closes.
func (d *Device) runHandshakeWorker() {
	defer d.workersWG.Done()
	for {
		select {
		case hm := <-d.handshakes:
			d.handleHandshake(hm.buf[:hm.n], hm.ep)
			hsMessagePool.Put(hm)
		case <-d.quit:
			return
		}
	}
}

// handleHandshake checks the MACs (and, under load, the cookie and the rate
// limit) of one message and dispatches it.
func (d *Device) handleHandshake(msg []byte, src conn.Endpoint) {
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
	if !id.checker.CheckMAC1(msg) {
		d.reject(RejectMAC1)
		if d.debug() {
			d.log.Debug("handshake with bad mac1", "from", src.Dst)
		}
		return
	}
	if d.underLoad() {
		if !id.checker.CheckMAC2(msg, src.Dst, now) {
			var sender uint32
			switch typ {
			case noise.MessageInitiationType:
				var m noise.MessageInitiation
				if m.Unmarshal(msg) != nil {
					return
				}
				sender = m.Sender
			case noise.MessageResponseType:
				var m noise.MessageResponse
				if m.Unmarshal(msg) != nil {
					return
				}
				sender = m.Sender
			}
			reply, err := id.checker.CreateReply(msg, sender, src.Dst, now)
			if err != nil {
				return
			}
			var buf [noise.MessageCookieReplySize]byte
			d.sendTo(reply.MarshalTo(buf[:0]), src)
			d.cookieRepliesSent.Add(1)
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
		if d.debug() {
			d.log.Debug("rejected handshake initiation", "from", src.Dst, "err", err)
		}
		return
	}
	if !p.isRunning() {
		d.reject(RejectStale)
		return
	}
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
		if d.debug() {
			d.log.Debug("rejected handshake response", "from", src.Dst, "err", err)
		}
		return
	}
	if !p.isRunning() {
		d.reject(RejectStale)
		return
	}
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
