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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// completed, the peak memory above what the process held before the
// server existed, and the handshakes that failed.
func storm(tb testing.TB, peers []*stormPeer, reconnect int, mk func() stormServer) (setup, elapsed time.Duration, peak uint64, failed int) {
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
	close(stopSampling)
	<-sampled
	if p := peakMem.Load(); p > base {
		peak = p - base
	}
	return setup, elapsed, peak, int(fails.Load())
}

func TestReconnectStormSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("real sockets")
	}
	peers := stormPeers(t, 1000)
	setup, el, peak, failed := storm(t, peers, 100, func() stormServer { return newOurServer(t, mustKey(t), peers) })
	t.Logf("1000 peers configured in %v; 100 handshakes at once in %v; peak %d MiB", setup, el, peak>>20)
	if failed != 0 {
		t.Fatalf("%d of 100 handshakes did not complete", failed)
	}
}

// BenchmarkReconnectStorm: STORM_PEERS (default 10000) configured peers,
// STORM_RECONNECT (default 1000) handshaking at once, against wireguard-go
// and Wirelane in turn.
//
//	go test ./device -run '^$' -bench ReconnectStorm -benchtime 1x -v
func BenchmarkReconnectStorm(b *testing.B) {
	n, r := 10000, 1000
	if v, err := strconv.Atoi(os.Getenv("STORM_PEERS")); err == nil && v > 0 {
		n = v
	}
	if v, err := strconv.Atoi(os.Getenv("STORM_RECONNECT")); err == nil && v > 0 {
		r = min(v, n)
	}
	peers := stormPeers(b, n)
	for it := 0; it < b.N; it++ {
		for _, impl := range []struct {
			name string
			mk   func() stormServer
		}{
			{"wireguard-go", func() stormServer { return newRefServer(b, peers) }},
			{"wirelane", func() stormServer { return newOurServer(b, mustKey(b), peers) }},
		} {
			setup, el, peak, failed := storm(b, peers, r, impl.mk)
			b.Logf("%s: %d peers configured in %v; %d handshakes at once: all done in %v, %d failed; peak memory %.1f MiB",
				impl.name, n, setup.Round(time.Millisecond), r, el.Round(time.Millisecond), failed, float64(peak)/(1<<20))
			b.ReportMetric(el.Seconds(), impl.name+"-s")
			b.ReportMetric(float64(peak)/(1<<20), impl.name+"-peak-MiB")
			if failed != 0 {
				b.Errorf("%s: %d handshakes did not complete", impl.name, failed)
			}
			time.Sleep(time.Second)
		}
	}
}
