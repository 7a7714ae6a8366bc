package device

// The send pipeline:
//
//	TUN Read (one goroutine, batches; the first packet lands in the
//	reader's 64 KiB scratch buffer so a raised MTU never fails a read)
//	  -> route by destination in allowed IPs (read lock per batch);
//	     no peer: an ICMP error back into the TUN device (icmp.go)
//	  -> per-peer staging queue (bounded; no session: start a handshake)
//	  -> nonce assignment: one atomic Add per peer per batch   per peer
//	  -> small batch (every batch with <= 2 Go threads) and nothing queued for
//	     the peer's sender: sealed right here, under stageMu (no
//	     hand-off, no wake-up), and gathered: the sealed batches of every
//	     peer of one TUN read leave together, one SendEach (one sendmmsg)
//	     per read instead of one per peer (txGather); a read for one
//	     peer keeps that peer's own send
//	  -> otherwise: batch to the peer's ordered queue, then either
//	     sealed right here (small batches), or handed to the crypto
//	     workers (one per thread running Go code: internal/sys/procs)
//	  -> pad, seal in place, unlock the batch
//	peer sender (one goroutine per peer)                       sequential
//	  -> wait for the batch (one mutex hand-off per batch)
//	transmit (sender, or the TUN reader for a direct batch)
//	  -> RCU read section: borrow the route, send the batch      no lock
//	     through the goroutine's own conn.Sender (own scratch)
//	  -> timers, counters, buffers back to the pool
//
// RefMode replaces the borrowed route by the conventional locked path:
// device read lock and per-peer endpoint mutex per batch, and a route built
// for every send.

import (
	"encoding/binary"
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/internal/sys/procs"
	"github.com/wirelane/wirelane/tun"
)

// The transport header must fit exactly in the TUN offset.
var _ [tun.Offset - noise.MessageTransportHeaderSize]struct{}
var _ [noise.MessageTransportHeaderSize - tun.Offset]struct{}

// batchSize is the largest batch moved through the pipeline.
func (d *Device) batchSize() int {
	n := conn.IdealBatchSize
	if b := d.bind.BatchSize(); b > 0 && b < n {
		n = b
	}
	if b := d.tun.BatchSize(); b > 0 && b < n {
		n = b
	}
	return n
}

// runTUNReader reads packets from the TUN device and routes them to peers.
//
// The reads follow the one TUN pump's policy (tun.Reader): the first
// buffer is the reader's own, large enough for any IP packet (a Linux TUN
// device with offloads delivers one packet that is not a TSO train in
// bufs[0], and just after a raised MTU it can be larger than the pool's
// buffers); it is copied into a packet that fits: for a TSO train that is
// one segment in dozens, for single packets a copy next to the one the
// TUN device already makes. A packet that fits nowhere, or a read the TUN
// device rejects, is dropped and logged; only a closed or broken device
// ends the loop.
func (d *Device) runTUNReader() {
	defer close(d.tunDone)
	bs := d.batchSize()
	pkts := make([]*packet, bs)
	tx := d.newReaderTxState() // for batches sent without the hand-off
	defer tx.close()
	owners := make([]*peer, bs)
	icmp := newICMPErrors()
	rd := tun.NewReader(d.tun, tun.ReaderConfig{Batch: bs, Fatal: tunReadFatal, CallerBuffers: true,
		Dropped: func(err error) {
			// The MTU may have changed under the read.
			d.log.Warn("TUN read: packet dropped", "err", err)
			d.refreshMTU()
		}})
	bufs, sizes := rd.Buffers(), make([]int, bs)
	var peers []*peer
	group := make([]*packet, 0, bs)
	for {
		d.pool.getPackets(pkts)
		for i := 1; i < bs; i++ {
			// Leave room for the tag after the plaintext.
			bufs[i] = pkts[i].buf[:len(pkts[i].buf)-noise.AEADTagSize]
		}
		n, err := rd.Read()
		if err != nil {
			if d.closing.Load() {
				break
			}
			// The TUN device went away (or broke): the device goes too.
			if !errors.Is(err, os.ErrClosed) {
				d.log.Error("TUN read failed, closing device", "err", err)
			}
			go d.Close()
			break
		}
		if n == 0 {
			continue
		}
		for i := 0; i < n; i++ {
			sizes[i] = len(rd.Packet(i))
		}
		if !d.up.Load() {
			continue // buffers stay in pkts for the next read
		}
		if !d.takeScratch(pkts, rd.Packet(0)) {
			sizes[0] = -1 // dropped
			d.drop(DropTooBig, 1)
		}
		noPeer, noEndpoint := 0, 0
		peers = peers[:0]
		d.allowedMu.RLock()
		for i := 0; i < n; i++ {
			owners[i] = nil
			if sizes[i] < 0 {
				continue
			}
			pkt := pkts[i].buf[tun.Offset : tun.Offset+sizes[i]]
			var dst []byte
			switch {
			case len(pkt) >= 20 && pkt[0]>>4 == 4:
				dst = pkt[16:20]
			case len(pkt) >= 40 && pkt[0]>>4 == 6:
				dst = pkt[24:40]
			default:
				noPeer++
				continue
			}
			p, ok := d.allowed.LookupBytes(dst)
			if !ok {
				noPeer++
				sizes[i] = -2 // no peer: answered below, outside the lock
				continue
			}
			if p.routes.Borrow() == nil {
				// A peer with no endpoint (none configured, none learnt):
				// dropped and answered like no peer, as the kernel does
				// (-EDESTADDRREQ and the same ICMP error). Only the
				// pointer is looked at, so no RCU section is needed.
				noEndpoint++
				sizes[i] = -2
				continue
			}
			owners[i] = p
			pkts[i].n = sizes[i]
			if len(peers) == 0 || (peers[len(peers)-1] != p && !containsPeer(peers, p)) {
				peers = append(peers, p)
			}
		}
		d.allowedMu.RUnlock()
		d.drop(DropNoPeer, noPeer)
		d.drop(DropNoEndpoint, noEndpoint)
		for i := 0; noPeer+noEndpoint > 0 && i < n; i++ {
			if sizes[i] == -2 {
				d.sendUnreachable(icmp, rd.Packet(i))
			}
		}
		for _, p := range peers {
			group = group[:0]
			for i := 0; i < n; i++ {
				if owners[i] == p {
					group = append(group, pkts[i])
					pkts[i] = nil
					owners[i] = nil
				}
			}
			p.stagePackets(group)
			p.flushStagedDirect(tx)
		}
		clear(group[:cap(group)])
		tx.sendGathered(d)
	}
	d.pool.putPackets(pkts)
}

// takeScratch copies the packet read into the scratch buffer into pkts[0],
// after following an MTU change when it does not fit. It reports false
// (and logs) when the packet is larger than the MTU allows.
func (d *Device) takeScratch(pkts []*packet, pkt []byte) bool {
	if tun.Offset+len(pkt)+noise.AEADTagSize > len(pkts[0].buf) {
		d.refreshMTU()
		d.pool.getPackets(pkts[:1]) // a buffer of the new size, if any
		if tun.Offset+len(pkt)+noise.AEADTagSize > len(pkts[0].buf) {
			d.log.Warn("TUN packet larger than the MTU dropped", "len", len(pkt), "mtu", d.mtu.Load())
			return false
		}
	}
	copy(pkts[0].buf[tun.Offset:], pkt)
	return true
}

// tunReadFatal reports whether a TUN read error means the device is gone
// or broken (tun.ReadFatal, or the engine's own closed errors) rather than
// one packet the device could not deliver.
func tunReadFatal(err error) bool {
	return isClosedErr(err) || tun.ReadFatal(err)
}

func containsPeer(ps []*peer, p *peer) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// stagePackets queues pkts for the peer, dropping the oldest packets
// beyond MaxStagedPackets.
func (p *peer) stagePackets(pkts []*packet) {
	p.stageMu.Lock()
	p.staged = append(p.staged, pkts...)
	if over := len(p.staged) - MaxStagedPackets; over > 0 {
		p.d.drop(DropStagedOverflow, over)
		p.d.pool.putPackets(p.staged[:over])
		n := copy(p.staged, p.staged[over:])
		clear(p.staged[n:])
		p.staged = p.staged[:n]
	}
	p.stageMu.Unlock()
}

// sendKeepalive sends an empty transport packet, unless data is already
// waiting to go.
func (p *peer) sendKeepalive() {
	p.stageMu.Lock()
	if len(p.staged) == 0 {
		var one [1]*packet
		p.d.pool.getPackets(one[:])
		one[0].n = 0
		p.staged = append(p.staged, one[0])
	}
	p.stageMu.Unlock()
	p.flushStaged()
}

// flushStaged hands the staged packets to the crypto workers under the
// current session, or starts a handshake when there is none.
func (p *peer) flushStaged() { p.flushStagedDirect(nil) }

// flushStagedDirect is flushStaged for the TUN reader, which passes its own
// sending state: a batch sealed inline while nothing is queued for the peer's
// sender is sent right here, under stageMu, saving the hand-off to (and the
// wake-up of) the sender goroutine. Counter order still holds: every batch
// is queued or sent under stageMu, and a direct send happens only when all
// earlier batches have left. peer.stop takes stageMu after closing stopped,
// so no direct send outlives it.
func (p *peer) flushStagedDirect(tx *txState) {
	d := p.d
	r := p.current()
	if r == nil {
		p.dropStaged()
		return
	}
	now := d.clock.Now()
	p.stageMu.Lock()
	if len(p.staged) == 0 {
		p.stageMu.Unlock()
		return
	}
	kp := p.keypairs.current.Load()
	if !kp.canSend(now, &d.tm) {
		p.stageMu.Unlock()
		p.startHandshake()
		return
	}
	bs := d.batchSize()
	sent := 0
	for sent < len(p.staged) {
		chunk := p.staged[sent:min(sent+bs, len(p.staged))]
		n := uint64(len(chunk))
		first := kp.sendNonce.Add(n) - n
		if first+n > RejectAfterMessages {
			break // the session is spent; the rest waits for a new one
		}
		b := d.pool.getBatch()
		b.send, b.peer, b.kp = true, p, kp
		for i, pk := range chunk {
			pk.counter = first + uint64(i)
			b.pkts = append(b.pkts, pk)
		}
		sent += len(chunk)
		if tx != nil && r.pending.Load() == 0 && len(b.pkts) <= int(d.inlineCrypto.Load()) {
			select {
			case <-r.stopped:
				d.pool.putBatch(b)
				continue
			default:
			}
			for _, pk := range b.pkts {
				d.seal(kp, pk, b.nonce[:])
			}
			if tx.gather != nil {
				tx.gatherBatch(d, b, r)
				continue
			}
			p.transmit(b, tx)
			continue
		}
		if tx != nil && r.gathered.Load() {
			// The peer's sender would wait for the gathered batch
			// before this one: send it now, so that a full queue
			// cannot leave this goroutine waiting for that sender.
			tx.sendGathered(d)
		}
		d.dispatch(b, r.outbound, &r.pending, r.stopped)
	}
	n := copy(p.staged, p.staged[sent:])
	clear(p.staged[n:])
	p.staged = p.staged[:n]
	p.stageMu.Unlock()
	if n > 0 {
		p.startHandshake()
	}
	p.keepKeyFreshSending(kp, now)
}

// keepKeyFreshSending starts a handshake when the current session is near
// its message limit, or (for its initiator) its age limit.
func (p *peer) keepKeyFreshSending(kp *keypair, now time.Time) {
	if kp == nil {
		return
	}
	if kp.sendNonce.Load() > p.d.tm.rekeyAfterMessages ||
		(kp.isInitiator && now.Sub(kp.created) > p.d.tm.rekeyAfterTime) {
		p.startHandshake()
	}
}

// startHandshake sends an initiation from another goroutine unless one was
// sent less than RekeyTimeout ago or is about to be.
func (p *peer) startHandshake() {
	last := p.lastInitSent.Load()
	if last != 0 && p.d.stamp(p.d.clock.Now())-last < int64(p.d.tm.rekeyTimeout) {
		return
	}
	if p.initPending.Swap(true) {
		return
	}
	go func() {
		defer p.initPending.Store(false)
		p.sendInitiation(false)
	}()
}

// txState belongs to one sending goroutine (the TUN reader, a peer's
// sender): its RCU reader for borrowing routes, and its conn.Sender, whose
// scratch space no other goroutine touches, so a send never reaches for a
// shared pool.
type txState struct {
	reader  *conn.Reader
	out     conn.Sender
	release func()
	// gather, when not nil, collects the batches the TUN reader seals
	// inline during one read, for every peer, so that they leave in one
	// SendEach (txGather); nil for peers' senders, in ref mode, and on a
	// bind whose Sender cannot send to many routes at once.
	gather *txGather
}

// eachSender is a Sender that sends bufs[i] to routes[i] in one call
// (conn.StdBind's: one sendmmsg for many peers).
type eachSender interface {
	SendEach(bufs [][]byte, routes []*conn.Route) error
}

// txGather is the TUN reader's batches of one read, sealed and waiting
// for one SendEach. With many peers a read of 128 packets spans up to 128
// of them; sent batch by batch, each peer's one or two packets cost a
// system call of their own.
//
// Order: a batch is gathered only when nothing is queued for its peer's
// sender (pending is zero, under stageMu), and run.gathered stays set
// until the gather is sent, so a batch queued for the peer after it
// waits in runSender until then; peer.stop waits for it too, so no
// gathered batch leaves after stop returns.
type txGather struct {
	batches []*batch
	runs    []*peerRun
	bufs    [][]byte
	routes  []*conn.Route
	each    eachSender
	npkts   int
}

func (d *Device) newTxState() *txState {
	out, release := conn.NewSender(d.bind)
	return &txState{reader: d.rcu.NewReader(), out: out, release: release}
}

// newReaderTxState is newTxState for the TUN reader: with a gather, unless
// in ref mode (which keeps the conventional path: a locked route per
// batch) or the bind cannot send to many routes at once.
func (d *Device) newReaderTxState() *txState {
	tx := d.newTxState()
	if each, ok := tx.out.(eachSender); ok && !d.refMode {
		bs := conn.IdealBatchSize
		tx.gather = &txGather{each: each, bufs: make([][]byte, 0, bs), routes: make([]*conn.Route, 0, bs)}
	}
	return tx
}

// gatherBatch adds sealed b (of p's run r) to the gather, sending what
// is gathered first if b would not fit one SendEach. Called under
// p.stageMu.
func (tx *txState) gatherBatch(d *Device, b *batch, r *peerRun) {
	g := tx.gather
	if g.npkts+len(b.pkts) > conn.IdealBatchSize {
		tx.sendGathered(d)
	}
	r.gathered.Store(true)
	g.batches = append(g.batches, b)
	g.runs = append(g.runs, r)
	g.npkts += len(b.pkts)
}

// sendGathered sends every gathered batch in one SendEach, inside one
// read section, then does for each what transmit does after its send.
func (tx *txState) sendGathered(d *Device) {
	g := tx.gather
	if g == nil || len(g.batches) == 0 {
		return
	}
	if len(g.batches) == 1 {
		// One peer in the read: its own send, as without a gather.
		b, r := g.batches[0], g.runs[0]
		b.peer.transmit(b, tx)
		r.gathered.Store(false)
		g.batches[0], g.runs[0] = nil, nil
		g.batches, g.runs, g.npkts = g.batches[:0], g.runs[:0], 0
		return
	}
	tx.reader.Enter()
	for _, b := range g.batches {
		rt := b.peer.routes.Borrow()
		if rt == nil {
			for _, pk := range b.pkts {
				pk.n = 0 // no route: not sent, not counted (as transmit)
			}
			continue
		}
		for _, pk := range b.pkts {
			if pk.n != 0 {
				g.bufs = append(g.bufs, pk.buf[:pk.n])
				g.routes = append(g.routes, rt)
			}
		}
	}
	var err error
	if len(g.bufs) > 0 {
		err = g.each.SendEach(g.bufs, g.routes)
	}
	tx.reader.Exit()
	if err != nil {
		d.ctr.socketSendErrors.Add(1)
		d.log.Debug("send failed", "peers", len(g.batches), "err", err)
	}
	for i, b := range g.batches {
		p := b.peer
		var bytes uint64
		data := false
		for _, pk := range b.pkts {
			bytes += uint64(pk.n)
			data = data || pk.n > noise.MessageTransportOverhead
		}
		d.pool.putBatch(b)
		g.runs[i].gathered.Store(false)
		if err != nil || bytes == 0 {
			continue
		}
		p.txBytes.Add(bytes)
		p.timersAnyAuthenticatedPacketTraversal()
		p.timersAnyAuthenticatedPacketSent()
		if data {
			p.timersDataSent()
		}
	}
	clear(g.batches)
	clear(g.runs)
	clear(g.bufs)
	clear(g.routes)
	g.batches, g.runs, g.bufs, g.routes, g.npkts = g.batches[:0], g.runs[:0], g.bufs[:0], g.routes[:0], 0
}

func (t *txState) close() {
	t.reader.Release()
	t.release()
}

// runSender sends the peer's sealed batches in counter order.
func (p *peer) runSender(r *peerRun) {
	defer r.wg.Done()
	tx := p.d.newTxState()
	defer tx.close()
	for {
		b := nextBatch(r.outbound, r.stopped)
		if b == nil {
			return
		}
		// An earlier batch gathered by the TUN reader leaves first.
		for r.gathered.Load() {
			runtime.Gosched()
		}
		p.transmit(b, tx)
		r.pending.Add(-1)
	}
}

// transmit sends the sealed packets of b to the peer's route (RefMode: the
// locked endpoint), returns b to the pool and signals the timers. tx
// belongs to the calling goroutine.
func (p *peer) transmit(b *batch, tx *txState) {
	d := p.d
	bufs := b.bufs[:0]
	var bytes uint64
	data := false
	for _, pk := range b.pkts {
		if pk.n == 0 {
			continue // could not be sealed
		}
		bufs = append(bufs, pk.buf[:pk.n])
		bytes += uint64(pk.n)
		if pk.n > noise.MessageTransportOverhead {
			data = true
		}
	}
	b.bufs = bufs
	var err error
	sent := false
	if len(bufs) > 0 {
		if d.refMode {
			// Device read lock, endpoint mutex, a route built per batch.
			err = p.refEP.send(tx.out, &d.mu, bufs)
			sent = !errors.Is(err, conn.ErrNoRoute)
		} else {
			tx.reader.Enter()
			if rt := p.routes.Borrow(); rt != nil {
				err = tx.out.Send(bufs, rt)
				sent = true
			}
			tx.reader.Exit()
		}
	}
	d.pool.putBatch(b)
	if !sent {
		return
	}
	if err != nil {
		d.ctr.socketSendErrors.Add(1)
		d.log.Debug("send failed", "peer", p.pub.String(), "err", err)
		return
	}
	p.txBytes.Add(bytes)
	p.timersAnyAuthenticatedPacketTraversal()
	p.timersAnyAuthenticatedPacketSent()
	if data {
		p.timersDataSent()
	}
}

// seal pads and encrypts one packet in place; pk.n becomes the transport
// message length (0 when the packet cannot be sealed).
func (d *Device) seal(kp *keypair, pk *packet, nonce []byte) {
	mtu := int(d.mtu.Load())
	n := pk.n
	padded := n
	if n <= mtu {
		padded = min((n+PaddingMultiple-1)&^(PaddingMultiple-1), mtu)
	}
	end := tun.Offset + padded
	if end+noise.AEADTagSize > len(pk.buf) {
		pk.n = 0
		return
	}
	clear(pk.buf[tun.Offset+n : end])
	noise.PutTransportHeader(pk.buf, kp.remoteIndex, pk.counter)
	binary.LittleEndian.PutUint64(nonce[4:], pk.counter)
	kp.send.Seal(pk.buf[:tun.Offset], nonce, pk.buf[tun.Offset:end], nil)
	pk.n = end + noise.AEADTagSize
}

// defaultInlineCrypto is the largest batch the producing goroutine seals or
// opens itself instead of handing it to a crypto worker: the process's
// plan (internal/sys/procs, which has the model). With one or two threads
// running Go code every batch is (no thread is free to run a worker in
// parallel: in process, inline crypto doubled both MTU-size and 64-byte
// throughput on the 2-core reference machine); with more, batches larger
// than 19 to 36 packets go to the workers.
func defaultInlineCrypto() int32 {
	return int32(procs.Current().InlineCrypto)
}

// nextBatch waits for the next batch of a peer's ordered queue and for its
// crypto to finish; nil when the peer has stopped.
func nextBatch(queue <-chan *batch, stopped <-chan struct{}) *batch {
	select {
	case b := <-queue:
		b.done.Lock() // held by whoever seals or opens it
		b.done.Unlock()
		return b
	case <-stopped:
		return nil
	}
}

// dispatch queues b, locked, on its peer's ordered queue (pending counts
// it until the peer's goroutine is done with it), then seals or opens it
// right here when it is small, or hands it to the crypto workers. A peer
// that has stopped gets nothing: b goes back to the pool. A device that is
// closing leaves b unprocessed and marked so (pk.n = 0 when sealing,
// pk.ok = false when opening), and the peer's goroutine drops it.
func (d *Device) dispatch(b *batch, queue chan<- *batch, pending *atomic.Int32, stopped <-chan struct{}) {
	pending.Add(1)
	b.done.Lock()
	select {
	case queue <- b:
	case <-stopped:
		pending.Add(-1)
		b.done.Unlock()
		d.pool.putBatch(b)
		return
	}
	if d.crypt(b) {
		return
	}
	select {
	case d.work <- b:
	case <-d.quit:
		for _, pk := range b.pkts {
			if b.send {
				pk.n = 0 // never sealed
			} else {
				pk.ok = false // never opened
			}
		}
		b.done.Unlock()
	}
}

// crypt seals or opens b in the calling goroutine when it is small enough
// (see defaultInlineCrypto), and reports whether it did.
func (d *Device) crypt(b *batch) bool {
	if len(b.pkts) > int(d.inlineCrypto.Load()) {
		return false
	}
	d.process(b, b.nonce[:])
	return true
}

// process seals or opens every packet of b and unlocks it.
func (d *Device) process(b *batch, nonce []byte) {
	if b.send {
		for _, pk := range b.pkts {
			d.seal(b.kp, pk, nonce)
		}
	} else {
		for _, pk := range b.pkts {
			d.open(b.kp, pk, nonce)
		}
	}
	b.done.Unlock()
}

// runCryptoWorker seals and opens batches until the device closes.
func (d *Device) runCryptoWorker() {
	defer d.workersWG.Done()
	nonce := make([]byte, 12)
	for {
		select {
		case b := <-d.work:
			d.process(b, nonce)
		case <-d.quit:
			return
		}
	}
}
