package bench

// The receive direction of the many-peers section: the N harness peers
// send to the gateway.
//
//	genTUN "peers" (N flows,  --Read-->  sender (harness): seal each packet for
//	round robin, closed loop)            its peer, fresh counter, sendmmsg with
//	                                     the peer's source address (IP_PKTINFO)
//	                                         |  UDP on loopback
//	gateway genTUN  <--Write--  gateway device: recvmmsg spans many peers,
//	(counts bytes per inner      demux by receiver index, open, replay
//	source address = peer)       check, allowed-IPs source check
//
// Each peer seals every packet for real with its own session key and its
// own counter (a WireGuard receiver drops a repeated counter, so no packet
// can be sealed once and sent twice). The harness's sealing is the same
// code for both engines (device/noise's session AEAD, that is
// internal/crypto/chachapoly) on one goroutine locked to its thread, whose
// thread CPU time is measured on its own: the harness's share of the
// process CPU is reported beside the results, and the gateway's CPU per GB
// is the process's less that thread's.

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/device/noise"
)

// Directions of the many-peers section.
const (
	// DirToPeers: the gateway sends to its peers.
	DirToPeers = "to peers"
	// DirFromPeers: the peers send to the gateway.
	DirFromPeers = "from peers"
)

// peersDirections are the directions every run of the section measures.
var peersDirections = []string{DirToPeers, DirFromPeers}

// MetricHarnessCPU is the harness's own share of the process CPU in the
// receive direction (the senders' sealing and sendmmsg, loopback delivery
// included).
const MetricHarnessCPU = "harness CPU share"

// inprocPeerIndex returns the peer whose inner address is a (10.80.x.y), or -1.
func inprocPeerIndex(a [4]byte) int {
	if a[0] != 10 || a[1] != 80 || a[2] >= 240 || a[3] < 1 || a[3] > 250 {
		return -1
	}
	return int(a[2])*250 + int(a[3]) - 1
}

// sourceCounter counts the bytes a TUN receives per peer, by the inner
// IPv4 source address.
type sourceCounter struct {
	bytes []atomic.Uint64
	other atomic.Uint64 // packets from no peer's address
}

// count adds one packet.
func (s *sourceCounter) count(p []byte) {
	if len(p) >= 20 && p[0]>>4 == 4 {
		if i := inprocPeerIndex([4]byte(p[12:16])); i >= 0 && i < len(s.bytes) {
			s.bytes[i].Add(uint64(len(p)))
			return
		}
	}
	s.other.Add(1)
}

// snapshot copies every peer's byte count.
func (s *sourceCounter) snapshot(dst []uint64) {
	for i := range dst {
		dst[i] = s.bytes[i].Load()
	}
}

// peerSenders seals and sends the peers' traffic: one goroutine that
// reads batches from src (round robin over the peers, closed loop on the
// gateway's deliveries) and sends each batch with one sendmmsg.
type peerSenders struct {
	c     *peerClients
	src   *genTUN
	gw    unix.RawSockaddrInet4
	ctr   []uint64 // next counter of each peer; sender goroutine only
	cpuNs atomic.Int64
	fails atomic.Uint64 // sendmmsg errors other than EAGAIN/EINTR
	wg    sync.WaitGroup
}

// threadCPU returns the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// start runs the sender until src closes.
func (s *peerSenders) start() {
	const hdr = noise.MessageTransportHeaderSize
	ps := newPktinfoSender(&s.gw, tunBatch, 2048, false, 0)
	bufs := ps.bufs
	sizes := make([]int, tunBatch)
	srcs := make([][4]byte, s.c.n)
	for i := range srcs {
		srcs[i] = s.c.addrs[i].As4()
	}
	next := 0 // the peer of src's next packet: src.multi is one per peer, in order
	var nonce [12]byte
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		t0 := threadCPU()
		for {
			n, err := s.src.Read(bufs, sizes, hdr)
			if err != nil {
				return
			}
			for j := 0; j < n; j++ {
				i := next
				if next++; next == s.c.n {
					next = 0
				}
				sess := s.c.sess[i]
				ctr := s.ctr[i]
				s.ctr[i]++
				plen := (sizes[j] + 15) &^ 15
				b := bufs[j]
				clear(b[hdr+sizes[j] : hdr+plen])
				noise.PutTransportHeader(b, sess.RemoteIndex, ctr)
				binary.LittleEndian.PutUint64(nonce[4:], ctr)
				out := sess.Send.Seal(b[hdr:hdr], nonce[:], b[hdr:hdr+plen], nil)
				ps.set(j, hdr+len(out), srcs[i])
			}
			failed, err := ps.sendBatch(s.c.raw, n)
			if err != nil {
				return // closed
			}
			if failed {
				s.fails.Add(1) // the closed loop writes the rest off
			}
			s.cpuNs.Store(threadCPU() - t0)
		}
	}()
}

// runPeersRx measures one engine with n peers sending to the gateway for
// one window.
func runPeersRx(eng engine, n int, cfg Config) (res peersResult, harness time.Duration, err error) {
	gwPriv, err := noise.GeneratePrivateKey()
	if err != nil {
		return res, 0, err
	}
	pkts := make([][]byte, n)
	for i := range pkts {
		_, inner := peerAddrs(i)
		if pkts[i], err = ipv4UDPPacket(inprocMTU, inner, peersGatewayAddr); err != nil {
			return res, 0, err
		}
	}
	runtime.GC()
	src := newGenTUN("wlbench-peers", inprocMTU, pkts[0], nil)
	src.multi = pkts
	gwTUN := newGenTUN("wlbench-gw", inprocMTU, nil, nil)
	perSrc := &sourceCounter{bytes: make([]atomic.Uint64, n)}
	gwTUN.bySource = perSrc.count
	src.closeLoop(gwTUN, cfg.Window, cfg.LossTimeout)
	defer src.Close()
	clients, err := newPeerClients(n, gwPriv.PublicKey(), nil, nil)
	if err != nil {
		return res, 0, err
	}
	defer clients.close()
	gw, err := eng.make(gwTUN, gwPriv[:])
	if err != nil {
		return res, 0, err
	}
	defer gw.Close()
	port, err := listenPort(gw)
	if err != nil {
		return res, 0, fmt.Errorf("%s gateway: %w", eng.name, err)
	}
	if err := gw.IpcSet(clients.gatewayConfig()); err != nil {
		return res, 0, fmt.Errorf("%s gateway: configure %d peers: %w", eng.name, n, err)
	}
	if err := clients.handshake(port, 30*time.Second); err != nil {
		return res, 0, fmt.Errorf("%s gateway: %w", eng.name, err)
	}
	time.Sleep(20 * time.Millisecond) // the last keepalives confirm their sessions
	s := &peerSenders{c: clients, src: src, ctr: make([]uint64, n)}
	for i := range s.ctr {
		s.ctr[i] = 2 // the handshake's keepalives used 0 and 1
	}
	s.gw.Family = unix.AF_INET
	s.gw.Addr = [4]byte{127, 0, 0, 1}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s.gw.Port))[:], port)
	s.start()
	defer s.wg.Wait()
	defer src.Close() // before the wait: stops the sender
	src.start()

	b0, b1 := make([]uint64, n), make([]uint64, n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		perSrc.snapshot(b0)
		res.silent = 0
		for _, b := range b0 {
			if b == 0 {
				res.silent++
			}
		}
		if res.silent == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if res.silent == n {
		return res, 0, fmt.Errorf("%s: no packet from a peer reached the gateway's TUN within 10s", eng.name)
	}
	time.Sleep(cfg.Warmup)

	p0, g0, w0, l0, h0 := gwTUN.rxPackets.Load(), src.txPackets.Load(), src.writeOffs(), src.lateArrivals(), s.cpuNs.Load()
	perSrc.snapshot(b0)
	s0, err := takeSnapshot()
	if err != nil {
		return res, 0, err
	}
	time.Sleep(cfg.Duration)
	p1, g1, w1, l1, h1 := gwTUN.rxPackets.Load(), src.txPackets.Load(), src.writeOffs(), src.lateArrivals(), s.cpuNs.Load()
	perSrc.snapshot(b1)
	s1, err := takeSnapshot()
	if err != nil {
		return res, 0, err
	}
	src.stop()
	if o := perSrc.other.Load(); o != 0 {
		return res, 0, fmt.Errorf("%s: %d packets on the gateway's TUN from no peer's address", eng.name, o)
	}
	if f := s.fails.Load(); f != 0 {
		return res, 0, fmt.Errorf("%s: %d sendmmsg calls of the peers failed", eng.name, f)
	}
	var total uint64
	for i := range b1 {
		b1[i] -= b0[i]
		total += b1[i]
	}
	res.inprocResult = inprocResult{
		packets: p1 - p0, bytes: total, generated: g1 - g0,
		window: s1.at.Sub(s0.at), cpu: s1.cpu - s0.cpu, mallocs: s1.mallocs - s0.mallocs,
		writeOffs: w1 - w0, late: l1 - l0,
	}
	res.fairness = fairness(b1)
	if res.packets == 0 {
		return res, 0, fmt.Errorf("%s: no packet delivered during the %v window", eng.name, cfg.Duration)
	}
	return res, time.Duration(h1 - h0), nil
}
