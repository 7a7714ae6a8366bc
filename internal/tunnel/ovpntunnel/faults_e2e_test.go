package ovpntunnel

// Faults on the underlay for OpenVPN, as internal/testkit/e2e's
// TestFaultsOnTheUnderlay does for WireGuard: `wirelane ovpn connect`
// talks to `wirelane ovpn serve` through a relay in the server's namespace
// that impairs the datagrams (the test kernels have no netem qdisc): loss,
// reordering, duplication, corruption, and the link down for 5 s. A file
// sent with TCP through the tunnel must arrive with the right SHA-256, and
// the tunnel must carry traffic again by itself afterwards.
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
	"sync"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"

	"github.com/wirelane/wirelane/internal/testkit/netns"
)

// ovpnImpairment is what the relay does to each datagram.
type ovpnImpairment struct {
	loss, dup, corrupt, reorder float64
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
	down        bool
	rng         *mathrand.Rand
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
	go r.pump(r.front, r.side, func(from net.Addr) net.Addr {
		r.mu.Lock()
		r.client = from
		r.mu.Unlock()
		return r.server
	})
	go r.pump(r.side, r.front, func(net.Addr) net.Addr {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.client
	})
	return r
}

func (r *ovpnRelay) set(imp ovpnImpairment) { r.mu.Lock(); r.imp = imp; r.mu.Unlock() }
func (r *ovpnRelay) setDown(d bool)         { r.mu.Lock(); r.down = d; r.mu.Unlock() }

func (r *ovpnRelay) pump(in, out net.PacketConn, dst func(from net.Addr) net.Addr) {
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
		imp, down := r.imp, r.down
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
		if down || lose {
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
		"cli1.ovpn": "client\ndev tun\nremote 192.168.87.1 1195 udp\nnobind\nremote-cert-tls server\ndata-ciphers AES-256-GCM\n" +
			tb.clientInline(),
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

	for i, tc := range []struct {
		name   string
		imp    ovpnImpairment
		during func()
	}{
		{name: "loss 5%", imp: ovpnImpairment{loss: 0.05}},
		{name: "reordering", imp: ovpnImpairment{reorder: 0.25}},
		{name: "duplication", imp: ovpnImpairment{dup: 0.05}},
		{name: "corruption 1%", imp: ovpnImpairment{corrupt: 0.01}},
		{name: "link down for 5 s", imp: ovpnImpairment{rate: 2500000}, during: func() {
			relay.setDown(true)
			time.Sleep(5 * time.Second)
			relay.setDown(false)
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
			ncc := netns.Start(t, tb.cliNS, "sh", "-c", "exec ncat --send-only 10.13.0.1 "+port+" <"+in)
			if tc.during != nil {
				time.Sleep(500 * time.Millisecond)
				tc.during()
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
			t.Logf("%s: %d MB in %v", tc.name, mb, time.Since(start).Round(time.Millisecond))
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
