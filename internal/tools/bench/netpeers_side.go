package bench

// The peer side of the netpeers section: N WireGuard peers for the price
// of one sender, and a sink that counts.
//
//	nsP: one UDP socket 0.0.0.0:P, the N peers'             nsG: gateway socket :51820
//	  source addresses 10.91.0.1+i made local by one   ==>    (real daemon: open, replay,
//	  AnyIP route (local 10.91.0.0/16 dev lo); one             allowed IPs, TUN write)
//	  sender thread seals for every peer (its own                TUN -> kernel -> sink
//	  session key and counter) and sends a batch with            socket 10.89.0.1:9, one
//	  one sendmmsg, each datagram from its peer's                recvmmsg per batch into
//	  address (IP_PKTINFO)                                       64-byte buffers: source
//	                                                             address and first bytes;
//	                                                             with UDP GRO, a merged run
//	                                                             counts as its datagrams
//
// Every peer makes a real handshake with the gateway (device/noise through
// peerClients: initiation with MACs, cookie replies answered, keepalives
// that confirm the gateway's session), so the gateway sees N real peers at
// N endpoints. The data each peer sends is real WireGuard transport
// traffic: its inner packet (1420-byte IPv4/UDP from its tunnel address to
// the sink, valid checksums) sealed with its own session key under a fresh
// counter, as a peer's device would. What the harness leaves out is what
// a peer's device would spend besides: its TUN, its goroutines and its
// per-device system calls (the previous peer side, N Wirelane devices in
// this process, cost more CPU per GB than the gateway it measured).
//
// Each peer is a closed loop of its own (peerLoop): at most its window in
// flight between the sender and the sink, written off after the loss
// timeout without a delivery (then twice as long, up to maxWriteOffWait,
// as genTUN does). The sender visits the peers round robin and sends each
// peer whose window is empty its whole window, one run of consecutive
// datagrams, as the peer devices of the earlier harness did (a genTUN
// Read waits for room for its whole batch, the window); it waits for a
// batch's worth of deliveries between passes that find nothing to send.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/device/noise"
)

// netpeersEndpointBase: peer i sends from this + 1 + i, an address of the
// peer namespace's AnyIP route (netpeersEndpointNet).
var netpeersEndpointBase = netip.MustParseAddr("10.91.0.0")

// netpeersEndpointNet is the peers' source addresses: local in the peer
// namespace, routed through the veth pair from the gateway's.
const netpeersEndpointNet = "10.91.0.0/16"

// addrAdd returns the IPv4 address base + k.
func addrAdd(base netip.Addr, k int) netip.Addr {
	b := base.As4()
	v := binary.BigEndian.Uint32(b[:]) + uint32(k)
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], v)
	return netip.AddrFrom4(out)
}

// netpeersEndpoint returns peer i's source address on the veth side.
func netpeersEndpoint(i int) netip.Addr { return addrAdd(netpeersEndpointBase, 1+i) }

// peerLoop is one peer's closed loop. delivered is counted by the sink;
// sent and offs are stored by the sender only and read by the harness;
// the rest belongs to the sender.
type peerLoop struct {
	delivered atomic.Uint64
	sent      atomic.Uint64
	offs      atomic.Uint64 // write-offs (timeouts that gave up the packets in flight)

	writtenOff uint64        // packets given up as lost, less any that turned up later
	seen       uint64        // delivered at the last look
	progressAt time.Time     // last delivery or send
	wait       time.Duration // the next write-off's wait; 0: the loss timeout
}

// credit returns how many packets the peer may send now: the room in its
// window once it is at least minRun, or the whole window after a
// write-off (packets in flight and nothing delivered for a wait since
// the last send or delivery); else 0.
func (l *peerLoop) credit(now time.Time, window, minRun uint64, timeout time.Duration) uint64 {
	rx, sent := l.delivered.Load(), l.sent.Load()
	if rx != l.seen {
		l.seen, l.progressAt, l.wait = rx, now, 0
	}
	if rx+l.writtenOff > sent {
		// Written-off packets that arrived after all (or duplicates).
		l.writtenOff -= min(rx+l.writtenOff-sent, l.writtenOff)
	}
	var in uint64
	if rx+l.writtenOff < sent {
		in = sent - rx - l.writtenOff
	}
	if in < window && window-in >= minRun {
		return window - in
	}
	if l.wait == 0 {
		l.wait = timeout
	}
	if in == 0 || now.Sub(l.progressAt) < l.wait {
		return 0
	}
	l.writtenOff += in
	l.offs.Add(1)
	l.progressAt = now
	l.wait = min(2*l.wait, maxWriteOffWait)
	return window
}

// netpeersSide is the harness's N peers: their sessions (clients), one
// sender, one sink.
type netpeersSide struct {
	c       *peerClients
	loops   []peerLoop
	window  uint64
	timeout time.Duration
	plain   [][]byte // each peer's inner packet; read-only
	gw      unix.RawSockaddrInet4
	ctr     []uint64 // next counter of each peer; sender only

	sink    *net.UDPConn
	sinkRaw syscall.RawConn
	send    *pollConn // the peers' socket once the handshakes are done, out of the netpoller (pollconn.go); nil before

	gso bool // send each peer's run as one UDP_SEGMENT message (netpeersGSOEnv)

	total   atomic.Uint64 // deliveries over all peers (the sink's)
	wakeAt  atomic.Uint64 // the total at which the waiting sender wants waking; noWake when it does not wait
	wake    chan struct{} // capacity 1
	done    chan struct{} // closed by stop
	fails   atomic.Uint64 // sendmmsg errors other than EAGAIN/EINTR
	bad     atomic.Uint64 // sink messages of the wrong length or content
	merged  atomic.Uint64 // sink messages that held a merged run (UDP GRO)
	stray   atomic.Uint64 // sink datagrams from no peer of this run: late ones of an earlier run with more peers (the gateway's socket still held them)
	cpuNs   atomic.Int64  // the sender thread's CPU time
	wg      sync.WaitGroup
	stopped sync.Once
}

// newNetpeersSide makes the side of n peers with the given keys: the
// clients' socket in namespace nsP, the sink on sink (already open in the
// gateway's namespace). Call handshake, then start.
func newNetpeersSide(nsP string, keys []keyPair, n int, gwPub []byte, sink *net.UDPConn, window int, timeout time.Duration) (*netpeersSide, error) {
	var gw noise.PublicKey
	copy(gw[:], gwPub)
	privs := make([]noise.PrivateKey, n)
	addrs := make([]netip.Addr, n)
	for i := range n {
		copy(privs[i][:], keys[i].priv)
		addrs[i] = netpeersEndpoint(i)
	}
	s := &netpeersSide{
		loops: make([]peerLoop, n), window: uint64(window), timeout: timeout,
		plain: make([][]byte, n), ctr: make([]uint64, n),
		sink: sink, wake: make(chan struct{}, 1), done: make(chan struct{}),
		gso: os.Getenv(netpeersGSOEnv) == "1",
	}
	s.wakeAt.Store(noWake)
	for i := range n {
		pkt, err := ipv4UDPPacket(netnsMTU, peerAddr(i), netpeersGW)
		if err != nil {
			return nil, err
		}
		s.plain[i] = pkt // a packet of the full MTU gets no padding: WireGuard pads only up to the MTU
		s.ctr[i] = 2     // the handshake's keepalives used 0 and 1
	}
	if err := inNetns(nsP, func() error {
		var err error
		s.c, err = newPeerClientsWith(privs, addrs, gw, nil, nil)
		return err
	}); err != nil {
		return nil, err
	}
	var err error
	if s.sinkRaw, err = sink.SyscallConn(); err != nil {
		s.c.close()
		return nil, err
	}
	s.gw.Family = unix.AF_INET
	s.gw.Addr = netip.MustParseAddr(netpeersGWLink).As4()
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s.gw.Port))[:], netpeersPort)
	return s, nil
}

// handshake makes every peer's handshake with the gateway.
func (s *netpeersSide) handshake(timeout time.Duration) error {
	if err := s.c.handshakeTo(&net.UDPAddr{IP: net.ParseIP(netpeersGWLink), Port: netpeersPort}, timeout); err != nil {
		return err
	}
	// Nothing reads the peers' socket from now on: it leaves the
	// netpoller (pollconn.go says why) and only sends.
	var err error
	s.send, err = detachConn(s.c.conn)
	return err
}

// start runs the sink and the sender until stop.
func (s *netpeersSide) start() {
	s.wg.Add(2)
	go s.runSink()
	go s.runSender()
}

// stop ends the sender and the sink and closes the peers' socket (the
// sink's socket is the caller's).
func (s *netpeersSide) stop() {
	s.stopped.Do(func() {
		close(s.done)
		s.sink.Close()
		if s.send != nil {
			s.send.shut()
		}
		s.c.conn.Close()
		s.wg.Wait()
		if s.send != nil {
			s.send.release()
		}
	})
	s.wg.Wait()
}

// writeOffs returns the write-offs over all peers so far.
func (s *netpeersSide) writeOffs() uint64 {
	var n uint64
	for i := range s.loops {
		n += s.loops[i].offs.Load()
	}
	return n
}

// runSender seals and sends for every peer, one sendmmsg per batch of up
// to tunBatch datagrams, on one goroutine locked to its thread.
func (s *netpeersSide) runSender() {
	defer s.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const hdr = noise.MessageTransportHeaderSize
	// With GSO every message is one peer's run of datagrams (UDP_SEGMENT),
	// at most gsoSegments of them; without, one datagram.
	bufSize := 2048
	if s.gso {
		bufSize = gsoSegments * netpeersDatagram
	}
	ps := newPktinfoSender(&s.gw, tunBatch, bufSize, s.gso, netpeersDatagram)
	bufs := ps.bufs
	n := len(s.loops)
	srcs := make([][4]byte, n)
	for i := range srcs {
		srcs[i] = s.c.addrs[i].As4()
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	tick := max(s.timeout/4, time.Millisecond) // write-offs are looked for this often while nothing is delivered
	// The sender waits for this many deliveries, so that a batch has
	// windows to fill (one system call per datagram otherwise).
	wakeBatch := min(uint64(tunBatch), uint64(n)*s.window/4)
	var nonce [12]byte
	next := 0
	t0 := threadCPU()
	for {
		select {
		case <-s.done:
			return
		default:
		}
		tot0 := s.total.Load()
		now := time.Now()
		k := 0
		served := -1 // the last peer this pass sent for
		for visited := 0; visited < n && k < tunBatch; visited++ {
			i := next
			if next++; next == n {
				next = 0
			}
			l := &s.loops[i]
			c := l.credit(now, s.window, s.window, s.timeout)
			if c == 0 {
				continue
			}
			sess := s.c.sess[i]
			if s.gso {
				take := int(min(c, gsoSegments))
				b := bufs[k]
				at := 0
				for range take {
					ctr := s.ctr[i]
					s.ctr[i]++
					noise.PutTransportHeader(b[at:], sess.RemoteIndex, ctr)
					binary.LittleEndian.PutUint64(nonce[4:], ctr)
					out := sess.Send.Seal(b[at+hdr:at+hdr], nonce[:], s.plain[i], nil)
					at += hdr + len(out)
				}
				ps.set(k, at, srcs[i])
				k++
				l.sent.Store(l.sent.Load() + uint64(take))
				l.progressAt = now
				served = i
				continue
			}
			take := int(min(c, uint64(tunBatch-k)))
			for range take {
				ctr := s.ctr[i]
				s.ctr[i]++
				b := bufs[k]
				noise.PutTransportHeader(b, sess.RemoteIndex, ctr)
				binary.LittleEndian.PutUint64(nonce[4:], ctr)
				out := sess.Send.Seal(b[hdr:hdr], nonce[:], s.plain[i], nil)
				ps.set(k, hdr+len(out), srcs[i])
				k++
			}
			l.sent.Store(l.sent.Load() + uint64(take))
			l.progressAt = now
			served = i
		}
		// The next pass starts after the last peer served, not where
		// this one started: a pass that went all the way round would
		// otherwise always begin at the same peer, and the peers late in
		// its order would always wait longest (at 100 peers with GSO the
		// highest-numbered got 0.69 of their share).
		if served >= 0 {
			next = served + 1
			if next == n {
				next = 0
			}
		}
		if k == 0 {
			// No peer's window is empty: wait for a batch of
			// deliveries (or, to look for write-offs, a tick).
			s.wakeAt.Store(tot0 + wakeBatch)
			if s.total.Load() < tot0+wakeBatch {
				timer.Reset(tick)
				select {
				case <-s.wake:
					timer.Stop()
				case <-timer.C:
				case <-s.done:
					return
				}
			}
			s.wakeAt.Store(noWake)
			continue
		}
		failed, err := ps.sendBatch(s.send, k)
		if err != nil {
			return // closed
		}
		if failed {
			s.fails.Add(1) // the closed loops write the rest off
		}
		s.cpuNs.Store(threadCPU() - t0)
	}
}

// netpeersDatagram is the size of every datagram the peers send: the
// transport header, the 1420-byte packet (the MTU: no padding), the tag.
const netpeersDatagram = noise.MessageTransportHeaderSize + netnsMTU + noise.AEADTagSize

// gsoSegments is the most datagrams of one GSO message (the kernel takes
// up to 64, and at most 64 KiB).
const gsoSegments = 40

// netpeersGSOEnv, set to 1, makes the peers send each peer's run of
// datagrams as one UDP GSO message (UDP_SEGMENT): the gateway's socket,
// which asks for UDP GRO in both engines, then receives it as one train,
// as it would from a NIC that merged the run; the harness saves the
// kernel's per-datagram send path. An A/B switch, off by default.
const netpeersGSOEnv = "WIRELANE_BENCH_NETPEERS_GSO"

// gsoCmsgs is the control data of one message: IP_PKTINFO (the peer's
// source address) and UDP_SEGMENT (the segment size; only with GSO).
type gsoCmsgs struct {
	hdr  unix.Cmsghdr
	info unix.Inet4Pktinfo
	seg  struct {
		hdr  unix.Cmsghdr
		size uint16
		_    [6]byte
	}
}

// sinkPrefix is how much of each delivered datagram the sink reads: the
// rest is cut off by the kernel (MSG_TRUNC reports the real length).
const sinkPrefix = 64

// netpeersSinkGROEnv, set to 0, turns the sink's UDP GRO off (the A/B
// switch; on by default). With it on, a run of one peer's datagrams that
// the gateway wrote to its TUN as one merged UDP packet reaches the sink
// as one message, as it would reach any receiver that asks for GRO,
// instead of being cut into datagrams again by the kernel: the sink's
// CPU, which the gateway shares, is then per run, not per datagram.
const netpeersSinkGROEnv = "WIRELANE_BENCH_NETPEERS_SINK_GRO"

// sinkGRO is whether the sink asks for UDP GRO (netpeersSinkGROEnv).
func sinkGRO() bool { return os.Getenv(netpeersSinkGROEnv) != "0" }

// sinkPayload is the UDP payload of every packet the peers send.
const sinkPayload = netnsMTU - 28

// sinkSegments returns how many of the peers' datagrams one sink message
// holds: n bytes (the real length, MSG_TRUNC), and gso the segment size
// of a merged message (UDP_GRO control data), 0 for a single datagram.
// ok is false for a message that is not made of whole datagrams of the
// expected size.
func sinkSegments(n, gso int) (segs int, ok bool) {
	if gso == 0 {
		return 1, n == sinkPayload
	}
	if gso != sinkPayload || n == 0 || n%sinkPayload != 0 {
		return 1, false
	}
	return n / sinkPayload, true
}

// sinkControl is a message's control data: room for one UDP_GRO message.
type sinkControl [24]byte

// groSize returns the segment size of a UDP_GRO control message in c
// (its first), or 0. The kernel writes it as an int.
func groSize(c *sinkControl, n int) int {
	if n < unix.CmsgLen(4) {
		return 0
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&c[0]))
	if h.Level != unix.SOL_UDP || h.Type != unix.UDP_GRO || uint64(h.Len) < uint64(unix.CmsgLen(4)) {
		return 0
	}
	return int(binary.NativeEndian.Uint32(c[unix.CmsgLen(0):]))
}

// runSink counts what the gateway's TUN delivered, per source address:
// one recvmmsg per batch, each message read only as far as its first
// sinkPrefix bytes (checked against the generated payload) and its
// length, a merged run counted by its datagrams.
func (s *netpeersSide) runSink() {
	defer s.wg.Done()
	const batch = 128
	gro := false
	if sinkGRO() {
		_ = s.sinkRaw.Control(func(fd uintptr) {
			gro = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_GRO, 1) == nil
		})
	}
	bufs := make([][]byte, batch)
	iovs := make([]unix.Iovec, batch)
	names := make([]unix.RawSockaddrInet4, batch)
	ctls := make([]sinkControl, batch)
	hdrs := make([]mmsghdr, batch)
	for i := range hdrs {
		bufs[i] = make([]byte, sinkPrefix)
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(sinkPrefix)
		hdrs[i].hdr.Iov = &iovs[i]
		hdrs[i].hdr.SetIovlen(1)
		hdrs[i].hdr.Name = (*byte)(unsafe.Pointer(&names[i]))
		if gro {
			hdrs[i].hdr.Control = &ctls[i][0]
		}
	}
	// The payload ipv4UDPPacket generates: byte(k) at packet offset k.
	var want [sinkPrefix]byte
	for k := range want {
		want[k] = byte(28 + k)
	}
	n := len(s.loops)
	var got int
	var errno syscall.Errno
	recv := func(fd uintptr) bool {
		for i := range hdrs {
			hdrs[i].hdr.Namelen = unix.SizeofSockaddrInet4
			if gro {
				hdrs[i].hdr.SetControllen(len(sinkControl{}))
			}
		}
		r, _, e := unix.RawSyscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), batch, unix.MSG_DONTWAIT|unix.MSG_TRUNC, 0, 0)
		if e == unix.EAGAIN {
			return false
		}
		got, errno = int(r), e
		return true
	}
	for {
		if err := s.sinkRaw.Read(recv); err != nil {
			return // closed
		}
		if errno != 0 {
			if errno == unix.EINTR {
				continue
			}
			return
		}
		var counted uint64
		for j := range got {
			i, ok := peerIndex(netip.AddrFrom4(names[j].Addr), n)
			if !ok {
				s.stray.Add(1)
				continue
			}
			gso := 0
			if gro {
				gso = groSize(&ctls[j], int(hdrs[j].hdr.Controllen))
			}
			segs, ok := sinkSegments(int(hdrs[j].len), gso)
			if !ok || [sinkPrefix]byte(bufs[j]) != want {
				s.bad.Add(1)
			}
			if gso != 0 {
				s.merged.Add(1)
			}
			s.loops[i].delivered.Add(uint64(segs))
			counted += uint64(segs)
		}
		runtime.KeepAlive(iovs)
		runtime.KeepAlive(ctls)
		if counted > 0 {
			if s.total.Add(counted) >= s.wakeAt.Load() {
				select {
				case s.wake <- struct{}{}:
				default:
				}
			}
		}
	}
}

// errSide reports a peer side that sent or received what it should not.
func (s *netpeersSide) err() error {
	var errs []error
	if f := s.fails.Load(); f != 0 {
		errs = append(errs, fmt.Errorf("%d sendmmsg calls of the peers failed", f))
	}
	if b := s.bad.Load(); b != 0 {
		errs = append(errs, fmt.Errorf("%d datagrams at the sink of the wrong length or content", b))
	}
	return errors.Join(errs...)
}
