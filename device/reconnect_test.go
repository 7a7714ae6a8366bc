package device

// The reconnect storm: a server with many configured peers comes back from
// a restart and a crowd of them handshake at once. Every handshake must
// complete; the time for all of them and the server's peak memory are
// measured against wireguard-go in the same run (BenchmarkReconnectStorm;
// docs/benchmarks.md), and a small version runs in CI
// (TestReconnectStormSmoke).
//
// A restarted server has no sessions and no cookie state, and its peers'
// old sessions name indices it no longer knows: what reaches it is the
// peers' fresh initiations, which is what the storm sends, each from its
// own address (127.66.0.0/16) so that the per-source rate limit applies
// per peer as it would on the Internet. Each initiator behaves as the
// protocol says: it retries after RekeyTimeout, and answers a cookie reply
// at once with mac2.

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/conn"
	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/tun/memtun"
)

// stormPeer is one of the server's configured peers.
type stormPeer struct {
	key noise.PrivateKey
	hs  *noise.Handshake // its handshake with the server
}

// handshakeOnce runs one protocol-faithful initiation from a fresh socket
// on src to dst and reports when the response arrived.
func (sp *stormPeer) handshakeOnce(src netip.Addr, pub noise.PublicKey, dst netip.AddrPort, timeout time.Duration) error {
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(src, 0)))
	if err != nil {
		return err
	}
	defer c.Close()
	gen := noise.NewCookieGenerator(pub)
	idx := uint32(0x2000)
	buf := make([]byte, 256)
	send := func() error {
		idx++
		now := time.Now()
		m, err := sp.hs.CreateInitiation(idx, now)
		if err != nil {
			return err
		}
		msg := m.MarshalTo(buf[128:128])
		gen.AddMACs(msg, now)
		_, err = c.WriteToUDPAddrPort(msg, dst)
		return err
	}
	start := time.Now()
	if err := send(); err != nil {
		return err
	}
	retry := time.Now().Add(RekeyTimeout)
	for time.Since(start) < timeout {
		c.SetReadDeadline(retry)
		n, _, err := c.ReadFromUDPAddrPort(buf[:128])
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				if err := send(); err != nil {
					return err
				}
				retry = time.Now().Add(RekeyTimeout)
				continue
			}
			return err
		}
		msg := buf[:n]
		switch noise.MessageType(msg) {
		case noise.MessageCookieReplyType:
			var m noise.MessageCookieReply
			if m.Unmarshal(msg) == nil && m.Receiver == idx && gen.ConsumeReply(&m, time.Now()) {
				if err := send(); err != nil {
					return err
				}
			}
		case noise.MessageResponseType:
			if n == noise.MessageResponseSize && binary.LittleEndian.Uint32(msg[8:12]) == idx {
				return nil
			}
		}
	}
	return fmt.Errorf("no handshake within %v", timeout)
}

// stormServer is the responder under test.
type stormServer interface {
	pub() noise.PublicKey
	addr() netip.AddrPort
	close()
}

type ourServer struct {
	d   *Device
	key noise.PrivateKey
}

func (s *ourServer) pub() noise.PublicKey { return s.key.PublicKey() }
func (s *ourServer) addr() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(s.d.boundPort.Load()))
}
func (s *ourServer) close() { s.d.Close() }

func newOurServer(tb testing.TB, key noise.PrivateKey, peers []*stormPeer) stormServer {
	d := NewDevice(memtun.New("storm", 1420), conn.NewStdBind(), Options{})
	must(tb, d.Up())
	cfg := &Config{PrivateKey: ptr(key)}
	for i, sp := range peers {
		cfg.Peers = append(cfg.Peers, PeerConfig{PublicKey: sp.key.PublicKey(), AllowedIPs: []AllowedIPChange{{Prefix: stormPrefix(i)}}})
	}
	must(tb, d.Configure(cfg))
	return &ourServer{d: d, key: key}
}

type refServer struct{ r *refPeer }

func (s *refServer) pub() noise.PublicKey { return s.r.key.PublicKey() }
func (s *refServer) addr() netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), s.r.port)
}
func (s *refServer) close() { s.r.dev.Close() }

func newRefServer(tb testing.TB, peers []*stormPeer) stormServer {
	r := newRefPeer(&testing.T{})
	var b strings.Builder
	for i, sp := range peers {
		pub := sp.key.PublicKey()
		fmt.Fprintf(&b, "public_key=%s\nallowed_ip=%s\n", hex.EncodeToString(pub[:]), stormPrefix(i))
	}
	if err := r.dev.IpcSet(b.String()); err != nil {
		tb.Fatal(err)
	}
	return &refServer{r: r}
}

// stormPrefix is the allowed IP of the i-th peer.
func stormPrefix(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 32)
}

// stormPeers makes n peer keys.
func stormPeers(tb testing.TB, n int) []*stormPeer {
	out := make([]*stormPeer, n)
	for i := range out {
		out[i] = &stormPeer{key: mustKey(tb)}
	}
	return out
}

// memNow returns the bytes of live heap objects and goroutine stacks.
func memNow(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// storm starts a server with peers (made by mk), has the first reconnect
// of them handshake at once, and returns how long until every handshake
// completed, the process's CPU time meanwhile, the peak memory above what
// the process held before the server existed, and the handshakes that
// failed.
func storm(tb testing.TB, peers []*stormPeer, reconnect int, mk func() stormServer) (setup, elapsed, cpu time.Duration, peak uint64, failed int) {
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	runtime.GC()
	base := memNow(samples)
	var peakMem atomic.Uint64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if m := memNow(samples); m > peakMem.Load() {
				peakMem.Store(m)
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()
	t0 := time.Now()
	srv := mk()
	setup = time.Since(t0)
	defer srv.close()
	pub, dst := srv.pub(), srv.addr()
	for _, sp := range peers[:reconnect] {
		sp.hs = noise.NewHandshake(noise.NewLocal(sp.key), pub, noise.PresharedKey{})
	}
	var wg sync.WaitGroup
	var fails atomic.Int64
	cpu0 := stormProcessCPU()
	start := time.Now()
	for i, sp := range peers[:reconnect] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := netip.AddrFrom4([4]byte{127, 66, byte(i / 250), byte(1 + i%250)})
			if err := sp.handshakeOnce(src, pub, dst, 60*time.Second); err != nil {
				fails.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed = time.Since(start)
	cpu = stormProcessCPU() - cpu0
	close(stopSampling)
	<-sampled
	if p := peakMem.Load(); p > base {
		peak = p - base
	}
	return setup, elapsed, cpu, peak, int(fails.Load())
}

func TestReconnectStormSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	peers := stormPeers(t, 1000)
	setup, el, _, peak, failed := storm(t, peers, 100, func() stormServer { return newOurServer(t, mustKey(t), peers) })
	t.Logf("1000 peers configured in %v; 100 handshakes at once in %v; peak %d MiB", setup, el, peak>>20)
	if failed != 0 {
		t.Fatalf("%d of 100 handshakes did not complete", failed)
	}
}

// BenchmarkReconnectStorm: STORM_PEERS (default 10000) configured peers,
// STORM_RECONNECT (default 1000) handshaking at once, against wireguard-go
// and Wirelane in the same run, STORM_ROUNDS (default 5) rounds that
// alternate which engine goes first, so that a noisy moment of the shared
// machine falls on both. Per engine: the median and the range of the wall
// time for all handshakes, of the process's CPU time during the storm
// (user + system; it includes the initiators' share, the same for both
// engines, and is less sensitive to other load than the wall time) and of
// the peak memory; then the ratios of the medians.
//
//	nice go test ./device -run '^$' -bench ReconnectStorm -benchtime 1x -v
func BenchmarkReconnectStorm(b *testing.B) {
	n, r, rounds := 10000, 1000, 5
	if v, err := strconv.Atoi(os.Getenv("STORM_PEERS")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("STORM_RECONNECT")); err == nil && v > 0 {
		r = min(v, n)
	}
	if v, err := strconv.Atoi(os.Getenv("STORM_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	peers := stormPeers(b, n)
	type impl struct {
		name              string
		mk                func() stormServer
		wall, cpu, peakMB []float64
	}
	impls := []*impl{
		{name: "wireguard-go", mk: func() stormServer { return newRefServer(b, peers) }},
		{name: "wirelane", mk: func() stormServer { return newOurServer(b, mustKey(b), peers) }},
	}
	for it := 0; it < b.N; it++ {
		for round := 0; round < rounds; round++ {
			order := []*impl{impls[0], impls[1]}
			if round%2 == 1 {
				order[0], order[1] = order[1], order[0]
			}
			for _, im := range order {
				setup, el, cpu, peak, failed := storm(b, peers, r, im.mk)
				b.Logf("round %d, %s: %d peers configured in %v; %d handshakes at once: all done in %v (CPU %v), %d failed; peak memory %.1f MiB",
					round+1, im.name, n, setup.Round(time.Millisecond), r, el.Round(time.Millisecond), cpu.Round(time.Millisecond), failed, float64(peak)/(1<<20))
				if failed != 0 {
					b.Errorf("%s: %d handshakes did not complete", im.name, failed)
				}
				im.wall = append(im.wall, el.Seconds())
				im.cpu = append(im.cpu, cpu.Seconds())
				im.peakMB = append(im.peakMB, float64(peak)/(1<<20))
				time.Sleep(time.Second)
			}
		}
	}
	for _, im := range impls {
		b.Logf("%s over %d rounds: wall %s s, CPU %s s, peak %s MiB (median [min-max])",
			im.name, len(im.wall), stormMedianRange(im.wall), stormMedianRange(im.cpu), stormMedianRange(im.peakMB))
		b.ReportMetric(stormMedian(im.wall), im.name+"-median-s")
		b.ReportMetric(stormMedian(im.cpu), im.name+"-median-cpu-s")
		b.ReportMetric(stormMedian(im.peakMB), im.name+"-median-peak-MiB")
	}
	ref, ours := impls[0], impls[1]
	b.Logf("wirelane / wireguard-go, medians: wall %.2f, CPU %.2f, peak memory %.2f",
		stormMedian(ours.wall)/stormMedian(ref.wall), stormMedian(ours.cpu)/stormMedian(ref.cpu), stormMedian(ours.peakMB)/stormMedian(ref.peakMB))
	b.ReportMetric(stormMedian(ours.cpu)/stormMedian(ref.cpu), "cpu-ratio")
	b.ReportMetric(stormMedian(ours.wall)/stormMedian(ref.wall), "wall-ratio")
}

// stormProcessCPU is the user and system CPU time the process has used.
func stormProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// stormMedian returns the median of xs (the mean of the middle two for an even
// count).
func stormMedian(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// stormMedianRange formats the median and the range of xs.
func stormMedianRange(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.3g [%.3g-%.3g]", stormMedian(xs), lo, hi)
}
