package bench

// Many peers at once, in process: one gateway device of the engine under
// test with N peers, every one of them active, each a flow of MTU-size
// packets, the way a VPN server sends to its clients.
//
//	genTUN (N destinations,  --Read-->  gateway device  --UDP-->  client socket 0.0.0.0:P
//	round robin: a batch of             route by dst,   (kernel)  peer i's endpoint is
//	128 spans 128 peers)                seal for N                127.1.x.y:P; counts
//	                                    peers, send               bytes per peer
//
// The N peers are not N devices: they are N WireGuard identities in the
// harness (peerClients) that share one UDP socket bound to the wildcard
// address, each with its own source address on the loopback network
// (127.1.x.y, sent with IP_PKTINFO), so that the gateway sees N distinct
// endpoints. Each client makes a real handshake with the gateway through
// device/noise (initiation with MACs, cookie replies answered, a keepalive
// that confirms the responder's session), then only receives. On receive a
// client opens its first data packet and compares it with what the
// generator sent to it; every later datagram is counted by its receiver
// index and length, one recvmmsg per batch and no crypto, so the harness's
// share of the CPU is the same small cost for both engines and the rest is
// the gateway's. The gateway's own receive path carries only the
// handshakes: this section measures the send path of a device with many
// peers (the TUN batch split across peers, per-peer queues and wake-ups,
// crypto hand-off, sends).
//
// The generator is the closed loop of the in-process section, counted at
// the clients' socket: at most Config.Window packets in flight over all
// peers. Fairness is the slowest peer's bytes in the window over the fair
// share (total / N): the offered load is exactly equal, so a peer below 1
// lost packets that others did not (a queue overflowed, a peer starved).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/device/noise"
)

// MetricFairness is the slowest peer's share of its fair share.
const MetricFairness = "slowest peer / fair share"

// MaxActivePeers is the most peers the section can address (127.1.x.y and
// 10.80.x.y with x < 240, y in 1..250).
const MaxActivePeers = 240 * 250

// MinFairShare is the fairness target: no peer below half its fair share.
const MinFairShare = 0.5

// peersCase names the case with n active peers in direction dir
// (DirToPeers, DirFromPeers).
func peersCase(n int, dir string) string { return fmt.Sprintf("%d peers, %s", n, dir) }

var peersGatewayAddr = netip.MustParseAddr("10.79.0.1")

// peerAddrs returns peer i's endpoint address (127.1.x.y) and its inner
// address behind the tunnel (10.80.x.y).
func peerAddrs(i int) (endpoint, inner netip.Addr) {
	x, y := byte(i/250), byte(i%250+1)
	return netip.AddrFrom4([4]byte{127, 1, x, y}), netip.AddrFrom4([4]byte{10, 80, x, y})
}

// peersEngines are the engines the section compares: ref mode changes
// nothing a many-peers run would show apart from the in-process section.
func peersEngines(cfg Config) []string {
	var out []string
	for _, e := range cfg.Engines {
		if e != EngineWirelaneRef {
			out = append(out, e)
		}
	}
	return out
}

// fairness returns min(bytes) / (sum(bytes) / len(bytes)): 1 when every
// peer got the same, 0 when one got nothing (or nothing was delivered).
func fairness(bytes []uint64) float64 {
	if len(bytes) == 0 {
		return 0
	}
	var sum float64
	least := bytes[0]
	for _, b := range bytes {
		sum += float64(b)
		least = min(least, b)
	}
	if sum == 0 {
		return 0
	}
	return float64(least) / (sum / float64(len(bytes)))
}

// peerClients is N WireGuard peers on one UDP socket.
type peerClients struct {
	n      int
	conn   *net.UDPConn
	pc     *ipv4.PacketConn
	port   uint16
	raw    syscall.RawConn
	hs     []*noise.Handshake
	cookie []*noise.CookieGenerator
	sess   []*noise.Session
	addrs  []netip.Addr // source address of each peer
	expect [][]byte     // the packet the generator sends to each peer

	// rxBytes counts each peer's inner bytes (written by the sink
	// goroutine, read by the harness).
	rxBytes []atomic.Uint64
	// checked marks peers whose first data packet was opened; sink only.
	checked []bool
	bad     atomic.Uint64 // packets that did not open or differ
	stray   atomic.Uint64 // datagrams for no client, or not transport data
	count   *genTUN       // delivery counter of the closed loop
	wg      sync.WaitGroup
}

// newPeerClients makes n clients with fresh keys on a socket bound to
// 0.0.0.0 (random port), large receive buffer, whose deliveries count into
// count.
func newPeerClients(n int, gateway noise.PublicKey, expect [][]byte, count *genTUN) (*peerClients, error) {
	privs := make([]noise.PrivateKey, n)
	addrs := make([]netip.Addr, n)
	for i := range n {
		var err error
		if privs[i], err = noise.GeneratePrivateKey(); err != nil {
			return nil, err
		}
		addrs[i], _ = peerAddrs(i)
	}
	return newPeerClientsWith(privs, addrs, gateway, expect, count)
}

// newPeerClientsWith makes a client of each key, client i sending from
// addrs[i], on a socket bound to 0.0.0.0 (random port) in the calling
// thread's network namespace.
func newPeerClientsWith(privs []noise.PrivateKey, addrs []netip.Addr, gateway noise.PublicKey, expect [][]byte, count *genTUN) (*peerClients, error) {
	n := len(privs)
	c := &peerClients{
		n: n, expect: expect, count: count,
		hs: make([]*noise.Handshake, n), cookie: make([]*noise.CookieGenerator, n),
		sess: make([]*noise.Session, n), addrs: addrs,
		rxBytes: make([]atomic.Uint64, n), checked: make([]bool, n),
	}
	for i := range n {
		c.hs[i] = noise.NewHandshake(noise.NewLocal(privs[i]), gateway, noise.PresharedKey{})
		c.cookie[i] = noise.NewCookieGenerator(gateway)
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4zero})
	if err != nil {
		return nil, fmt.Errorf("clients socket: %w", err)
	}
	c.conn, c.pc = conn, ipv4.NewPacketConn(conn)
	c.port = uint16(conn.LocalAddr().(*net.UDPAddr).Port)
	if c.raw, err = conn.SyscallConn(); err != nil {
		conn.Close()
		return nil, err
	}
	// Room for the closed loop's window (as root beyond rmem_max).
	const rcvbuf = 32 << 20
	var serr error
	if err := c.raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, rcvbuf)
	}); err != nil || serr != nil {
		_ = conn.SetReadBuffer(rcvbuf)
	}
	if err := c.pc.SetControlMessage(ipv4.FlagDst, true); err != nil {
		conn.Close()
		return nil, fmt.Errorf("clients socket: IP_PKTINFO: %w", err)
	}
	return c, nil
}

// publicKey returns client i's public key.
func (c *peerClients) publicKey(i int) noise.PublicKey { return c.hs[i].Local().PublicKey() }

// gatewayConfig is the UAPI text that adds every client to the gateway.
func (c *peerClients) gatewayConfig() string {
	var b strings.Builder
	for i := range c.n {
		ep, inner := peerAddrs(i)
		pub := c.publicKey(i)
		fmt.Fprintf(&b, "public_key=%x\nendpoint=%s:%d\nallowed_ip=%s/32\n", pub[:], ep, c.port, inner)
	}
	return b.String()
}

// send writes b from client i's source address to the gateway.
func (c *peerClients) send(i int, b []byte, gw *net.UDPAddr) error {
	_, err := c.pc.WriteTo(b, &ipv4.ControlMessage{Src: c.addrs[i].AsSlice()}, gw)
	return err
}

// handshake completes a handshake of every client with the gateway at
// 127.0.0.1:port (handshakeTo: at any address): at most 64 initiations outstanding, each resent after
// 250 ms without an answer (then 500 ms, and so on), cookie replies taken and answered at once
// with a new initiation (a gateway under load asks for them), and a
// keepalive after each response to confirm the gateway's session.
func (c *peerClients) handshake(port uint16, timeout time.Duration) error {
	return c.handshakeTo(&net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(port)}, timeout)
}

// handshakeTo is handshake with the gateway at gw.
func (c *peerClients) handshakeTo(gw *net.UDPAddr, timeout time.Duration) error {
	// A resend replaces the initiation, so a response to the old one no
	// longer counts: the wait doubles with every resend of a peer, or a
	// gateway slower than the first wait (a busy machine, the race
	// detector) would never complete one.
	const outstanding, firstWait, maxWait = 64, 250 * time.Millisecond, 4 * time.Second
	wait := make([]time.Duration, c.n)
	sentAt := make([]time.Time, c.n)
	done, inFlight, next := 0, 0, 0
	buf := make([]byte, 2048)
	var out [noise.MessageInitiationSize]byte
	initiate := func(i int) error {
		now := time.Now()
		m, err := c.hs[i].CreateInitiation(uint32(i+1), now)
		if err != nil {
			return fmt.Errorf("client %d: initiation: %w", i, err)
		}
		msg := m.MarshalTo(out[:0])
		c.cookie[i].AddMACs(msg, now)
		sentAt[i] = now
		if wait[i] == 0 {
			wait[i] = firstWait
		}
		return c.send(i, msg, gw)
	}
	deadline := time.Now().Add(timeout)
	for done < c.n {
		now := time.Now()
		if now.After(deadline) {
			return fmt.Errorf("%d of %d peers completed a handshake within %v", done, c.n, timeout)
		}
		for ; inFlight < outstanding && next < c.n; next, inFlight = next+1, inFlight+1 {
			if err := initiate(next); err != nil {
				return err
			}
		}
		for i := 0; i < next; i++ {
			if c.sess[i] == nil && now.Sub(sentAt[i]) > wait[i] {
				wait[i] = min(2*wait[i], maxWait)
				if err := initiate(i); err != nil {
					return err
				}
			}
		}
		_ = c.conn.SetReadDeadline(now.Add(20 * time.Millisecond))
		n, _, _, err := c.pc.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("clients socket: %w", err)
		}
		msg := buf[:n]
		switch noise.MessageType(msg) {
		case noise.MessageResponseType:
			var m noise.MessageResponse
			if m.Unmarshal(msg) != nil {
				continue
			}
			i := int(m.Receiver) - 1
			if i < 0 || i >= c.n || c.sess[i] != nil {
				continue
			}
			h, err := noise.ConsumeResponse(c.hs[i].Local(), &m, func(idx uint32) *noise.Handshake {
				if idx == m.Receiver {
					return c.hs[i]
				}
				return nil
			})
			if err != nil {
				continue // a response to an initiation resent since
			}
			s, err := h.DeriveSession(time.Now())
			if err != nil {
				return fmt.Errorf("client %d: session: %w", i, err)
			}
			c.sess[i] = s
			done++
			inFlight--
			if err := c.keepalive(i, 0, gw); err != nil {
				return err
			}
		case noise.MessageCookieReplyType:
			var m noise.MessageCookieReply
			if m.Unmarshal(msg) != nil {
				continue
			}
			if i := int(m.Receiver) - 1; i >= 0 && i < c.n && c.sess[i] == nil && c.cookie[i].ConsumeReply(&m, time.Now()) {
				if err := initiate(i); err != nil {
					return err
				}
			}
		}
	}
	_ = c.conn.SetReadDeadline(time.Time{})
	// A second keepalive each, in case a first one was lost in the
	// handshake storm: a gateway session that is never confirmed would
	// leave its peer without data (and the gateway initiating handshakes
	// that nobody answers).
	for i := range c.n {
		if err := c.keepalive(i, 1, gw); err != nil {
			return err
		}
	}
	return nil
}

// keepalive sends client i's keepalive with counter ctr, which confirms
// the gateway's responder session.
func (c *peerClients) keepalive(i int, ctr uint64, gw *net.UDPAddr) error {
	var ka [noise.MessageTransportOverhead]byte
	noise.PutTransportHeader(ka[:], c.sess[i].RemoteIndex, ctr)
	var nonce [12]byte
	binary.LittleEndian.PutUint64(nonce[4:], ctr)
	c.sess[i].Send.Seal(ka[:noise.MessageTransportHeaderSize], nonce[:], nil, nil)
	return c.send(i, ka[:], gw)
}

// mmsghdr is struct mmsghdr of recvmmsg(2).
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

// startSink receives and counts datagrams until the socket closes, one
// recvmmsg per batch into fixed buffers: nothing allocates per packet.
func (c *peerClients) startSink() {
	const batch = 128
	bufs := make([][]byte, batch)
	iovs := make([]unix.Iovec, batch)
	hdrs := make([]mmsghdr, batch)
	for i := range hdrs {
		bufs[i] = make([]byte, 2048)
		iovs[i].Base = &bufs[i][0]
		iovs[i].SetLen(len(bufs[i]))
		hdrs[i].hdr.Iov = &iovs[i]
		hdrs[i].hdr.SetIovlen(1)
	}
	var got int
	var errno syscall.Errno
	recv := func(fd uintptr) bool {
		r, _, e := unix.Syscall6(unix.SYS_RECVMMSG, fd, uintptr(unsafe.Pointer(&hdrs[0])), batch, unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EAGAIN {
			return false // wait until readable
		}
		got, errno = int(r), e
		return true
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			if err := c.raw.Read(recv); err != nil {
				return // closed
			}
			if errno != 0 {
				if errno == unix.EINTR {
					continue
				}
				return
			}
			var pkts, bytes uint64
			for j := 0; j < got; j++ {
				if n := int(hdrs[j].len); c.take(bufs[j][:n]) {
					pkts++
					bytes += uint64(n - noise.MessageTransportOverhead)
				}
			}
			runtime.KeepAlive(iovs)
			c.count.delivered(pkts, bytes)
		}
	}()
}

// take counts one datagram and reports whether it was data for a client;
// the first data packet of each client is opened and compared.
func (c *peerClients) take(msg []byte) bool {
	if len(msg) <= noise.MessageTransportOverhead || noise.MessageType(msg) != noise.MessageTransportType {
		c.stray.Add(1) // keepalives, handshakes: nothing the generator sent
		return false
	}
	i := int(binary.LittleEndian.Uint32(msg[4:8])) - 1
	if i < 0 || i >= c.n || c.sess[i] == nil {
		c.stray.Add(1)
		return false
	}
	if !c.checked[i] {
		c.checked[i] = true
		var nonce [12]byte
		copy(nonce[4:], msg[8:16])
		plain, err := c.sess[i].Receive.Open(nil, nonce[:], msg[noise.MessageTransportHeaderSize:], nil)
		if err != nil || len(plain) < len(c.expect[i]) || string(plain[:len(c.expect[i])]) != string(c.expect[i]) {
			c.bad.Add(1)
		}
	}
	c.rxBytes[i].Add(uint64(len(msg) - noise.MessageTransportOverhead))
	return true
}

// snapshot copies every client's byte count.
func (c *peerClients) snapshot(dst []uint64) {
	for i := range dst {
		dst[i] = c.rxBytes[i].Load()
	}
}

// close stops the sink and closes the socket.
func (c *peerClients) close() {
	c.conn.Close()
	c.wg.Wait()
}

// peersResult is what one many-peers run measured.
type peersResult struct {
	inprocResult
	fairness float64
	stray    uint64 // datagrams for the peers that were not data: keepalives, handshakes
	silent   int    // peers that had received nothing 10 s after the generator started
}

// runPeers measures one engine with n active peers for one window.
func runPeers(eng engine, n int, cfg Config) (res peersResult, err error) {
	gwPriv, err := noise.GeneratePrivateKey()
	if err != nil {
		return res, err
	}
	pkts := make([][]byte, n)
	for i := range pkts {
		_, inner := peerAddrs(i)
		if pkts[i], err = ipv4UDPPacket(inprocMTU, peersGatewayAddr, inner); err != nil {
			return res, err
		}
	}
	runtime.GC()
	gen := newGenTUN("wlbench-gw", inprocMTU, pkts[0], nil)
	gen.multi = pkts
	count := newGenTUN("wlbench-clients", inprocMTU, nil, nil) // counters only
	gen.closeLoop(count, cfg.Window, cfg.LossTimeout)
	clients, err := newPeerClients(n, gwPriv.PublicKey(), pkts, count)
	if err != nil {
		return res, err
	}
	defer clients.close()
	gw, err := eng.make(gen, gwPriv[:])
	if err != nil {
		return res, err
	}
	defer gw.Close()
	defer gen.stop()
	port, err := listenPort(gw)
	if err != nil {
		return res, fmt.Errorf("%s gateway: %w", eng.name, err)
	}
	if err := gw.IpcSet(clients.gatewayConfig()); err != nil {
		return res, fmt.Errorf("%s gateway: configure %d peers: %w", eng.name, n, err)
	}
	if err := clients.handshake(port, 30*time.Second); err != nil {
		return res, fmt.Errorf("%s gateway: %w", eng.name, err)
	}
	time.Sleep(20 * time.Millisecond) // the last keepalives confirm their sessions
	clients.startSink()
	gen.start()
	// Steady state: every peer has had data (wireguard-go takes a while
	// to reach all of a thousand on a busy machine), then the warm-up.
	b0, b1 := make([]uint64, n), make([]uint64, n)
	deadline := time.Now().Add(10 * time.Second)
	for {
		clients.snapshot(b0)
		res.silent = 0
		for _, b := range b0 {
			if b == 0 {
				res.silent++
			}
		}
		if res.silent == 0 || time.Now().After(deadline) {
			break // a peer still silent shows in the fairness
		}
		time.Sleep(5 * time.Millisecond)
	}
	if res.silent == n {
		return res, fmt.Errorf("%s: no packet reached a peer within 10s", eng.name)
	}
	time.Sleep(cfg.Warmup)

	p0, g0, w0, l0 := count.rxPackets.Load(), gen.txPackets.Load(), gen.writeOffs(), gen.lateArrivals()
	clients.snapshot(b0)
	s0, err := takeSnapshot()
	if err != nil {
		return res, err
	}
	time.Sleep(cfg.Duration)
	p1, g1, w1, l1 := count.rxPackets.Load(), gen.txPackets.Load(), gen.writeOffs(), gen.lateArrivals()
	clients.snapshot(b1)
	s1, err := takeSnapshot()
	if err != nil {
		return res, err
	}
	gen.stop()
	if bad := clients.bad.Load(); bad != 0 {
		return res, fmt.Errorf("%s: %d peers' first packets did not open to what was sent", eng.name, bad)
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
	res.stray = clients.stray.Load()
	if res.packets == 0 {
		return res, fmt.Errorf("%s: no packet delivered during the %v window", eng.name, cfg.Duration)
	}
	return res, nil
}

// peersSection runs every peer count for every engine, alternating
// engines within each repeat and rotating which goes first.
func peersSection(r *Report, cfg Config, p *progress) error {
	var engines []engine
	for _, name := range peersEngines(cfg) {
		e, err := engineByName(name)
		if err != nil {
			return err
		}
		engines = append(engines, e)
	}
	writeOffs, stray, silent := map[string]uint64{}, map[string]uint64{}, map[string]int{}
	harness := map[string][]float64{}
	for rep := 0; rep < cfg.Repeats; rep++ {
		for _, n := range cfg.ActivePeers {
			for _, dir := range peersDirections {
				for i := range engines {
					eng := engines[(i+rep)%len(engines)]
					p.step(fmt.Sprintf("peers %d %s %s, repeat %d/%d", n, dir, eng.name, rep+1, cfg.Repeats))
					var res peersResult
					var hcpu time.Duration
					var err error
					if dir == DirFromPeers {
						res, hcpu, err = runPeersRx(eng, n, cfg)
					} else {
						res, err = runPeers(eng, n, cfg)
					}
					if err != nil {
						return fmt.Errorf("%d peers, %s: %w", n, dir, err)
					}
					c := peersCase(n, dir)
					r.Add(SectionPeers, c, MetricGbps, eng.name, HigherIsBetter, res.gbps())
					r.Add(SectionPeers, c, MetricCPUPerGB, eng.name, LowerIsBetter, res.cpuPerGB())
					if dir == DirFromPeers && res.cpu > 0 {
						share := hcpu.Seconds() / res.cpu.Seconds()
						r.Add(SectionPeers, c, MetricHarnessCPU, eng.name, LowerIsBetter, share)
						r.Add(SectionPeers, c, MetricGatewayCPUPerGB, eng.name, LowerIsBetter, (res.cpu-hcpu).Seconds()/(float64(res.bytes)/1e9))
						harness[eng.name] = append(harness[eng.name], share)
					}
					r.Add(SectionPeers, c, MetricFairness, eng.name, HigherIsBetter, res.fairness)
					r.Add(SectionPeers, c, MetricAllocs, eng.name, LowerIsBetter, res.allocsPerPacket())
					r.Add(SectionPeers, c, MetricLoss, eng.name, LowerIsBetter, res.lossPct())
					writeOffs[eng.name] += res.writeOffs
					stray[eng.name] += res.stray
					silent[eng.name] += res.silent
				}
			}
		}
	}
	var parts []string
	for _, e := range engines {
		parts = append(parts, fmt.Sprintf("%s %d write-offs, %d datagrams that were not data (keepalives, handshakes), %d peers that had nothing 10 s after the start", e.name, writeOffs[e.name], stray[e.name], silent[e.name]))
	}
	r.Note("peers, %s: one gateway device sends %d-byte packets round robin to N peers (harness clients on one socket, real handshakes, real UDP on loopback), closed loop of %d packets in flight over all peers; %s: the N peers seal every packet for real (own key, own counter) and send it round robin from their own source address, fairness is the bytes on the gateway's TUN per inner source; summed over the runs: %s", DirToPeers, inprocMTU, cfg.Window, DirFromPeers, strings.Join(parts, ", "))
	return nil
}
