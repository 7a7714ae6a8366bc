package e2e

// Faults on the underlay: the kernel self-test topology, where both
// daemons' UDP sockets live on ns0's loopback, with the link between them
// made bad. A file sent through the tunnel with TCP must arrive with the
// right SHA-256 every time (the TUN device does not check TCP checksums,
// so a corrupted packet the tunnel let through would show), and the tunnel
// must recover by itself once the fault goes.
//
// The kernels these tests run on have no netem qdisc ("Specified qdisc
// kind is unknown"), so the bad link is a relay in ns0 that the two
// daemons talk through (each one's peer endpoint is the relay's socket),
// with netem's impairments done in user space: loss, reordering,
// duplication, corruption, a path-MTU black hole (large datagrams dropped
// without an ICMP error) and a link that goes down for 5 s. The last case
// kills the peer's daemon with SIGKILL and starts it again.
//
// FAULT_FILE_MB sets the file's size (default 8; scripts/faults.sh sends
// 50 MB).

import (
	"crypto/rand"
	"crypto/sha256"
	"io"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/control/uapi"
	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// faultFile writes a random file of FAULT_FILE_MB (default 8) MiB and
// returns its path and SHA-256.
func faultFile(t *testing.T) (string, [32]byte) {
	t.Helper()
	mb := 8
	if v, err := strconv.Atoi(os.Getenv("FAULT_FILE_MB")); err == nil && v > 0 {
		mb = v
	}
	path := filepath.Join(t.TempDir(), "in")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, int64(mb)<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return path, sum
}

// sendFile sends the file at in from a to b's v4 address with ncat and
// returns the SHA-256 of what b received. during, if not nil, runs once the
// transfer has started.
func sendFile(t *testing.T, a, b *side, in string, timeout time.Duration, during func()) [32]byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out")
	port := strconv.Itoa(int(5200 + iperfPort.Add(1)))
	srv := netns.Start(t, b.ns, "sh", "-c", "exec ncat -l --recv-only "+b.v4+" "+port+" >"+out)
	var cli *netns.Proc
	netns.Eventually(t, 10*time.Second, "ncat server listening", func() error {
		_, err := netns.Try(b.ns, nil, "sh", "-c", "ss -Hltn | grep -q "+b.v4+":"+port)
		return err
	})
	cli = netns.Start(t, a.ns, "sh", "-c", "exec ncat --send-only "+b.v4+" "+port+" <"+in)
	if during != nil {
		time.Sleep(500 * time.Millisecond)
		select {
		case <-srv.Exited():
			t.Fatal("the transfer was over before the fault")
		default:
		}
		during()
	}
	if out, err := cli.Wait(t, timeout); err != nil {
		t.Fatalf("ncat client: %v\n%s", err, out)
	}
	if _, err := srv.Wait(t, timeout); err != nil {
		t.Fatalf("ncat server: %v", err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	io.Copy(h, f)
	var sum [32]byte
	copy(sum[:], h.Sum(nil))
	return sum
}

// impairment is what the relay does to each datagram, in both directions.
type impairment struct {
	loss, dup, corrupt float64 // probabilities
	reorder            float64 // probability a datagram is held back behind the next few
	maxSize            int     // datagrams larger than this vanish (0: none)
	rate               int     // bytes a second in each direction (0: unlimited)
}

// relay forwards datagrams between A's and B's sockets on ns0's loopback
// through two sockets of its own, impairing them.
type relay struct {
	toB, toA net.PacketConn // A sends to toB's address, B to toA's
	aAddr    net.Addr       // A's and B's real sockets
	bAddr    net.Addr
	mu       sync.Mutex
	imp      impairment
	down     bool
	rng      *mathrand.Rand
	dropped  atomic.Int64
	mangled  atomic.Int64
}

func newRelay(t *testing.T, p *pair) *relay {
	t.Helper()
	r := &relay{
		toB:   udpInNetns(t, p.ns0, 0),
		toA:   udpInNetns(t, p.ns0, 0),
		aAddr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p.a.port},
		bAddr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p.b.port},
		rng:   mathrand.New(mathrand.NewPCG(1, 2)),
	}
	t.Cleanup(func() { r.toB.Close(); r.toA.Close() })
	go r.pump(r.toB, r.toA, func() net.Addr { return r.bAddr })
	go r.pump(r.toA, r.toB, func() net.Addr { return r.aAddr })
	port := func(c net.PacketConn) string { return strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port) }
	p.a.wg(t, "set", p.a.ifname, "peer", p.b.pub(), "endpoint", "127.0.0.1:"+port(r.toB))
	p.b.wg(t, "set", p.b.ifname, "peer", p.a.pub(), "endpoint", "127.0.0.1:"+port(r.toA))
	return r
}

func (r *relay) set(imp impairment) { r.mu.Lock(); r.imp = imp; r.mu.Unlock() }

func (r *relay) setDown(down bool) { r.mu.Lock(); r.down = down; r.mu.Unlock() }

// pump reads from in and writes what survives to dst() from out.
func (r *relay) pump(in, out net.PacketConn, dst func() net.Addr) {
	buf := make([]byte, 1<<16)
	var held [][]byte
	next := time.Now() // when the rate limit lets the next byte go
	for {
		n, _, err := in.ReadFrom(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		rate := r.imp.rate
		r.mu.Unlock()
		if rate > 0 {
			if now := time.Now(); next.Before(now) {
				next = now
			}
			next = next.Add(time.Duration(n) * time.Second / time.Duration(rate))
			if d := time.Until(next); d > 2*time.Millisecond {
				time.Sleep(d)
			}
		}
		pkt := append([]byte(nil), buf[:n]...)
		r.mu.Lock()
		imp, down := r.imp, r.down
		roll := func(p float64) bool { return p > 0 && r.rng.Float64() < p }
		lose, dup, corrupt, hold := roll(imp.loss), roll(imp.dup), roll(imp.corrupt), roll(imp.reorder)
		at := r.rng.IntN(n)
		r.mu.Unlock()
		if down || lose || (imp.maxSize > 0 && n > imp.maxSize) {
			r.dropped.Add(1)
			continue
		}
		if corrupt {
			pkt[at] ^= 0x5a
			r.mangled.Add(1)
		}
		if hold && len(held) < 3 {
			held = append(held, pkt) // goes out after the next datagram
			continue
		}
		out.WriteTo(pkt, dst())
		if dup {
			out.WriteTo(pkt, dst())
		}
		for _, h := range held {
			out.WriteTo(h, dst())
		}
		held = held[:0]
	}
}

func TestFaultsOnTheUnderlay(t *testing.T) {
	need(t, implWirelane, "ncat", "ss")
	in, want := faultFile(t)
	for _, tc := range []struct {
		name   string
		imp    impairment
		during func(t *testing.T, p *pair, r *relay)
	}{
		{name: "loss 5%", imp: impairment{loss: 0.05}},
		{name: "reordering", imp: impairment{reorder: 0.25}},
		{name: "duplication", imp: impairment{dup: 0.05}},
		{name: "corruption 1%", imp: impairment{corrupt: 0.01}},
		// Datagrams over 1280 bytes vanish with no ICMP error; the
		// sender's TCP finds a segment size that passes (MTU probing),
		// as a host behind a black hole must.
		{name: "path MTU black hole", imp: impairment{maxSize: 1280 - 28}},
		// Paced (2.5 MB/s) so that the fault happens mid-transfer.
		{name: "link down for 5 s", imp: impairment{rate: 2500000}, during: func(t *testing.T, p *pair, r *relay) {
			r.setDown(true)
			time.Sleep(5 * time.Second)
			r.setDown(false)
		}},
		{name: "peer daemon SIGKILLed and restarted", imp: impairment{rate: 2500000}, during: func(t *testing.T, p *pair, r *relay) {
			pid := daemonPid(p.ns0, p.b.ifname)
			if pid == 0 {
				t.Fatal("no daemon for B")
			}
			syscall.Kill(pid, syscall.SIGKILL)
			if !waitGone(pid, 5*time.Second) {
				t.Fatal("B's daemon survived SIGKILL")
			}
			os.Remove(uapi.SocketPath(p.b.ifname))
			p.b.up(t) // same key, port and addresses
			p.b.addPeer(t, p.a, "127.0.0.1:"+strconv.Itoa(r.toA.LocalAddr().(*net.UDPAddr).Port))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, implWirelane, implWirelane)
			r := newRelay(t, p)
			p.a.ping(t, p.b.v4)
			if tc.imp.maxSize > 0 {
				netns.Run(t, p.a.ns, "sysctl", "-q", "net.ipv4.tcp_mtu_probing=1")
			}
			r.set(tc.imp)
			var during func()
			if tc.during != nil {
				during = func() { tc.during(t, p, r) }
			}
			start := time.Now()
			got := sendFile(t, p.a, p.b, in, 4*time.Minute, during)
			t.Logf("%s: transfer took %v; relay dropped %d, corrupted %d datagrams",
				tc.name, time.Since(start).Round(time.Millisecond), r.dropped.Load(), r.mangled.Load())
			if got != want {
				t.Fatalf("the file arrived with SHA-256 %x, want %x", got, want)
			}
			r.set(impairment{})
			// Recovered by itself: traffic flows both ways with no action.
			netns.Eventually(t, 30*time.Second, "ping after the fault", func() error {
				_, err := netns.Try(p.a.ns, nil, "ping", "-c", "1", "-W", "2", p.b.v4)
				return err
			})
			p.b.ping(t, p.a.v4)
		})
	}
}
