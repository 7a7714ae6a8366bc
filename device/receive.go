package device

// The receive pipeline:
//
//	Bind ReceiveFunc (one goroutine per socket, batches, into the
//	goroutine's own 64 KiB landing buffers; each datagram goes to an
//	MTU-sized packet, or a large one when a peer's MTU is bigger: opened
//	straight into it on the direct path below, copied otherwise)
//	  -> classify where it landed (type, size, receiver index) before
//	     any buffer is taken; junk and unknown indices dropped, counted
//	     (Device.Drops), never given a packet
//	  -> handshake messages to the handshake queue (bounded, from a
//	     bounded free list; its length, or the arrival rate, decides
//	     "under load"); under load: one that waited in the socket's
//	     buffer past StaleHandshakeAge dropped unread (kernel receive
//	     timestamps, on only while under load: stale.go), mac1 checked
//	     here, a verified mac2 to the priority queue, no valid mac2
//	     answered here with a cookie reply (one sendmmsg per batch),
//	     never queued
//	  -> transport: receiver index -> session (index read lock per batch)
//	  -> group by session into batches; a small batch (every batch on
//	     <= 2 cores) with nothing queued for the peer's receiver is
//	     opened and delivered right here under peer.recvMu (no hand-off,
//	     no wake-up; deliverDirect)
//	  -> otherwise: the peer's ordered queue, then opened right here
//	     (small batches) or by the crypto workers (one per
//	     thread running Go code: internal/sys/procs)
//	peer receiver (one goroutine per peer)                     sequential
//	  -> wait for the batch (one mutex hand-off per batch)
//	deliver (under peer.recvMu, from the receiver or deliverDirect)
//	  -> replay window, session limits, key confirmation
//	  -> inner packet checks and crypto-routing (allowed IPs read lock per
//	     batch): the inner source must belong to this peer
//	  -> roaming: at most one route publish per batch, none when unchanged
//	  -> first packets of TCP/UDP runs copied to 64 KiB buffers so that
//	     the TUN device can merge each run (tun.HeadRoom)
//	  -> TUN Write(batch), timers, buffers back to the pool

import (
	"encoding/binary"
	"runtime"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun"
)

// runReceive reads datagrams from one socket until the bind closes.
func (d *Device) runReceive(fn conn.StampedReceiveFunc) {
	defer d.recvWG.Done()
	bs := d.bind.BatchSize()
	if bs <= 0 || bs > conn.IdealBatchSize {
		bs = conn.IdealBatchSize
	}
	pkts := make([]*packet, bs)
	bufs := make([][]byte, bs)
	sizes := make([]int, bs)
	eps := make([]conn.Endpoint, bs)
	arrived := make([]int64, bs) // receive timestamps, while under load (stale.go)
	kps := make([]*keypair, bs)
	var seen []*keypair
	var out tunOut // what this read delivered directly, written at its end (tunout.go)
	failures := 0
	var rate hsRate // this goroutine's handshake arrival rate
	// Cookie replies made under load, sent once per batch (one sendmmsg
	// where the bind can) through this goroutine's own sender.
	var cookieBufs [][noise.MessageCookieReplySize]byte
	var cookieOut [][]byte
	var cookieRoutes []*conn.Route
	var tx *txState
	defer func() {
		if tx != nil {
			tx.close()
		}
	}()
	// Datagrams land in this goroutine's own fixed buffers, each large
	// enough for any UDP datagram (and, with UDP GRO, for a whole coalesced
	// train), and reach MTU-sized packets either by being opened straight
	// into them (a batch this goroutine opens itself) or by a copy (a batch
	// handed on). Rather than circulating 64 KiB packets through the
	// pipeline, only the rare datagram larger than our MTU allows (a peer
	// with a larger MTU) takes one of the pool's few large packets.
	landing := make([][]byte, bs)
	for i := range landing {
		landing[i] = make([]byte, 1<<16-1)
	}
	for {
		d.pool.getPackets(pkts)
		copy(bufs, landing) // the bind may have replaced them by views (conn.ViewReceiver)
		n, err := fn(bufs, sizes, eps, arrived)
		if err != nil {
			if isClosedErr(err) {
				break
			}
			failures++
			d.ctr.socketReceiveErrors.Add(1)
			d.log.Debug("receive failed", "err", err)
			if failures > 64 {
				time.Sleep(time.Millisecond) // do not spin on a broken socket
			}
			if n == 0 {
				continue
			}
		} else {
			failures = 0
		}
		seen = seen[:0]
		// Every datagram is classified where it landed: its type and size,
		// and for a transport message its receiver index, are checked
		// before it is given any buffer of its own, so junk and unknown
		// indices cost no buffer at all. Only a transport message for a
		// live session that does not fit an MTU-sized packet (a peer
		// with a larger MTU) takes one of the pool's few large packets,
		// and is dropped when none is free.
		var junk, unknown, noBuffer, hsFull, cookies, badMAC1, stale uint64
		// Whether the device is under load, looked at once per batch and
		// only for a batch with handshake messages.
		loaded, loadChecked := false, false
		var id *identity
		var now time.Time
		var wall int64 // the wall clock for receive timestamps, read on first use
		// Runs of datagrams name the same index; the map is looked up
		// once per run (it cannot change under the read lock).
		var lastIdx uint32
		var last indexEntry
		haveLast := false
		d.indices.mu.RLock()
		for i := 0; i < n; i++ {
			kps[i] = nil
			msg := bufs[i][:sizes[i]]
			switch noise.MessageType(msg) {
			case noise.MessageTransportType:
				idx, ctr, ok := noise.ParseTransportHeader(msg)
				if !ok {
					junk++
					continue
				}
				if !haveLast || idx != lastIdx {
					e, ok := d.indices.m[idx]
					if !ok {
						haveLast = false
						unknown++
						continue
					}
					lastIdx, last, haveLast = idx, e, true
				}
				e := last
				if e.kp == nil {
					unknown++
					continue
				}
				if sizes[i] > len(pkts[i].buf) {
					lp := d.pool.exchangeLarge(pkts[i])
					if lp == nil {
						noBuffer++
						continue
					}
					pkts[i] = lp
				}
				kps[i] = e.kp
				pkts[i].src = msg // copied or opened below
				pkts[i].n = sizes[i]
				pkts[i].counter = ctr
				pkts[i].ep = eps[i]
				if !containsKeypair(seen, e.kp) {
					seen = append(seen, e.kp)
				}
			case noise.MessageInitiationType, noise.MessageResponseType, noise.MessageCookieReplyType:
				if !handshakeSizeOK(msg) {
					junk++
					continue
				}
				if !loadChecked {
					now = d.clock.Now()
					loaded, loadChecked = d.underLoadAt(now, &rate), true
					id = d.ident.Load()
				}
				isCookie := noise.MessageType(msg) == noise.MessageCookieReplyType
				if !isCookie {
					rate.count++
				}
				if loaded && isStale(arrived[i], &wall) {
					// Waited in the socket's buffer past any use: the
					// backlog is worked off at the price of this check.
					stale++
					continue
				}
				if loaded && id != nil && !isCookie {
					// Under load, an initiator that answered our cookie
					// goes ahead of the flood (the priority queue); any
					// other message with a valid mac1 gets its cookie
					// reply right here, never queued behind the flood.
					if !id.checker.CheckMAC1(msg) {
						badMAC1++
						continue
					}
					if !hasMAC2(msg) || !id.checker.CheckMAC2(msg, eps[i].Dst, now) {
						if cookieBufs == nil {
							cookieBufs = make([][noise.MessageCookieReplySize]byte, bs)
						}
						if r := makeCookieReply(id, msg, eps[i], now, cookieBufs[len(cookieOut)][:0]); r != nil {
							cookieOut = append(cookieOut, r)
							cookieRoutes = append(cookieRoutes, conn.NewRoute(eps[i], 0))
							cookies++
						}
						continue
					}
					hm := d.getHSMessage()
					if hm == nil {
						hsFull++
						continue
					}
					hm.n = copy(hm.buf[:], msg)
					hm.ep, hm.macsOK = eps[i], true
					select {
					case d.hsPriority <- hm:
						continue
					default:
					}
					// Under load the main queue holds no message
					// without a valid mac2: the overflow waits there.
					select {
					case d.handshakes <- hm:
					default:
						d.putHSMessage(hm)
						hsFull++
					}
					continue
				}
				// Copied out so that a flood cannot pin data-path
				// buffers, into the device's bounded free list.
				hm := d.getHSMessage()
				if hm == nil {
					hsFull++
					continue
				}
				hm.n = copy(hm.buf[:], msg)
				hm.ep = eps[i]
				select {
				case d.handshakes <- hm:
				default:
					d.putHSMessage(hm)
					hsFull++
				}
			default:
				junk++
			}
		}
		d.indices.mu.RUnlock()
		if loaded && !d.stamps.on.Load() {
			d.startStamps()
		}
		if len(cookieOut) > 0 {
			if tx == nil {
				tx = d.newTxState()
			}
			d.sendCookies(tx, cookieOut, cookieRoutes)
			clear(cookieRoutes)
			cookieOut, cookieRoutes = cookieOut[:0], cookieRoutes[:0]
		}
		if junk|unknown|noBuffer|hsFull|cookies|badMAC1|stale != 0 {
			d.drop(DropMalformed, int(junk))
			d.drop(DropHandshakeStale, int(stale))
			d.drop(DropUnknownIndex, int(unknown))
			d.drop(DropNoBuffer, int(noBuffer))
			d.drop(DropHandshakeQueue, int(hsFull))
			d.rejectN(RejectMAC1, badMAC1)
			d.rejectN(RejectCookie, cookies)
			add(&d.cookieRepliesSent, cookies)
		}
		// One clock read for every peer's batch of this read: with many
		// peers a read is many batches of one or two packets each.
		if len(seen) > 0 {
			now = d.clock.Now()
		}
		for _, kp := range seen {
			p := kp.peer
			r := p.current()
			b := d.pool.getBatch()
			b.send, b.peer, b.kp = false, p, kp
			for i := 0; i < n; i++ {
				if kps[i] == kp {
					b.pkts = append(b.pkts, pkts[i])
					pkts[i] = nil
					kps[i] = nil
				}
			}
			if r == nil {
				d.pool.putBatch(b)
				continue
			}
			if p.deliverDirect(r, b, now, &out) {
				continue
			}
			if out.holds(p) {
				out.flush(d) // p's packets of this read go first
			}
			b.materialize()
			d.dispatch(b, r.inbound, &r.pendingIn, r.stopped)
		}
		out.flush(d)
		for _, pk := range pkts[:n] {
			if pk != nil {
				pk.src = nil // the landing buffers are about to be reused
			}
		}
		clear(kps)
	}
	d.pool.putPackets(pkts)
}

// sendCookies sends cookie replies, bufs[i] to routes[i], in one call where
// the bind sends to many addresses at once, inside tx's read section.
func (d *Device) sendCookies(tx *txState, bufs [][]byte, routes []*conn.Route) {
	tx.reader.Enter()
	defer tx.reader.Exit()
	if se, ok := tx.out.(interface {
		SendEach([][]byte, []*conn.Route) error
	}); ok {
		se.SendEach(bufs, routes) // a lost reply is retried by its sender
		return
	}
	for i := range bufs {
		tx.out.Send(bufs[i:i+1], routes[i])
	}
}

// hsMessage is a handshake message waiting for a handshake worker.
type hsMessage struct {
	buf [noise.MessageInitiationSize]byte
	n   int
	ep  conn.Endpoint
	// macsOK: the receive path verified mac1 and mac2 (under load).
	macsOK bool
}

// hsFreeSize bounds the handshake messages a device ever allocates: the
// queue, one per worker, and a few in the receive goroutines' hands.
func hsFreeSize() int { return HandshakeQueueSize + runtime.NumCPU() + 16 }

// getHSMessage returns a free handshake message, allocating one only while
// the device has fewer than hsFreeSize; nil when all are in use (the
// message is dropped and counted).
func (d *Device) getHSMessage() *hsMessage {
	select {
	case hm := <-d.hsFree:
		return hm
	default:
	}
	if d.hsMade.Add(1) > int32(cap(d.hsFree)) {
		d.hsMade.Add(-1)
		return nil
	}
	return new(hsMessage)
}

// putHSMessage returns hm to the device's free list.
func (d *Device) putHSMessage(hm *hsMessage) {
	hm.ep, hm.macsOK = conn.Endpoint{}, false
	select {
	case d.hsFree <- hm:
	default:
		d.hsMade.Add(-1)
	}
}

// hasMAC2 reports whether an initiation or response carries a mac2 at all
// (a sender without a cookie leaves it zero).
func hasMAC2(msg []byte) bool {
	var zero [noise.MACSize]byte
	return len(msg) >= noise.MACSize && string(msg[len(msg)-noise.MACSize:]) != string(zero[:])
}

// handshakeSizeOK reports whether msg has the exact size of its type.
func handshakeSizeOK(msg []byte) bool {
	switch noise.MessageType(msg) {
	case noise.MessageInitiationType:
		return len(msg) == noise.MessageInitiationSize
	case noise.MessageResponseType:
		return len(msg) == noise.MessageResponseSize
	case noise.MessageCookieReplyType:
		return len(msg) == noise.MessageCookieReplySize
	}
	return false
}

func containsKeypair(ks []*keypair, k *keypair) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// materialize copies every packet of b that still lives in the receive
// goroutine's landing buffers into its own buffer, before b leaves that
// goroutine.
func (b *batch) materialize() {
	for _, pk := range b.pkts {
		if pk.src != nil {
			copy(pk.buf, pk.src)
			pk.src = nil
		}
	}
}

// open authenticates and decrypts one transport message into pk.buf, from
// pk.src when the datagram is still where it landed, else in place.
func (d *Device) open(kp *keypair, pk *packet, nonce []byte) {
	binary.LittleEndian.PutUint64(nonce[4:], pk.counter)
	ct := pk.buf[tun.Offset:pk.n]
	if pk.src != nil {
		ct, pk.src = pk.src[tun.Offset:pk.n], nil
	}
	out, err := kp.receive.Open(pk.buf[tun.Offset:tun.Offset], nonce, ct, nil)
	if err != nil {
		pk.ok = false
		return
	}
	pk.ok = true
	pk.n = tun.Offset + len(out)
}

// innerSource returns the source address bytes of an IP packet and its
// length from its own header, or ok false when it is malformed.
func innerSource(pkt []byte) (src []byte, length int, ok bool) {
	if len(pkt) < 1 {
		return nil, 0, false
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return nil, 0, false
		}
		l := int(binary.BigEndian.Uint16(pkt[2:4]))
		if l < 20 || l > len(pkt) {
			return nil, 0, false
		}
		return pkt[12:16], l, true
	case 6:
		if len(pkt) < 40 {
			return nil, 0, false
		}
		l := int(binary.BigEndian.Uint16(pkt[4:6])) + 40
		if l > len(pkt) {
			return nil, 0, false
		}
		return pkt[8:24], l, true
	}
	return nil, 0, false
}

// runReceiver delivers the peer's opened batches: replay and limit checks,
// key confirmation, crypto-routing, roaming, then one TUN write per batch.
func (p *peer) runReceiver(r *peerRun) {
	defer r.wg.Done()
	d := p.d
	for {
		b := nextBatch(r.inbound, r.stopped)
		if b == nil {
			return
		}
		p.recvMu.Lock()
		p.deliver(b, &p.heads, d.clock.Now(), nil)
		p.recvMu.Unlock()
		d.pool.putBatch(b)
		r.pendingIn.Add(-1)
	}
}

// deliverDirect opens and delivers b in the calling receive goroutine when
// it is small enough to open inline (see defaultInlineCrypto) and no
// earlier batch is still queued for the peer's receiver, saving the
// hand-off to (and the wake-up of) that goroutine. It reports whether it
// took b. A receive goroutine's own batches stay in order: it queues one
// only after counting it in pendingIn (and writing out what out holds of
// the peer), and delivers directly only once every queued batch has been
// delivered. now is the time of the read that brought b; out takes the
// packets for the read's one TUN write.
func (p *peer) deliverDirect(r *peerRun, b *batch, now time.Time, out *tunOut) bool {
	d := p.d
	if r.pendingIn.Load() != 0 || len(b.pkts) > int(d.inlineCrypto.Load()) {
		return false
	}
	p.recvMu.Lock()
	if r.pendingIn.Load() != 0 {
		p.recvMu.Unlock()
		return false
	}
	select {
	case <-r.stopped:
		p.recvMu.Unlock()
		d.pool.putBatch(b)
		return true
	default:
	}
	for _, pk := range b.pkts {
		d.open(b.kp, pk, b.nonce[:])
	}
	kept := p.deliver(b, &p.heads, now, out)
	p.recvMu.Unlock()
	if !kept {
		d.pool.putBatch(b)
	}
	return true
}

// deliver checks and writes one opened batch; heads is the receiver's
// room for the TUN device's merging (tun.HeadRoom); now is the device
// clock read at most one receive batch earlier (the session age checks).
// With out, the checked packets go there to be written with the read's
// others (then deliver keeps b, and reports it: out returns it to the
// pool) instead of being written here.
func (p *peer) deliver(b *batch, heads *tun.HeadRoom, now time.Time, out *tunOut) (kept bool) {
	d := p.d
	kp := b.kp
	if now.Sub(kp.created) >= d.tm.rejectAfterTime {
		d.drop(DropExpired, len(b.pkts))
		return false
	}
	var last conn.Endpoint
	valid, data := false, false
	var rx uint64
	bufs := b.bufs[:0]
	locked := false
	// Drops by reason, counted once per batch (only when there are some).
	var undecrypted, expired, replayed, notAllowed int
	for _, pk := range b.pkts {
		if !pk.ok {
			undecrypted++
			continue
		}
		if pk.counter >= RejectAfterMessages {
			expired++
			continue
		}
		if !kp.replay.Validate(pk.counter, RejectAfterMessages) {
			replayed++
			continue
		}
		valid = true
		last = pk.ep
		// The transfer counts whole transport messages (header, padded
		// ciphertext, tag) that were keepalives or delivered, as the
		// kernel does: not those it drops for their content.
		size := uint64(pk.n + noise.AEADTagSize)
		plain := pk.buf[tun.Offset:pk.n]
		if len(plain) == 0 {
			rx += size
			continue // keepalive
		}
		src, l, ok := innerSource(plain)
		if !ok {
			notAllowed++
			continue
		}
		if !locked {
			d.allowedMu.RLock()
			locked = true
		}
		if owner, ok := d.allowed.LookupBytes(src); !ok || owner != p {
			notAllowed++
			continue
		}
		rx += size
		data = true
		bufs = append(bufs, pk.buf[:tun.Offset+l])
	}
	if locked {
		d.allowedMu.RUnlock()
	}
	b.bufs = bufs
	if undecrypted|expired|replayed|notAllowed != 0 {
		d.drop(DropDecrypt, undecrypted)
		d.drop(DropExpired, expired)
		d.drop(DropReplay, replayed)
		d.drop(DropNotAllowed, notAllowed)
	}
	if !valid {
		return false
	}
	p.rxBytes.Add(rx)
	if p.rotateOnConfirm(kp) {
		p.timersHandshakeComplete()
		defer p.flushStaged()
	}
	p.keepKeyFreshReceiving(kp, now)
	p.timersAnyAuthenticatedPacketTraversal()
	p.timersAnyAuthenticatedPacketReceived()
	if data {
		p.timersDataReceived()
	}
	p.setEndpoint(last) // roaming: one publish at most, none when unchanged
	if len(bufs) > 0 {
		if out != nil {
			out.add(d, b, bufs)
			return true
		}
		if d.tunMerges {
			heads.Prepare(bufs, tun.Offset)
		}
		if _, err := d.tun.Write(bufs, tun.Offset); err != nil {
			d.ctr.tunWriteErrors.Add(1)
			d.log.Debug("TUN write failed", "err", err)
		}
	}
	return false
}

// keepKeyFreshReceiving makes an initiator start a new handshake when
// its session is close to expiry and data still arrives.
func (p *peer) keepKeyFreshReceiving(kp *keypair, now time.Time) {
	if !kp.isInitiator || now.Sub(kp.created) < p.d.tm.rekeyOnReceiveAge {
		return
	}
	if kp != p.keypairs.current.Load() {
		return
	}
	if p.timers.sentLastMinuteHandshake.Swap(true) {
		return
	}
	p.startHandshake()
}
