package ovpntunnel

// Faults on the underlay for OpenVPN, as internal/testkit/e2e's
// TestFaultsOnTheUnderlay does for WireGuard: `wirelane ovpn connect`
// talks to `wirelane ovpn serve` through a relay in the server's namespace
// that impairs the datagrams (the test kernels have no netem qdisc): loss,
// reordering, duplication, corruption, a path-MTU black hole (datagrams
// over 1280 bytes dropped without an ICMP error; the client's
// `mssfix 1280 mtu` clamps TCP under it), the link down for 5 s, the
// server silent to the client past ping-restart, and the server's daemon
// killed with SIGKILL and started again (the client finds
// out by ping-restart and reconnects by itself). A file sent with TCP
// through the tunnel must arrive with the right SHA-256, and the tunnel
// must carry traffic again by itself afterwards.
//
//	ofc (client)                                   ofs (server)
//	  wlfc0 10.13.0.2 <- connect                     wlfs0 10.13.0.1 <- serve :1194
//	  c1 192.168.87.2 =========veth========== s1 192.168.87.1, relay :1195

import (
	"crypto/rand"
	"crypto/sha256"
	"io"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// ovpnImpairment is what the relay does to each datagram.
type ovpnImpairment struct {
	loss, dup, corrupt, reorder float64
	maxSize                     int // datagrams larger than this vanish (0: none)
	rate                        int // bytes a second each way (0: unlimited)
}

// ovpnRelay forwards between the client (whoever sends to front) and the
// server at back, impairing the datagrams both ways.
type ovpnRelay struct {
	front, side net.PacketConn
	server      net.Addr
	mu          sync.Mutex
	client      net.Addr // last client address seen; guarded by mu
	imp         ovpnImpairment
	down        bool // both ways; guarded by mu
	downToCli   bool // only from the server to the client; guarded by mu
	rng         *mathrand.Rand
	dropped     atomic.Int64 // datagrams lost, the link down or too large
}

// listenIn opens a UDP socket on addr in ns.
func listenIn(t *testing.T, ns *netns.NS, addr string) net.PacketConn {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := vnetns.GetFromName(ns.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := vnetns.Set(target); err != nil {
		t.Fatal(err)
	}
	defer vnetns.Set(orig)
	c, err := net.ListenPacket("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func newOVPNRelay(t *testing.T, ns *netns.NS, front, server string) *ovpnRelay {
	sa, err := net.ResolveUDPAddr("udp4", server)
	if err != nil {
		t.Fatal(err)
	}
	r := &ovpnRelay{front: listenIn(t, ns, front), side: listenIn(t, ns, sa.IP.String()+":0"), server: sa,
		rng: mathrand.New(mathrand.NewPCG(5, 6))}
	go r.pump(r.front, r.side, false, func(from net.Addr) net.Addr {
		r.mu.Lock()
		r.client = from
		r.mu.Unlock()
		return r.server
	})
	go r.pump(r.side, r.front, true, func(net.Addr) net.Addr {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.client
	})
	return r
}

func (r *ovpnRelay) set(imp ovpnImpairment) { r.mu.Lock(); r.imp = imp; r.mu.Unlock() }
func (r *ovpnRelay) setDown(d bool)         { r.mu.Lock(); r.down = d; r.mu.Unlock() }
func (r *ovpnRelay) setDownToClient(d bool) { r.mu.Lock(); r.downToCli = d; r.mu.Unlock() }

// pump forwards from in to out; toClient says which way that is.
func (r *ovpnRelay) pump(in, out net.PacketConn, toClient bool, dst func(from net.Addr) net.Addr) {
	buf := make([]byte, 1<<16)
	var held [][]byte
	next := time.Now()
	for {
		n, from, err := in.ReadFrom(buf)
		if err != nil {
			return
		}
		to := dst(from)
		if to == nil {
			continue
		}
		pkt := append([]byte(nil), buf[:n]...)
		r.mu.Lock()
		imp, down := r.imp, r.down || (toClient && r.downToCli)
		roll := func(p float64) bool { return p > 0 && r.rng.Float64() < p }
		lose, dup, corrupt, hold := roll(imp.loss), roll(imp.dup), roll(imp.corrupt), roll(imp.reorder)
		at := r.rng.IntN(n)
		r.mu.Unlock()
		if imp.rate > 0 {
			if now := time.Now(); next.Before(now) {
				next = now
			}
			next = next.Add(time.Duration(n) * time.Second / time.Duration(imp.rate))
			if d := time.Until(next); d > 2*time.Millisecond {
				time.Sleep(d)
			}
		}
		if down || lose || (imp.maxSize > 0 && n > imp.maxSize) {
			r.dropped.Add(1)
			continue
		}
		if corrupt {
			pkt[at] ^= 0x5a
		}
		if hold && len(held) < 3 {
			held = append(held, pkt)
			continue
		}
		out.WriteTo(pkt, to)
		if dup {
			out.WriteTo(pkt, to)
		}
		for _, h := range held {
			out.WriteTo(h, to)
		}
		held = held[:0]
	}
}

func TestE2EOpenVPNFaultsOnTheUnderlay(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end")
	}
	tb := newTestbed(t, testbedConfig{ca: "Wirelane Faults CA", client: "cli1", srvNS: "ofs", cliNS: "ofc",
		srvIf: "s1", cliIf: "c1", net: "192.168.87", need: []string{"ping", "ncat", "ss"}})
	tb.write(t, map[string]string{
		"server.conf": "port 1194\nproto udp\nlocal 192.168.87.1\ndev wlfs0\ntopology subnet\nserver 10.13.0.0 255.255.255.0\n" +
			serverCreds + "data-ciphers AES-256-GCM\nkeepalive 1 10\nverb 3\n",
		// Large enough for every case's link, and small enough for the
		// black hole's: 1280 bytes with the IP and UDP headers.
		"cli1.ovpn": "client\ndev tun\nremote 192.168.87.1 1195 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			"mssfix 1280 mtu\n" + tb.clientInline(),
	})
	mb := 8
	if v, err := strconv.Atoi(os.Getenv("FAULT_FILE_MB")); err == nil && v > 0 {
		mb = v
	}
	in := filepath.Join(tb.dir, "in")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.CopyN(io.MultiWriter(f, h), rand.Reader, int64(mb)<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := string(h.Sum(nil))

	relay := newOVPNRelay(t, tb.srvNS, "192.168.87.1:1195", "192.168.87.1:1194")
	srv := startHelper(t, tb.srvNS, "serve", tb.path("server.conf"))
	srv.waitFor(t, "listening on udp", 10*time.Second)
	cli := startHelper(t, tb.cliNS, "connect", "--dev", "wlfc0", tb.path("cli1.ovpn"))
	cli.waitFor(t, "tunnel up", 15*time.Second)
	t.Cleanup(func() { cli.interrupt(t) })
	netns.Run(t, tb.cliNS, "ping", "-c", "2", "-i", "0.2", "-W", "2", "10.13.0.1")
	// TCP retries at least once a second (kernels from 6.15; older ones
	// back off to minutes): a transfer resumes within a second of the
	// tunnel's recovery, so the time of a case is the tunnel's, not the
	// backoff's. With retries that frequent, 40 of them (about 38 s)
	// before TCP gives up outlast the ping-restart outage. The same for
	// a socket whose process has closed it (ncat's sender exits once the
	// kernel holds the file's end): tcp_orphan_retries, 8 by default,
	// about 7 s at these retry intervals, shorter than the outage.
	for _, ns := range []*netns.NS{tb.cliNS, tb.srvNS} {
		netns.Try(ns, nil, "sysctl", "-q", "-w", "net.ipv4.tcp_rto_max_ms=1000")
		netns.Run(t, ns, "sysctl", "-q", "-w", "net.ipv4.tcp_retries2=40")
		netns.Run(t, ns, "sysctl", "-q", "-w", "net.ipv4.tcp_orphan_retries=40")
	}

	parent := t
	for i, tc := range []struct {
		name   string
		imp    ovpnImpairment
		during func(t *testing.T)
	}{
		{name: "loss 5%", imp: ovpnImpairment{loss: 0.05}},
		{name: "reordering", imp: ovpnImpairment{reorder: 0.25}},
		{name: "duplication", imp: ovpnImpairment{dup: 0.05}},
		{name: "corruption 1%", imp: ovpnImpairment{corrupt: 0.01}},
		// Datagrams over 1280 bytes (with the IP and UDP headers) vanish
		// with no ICMP error: only MSS clamping lets TCP through.
		{name: "path MTU black hole", imp: ovpnImpairment{maxSize: 1280 - 28}},
		{name: "link down for 5 s", imp: ovpnImpairment{rate: 2500000}, during: func(*testing.T) {
			relay.setDown(true)
			time.Sleep(5 * time.Second)
			relay.setDown(false)
		}},
		// Nothing from the server for longer than the pushed
		// ping-restart (10 s; the server's own is twice that): the
		// client restarts its session mid-transfer while the server
		// still holds the old one, which the new session replaces.
		{name: "server silent to the client past ping-restart", imp: ovpnImpairment{rate: 2500000}, during: func(t *testing.T) {
			restarts := strings.Count(cli.out.String(), "within ping-restart")
			relay.setDownToClient(true)
			time.Sleep(11 * time.Second)
			relay.setDownToClient(false)
			if strings.Count(cli.out.String(), "within ping-restart") <= restarts {
				t.Fatalf("the client did not restart its session after 11 s of silence:\n%s", cli.out.String())
			}
		}},
		// The server's process dies with no goodbye; the client notices
		// by ping-restart (the pushed keepalive 1 10) and reconnects to
		// the server started again, which must come up over what the
		// dead one left (its status file and control socket).
		{name: "server daemon SIGKILLed and restarted", imp: ovpnImpairment{rate: 2500000}, during: func(t *testing.T) {
			pid := srv.cmd.Process.Pid
			srv.cmd.Process.Kill()
			select {
			case <-srv.done:
			case <-time.After(5 * time.Second):
				t.Fatal("the server survived SIGKILL")
			}
			netns.Eventually(t, 5*time.Second, "wlfs0 gone with the server", func() error {
				if _, err := netns.Try(tb.srvNS, nil, "ip", "link", "show", "wlfs0"); err == nil {
					return os.ErrExist
				}
				return nil
			})
			ups := strings.Count(cli.out.String(), "tunnel up again")
			srv = startHelper(parent, tb.srvNS, "serve", tb.path("server.conf")) // for the cases after this one
			srv.waitFor(t, "listening on udp", 10*time.Second)
			parent.Cleanup(func() { srv.interrupt(parent) })
			netns.Eventually(t, 30*time.Second, "client reconnected by itself", func() error {
				if strings.Count(cli.out.String(), "tunnel up again") <= ups {
					return os.ErrDeadlineExceeded
				}
				return nil
			})
			// What the killed server left goes at the next look.
			if _, err := Status(); err != nil {
				t.Fatal(err)
			}
			for _, ext := range []string{".json", ".sock"} {
				f := filepath.Join(StatusDir, "ovpn-"+strconv.Itoa(pid)+ext)
				if _, err := os.Stat(f); !os.IsNotExist(err) {
					t.Errorf("%s of the killed server is still there (%v)", f, err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			relay.set(tc.imp)
			defer relay.set(ovpnImpairment{})
			out := filepath.Join(tb.dir, "out"+strconv.Itoa(i))
			port := strconv.Itoa(5300 + i)
			ncs := netns.Start(t, tb.srvNS, "sh", "-c", "exec ncat -l --recv-only 10.13.0.1 "+port+" >"+out)
			netns.Eventually(t, 10*time.Second, "ncat listening", func() error {
				_, err := netns.Try(tb.srvNS, nil, "sh", "-c", "ss -Hltn | grep -q 10.13.0.1:"+port)
				return err
			})
			start := time.Now()
			ncc := netns.Start(t, tb.cliNS, "sh", "-c", "exec ncat -w 60 --send-only 10.13.0.1 "+port+" <"+in)
			if tc.during != nil {
				// Mid-transfer: the connection is up and 1 MiB is in
				// (a fault before the handshake would test SYN retries).
				netns.Eventually(t, 20*time.Second, "the transfer under way", func() error {
					if st, err := os.Stat(out); err != nil || st.Size() < 1<<20 {
						return os.ErrNotExist
					}
					return nil
				})
				select {
				case <-ncs.Exited():
					t.Fatal("the transfer was over before the fault")
				default:
				}
				tc.during(t)
			}
			if o, err := ncc.Wait(t, 4*time.Minute); err != nil {
				t.Fatalf("ncat client: %v\n%s", err, o)
			}
			if _, err := ncs.Wait(t, 4*time.Minute); err != nil {
				t.Fatalf("ncat server: %v", err)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			got := sha256.Sum256(b)
			t.Logf("%s: %d MB in %v; the relay dropped %d datagrams", tc.name, mb,
				time.Since(start).Round(time.Millisecond), relay.dropped.Swap(0))
			if string(got[:]) != want {
				t.Fatalf("the file arrived with a different SHA-256 (%d bytes of %d)", len(b), mb<<20)
			}
			relay.set(ovpnImpairment{})
			netns.Eventually(t, 30*time.Second, "ping after the fault", func() error {
				_, err := netns.Try(tb.cliNS, nil, "ping", "-c", "1", "-W", "2", "10.13.0.1")
				return err
			})
		})
	}
}
