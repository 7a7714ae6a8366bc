package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"golang.org/x/sys/unix"
)

// pairImpl returns the implementation of the two-daemon tests: Wirelane
// on both sides, or wireguard-go with -reference.
func pairImpl(t *testing.T, tools ...string) impl {
	t.Helper()
	im := implWirelane
	if *reference {
		im = implWGGo
	}
	need(t, im, tools...)
	return im
}

// newSamePair is newPair with one implementation on both sides.
func newSamePair(t *testing.T, tools ...string) *pair {
	t.Helper()
	im := pairImpl(t, tools...)
	return newPair(t, im, im)
}

// handshakeDone asserts that s has completed a handshake with o.
func handshakeDone(t *testing.T, s, o *side) {
	t.Helper()
	for _, line := range strings.Split(s.wg(t, "show", s.ifname, "latest-handshakes"), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == o.pub() {
			if f[1] == "0" {
				t.Fatalf("%s: no handshake with its peer", s.ifname)
			}
			return
		}
	}
	t.Fatalf("%s: peer missing from wg show", s.ifname)
}

func TestPingBothFamiliesBothWays(t *testing.T) {
	p := newSamePair(t)
	p.a.ping(t, p.b.v4)
	p.a.ping(t, p.b.v6)
	p.b.ping(t, p.a.v4)
	p.b.ping(t, p.a.v6)
	handshakeDone(t, p.a, p.b)
	handshakeDone(t, p.b, p.a)
	// A large ping exercises padding and fragmentation of the inner packet.
	p.a.ping(t, p.b.v4, "-s", "1372")
}

func TestIperfTCPAndUDP(t *testing.T) {
	p := newSamePair(t, "iperf3")
	p.a.ping(t, p.b.v4)
	iperf(t, p.a, p.b, p.b.v4, false, false)
	iperf(t, p.a, p.b, p.b.v6, false, true)
	iperf(t, p.a, p.b, p.b.v4, true, false)
}

// TestTCPContentIntact sends 24 MiB of random bytes through the tunnel
// over TCP, both families, and compares what arrives byte for byte. The
// receiving daemon merges TCP segments on their way into its TUN device
// without verifying their checksums (tun/trusted_gro.go), so the kernel
// checks nothing there: only a comparison of the data itself shows that
// every merge was right.
func TestTCPContentIntact(t *testing.T) {
	p := newSamePair(t, "ncat")
	p.a.ping(t, p.b.v4)
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	data := make([]byte, 24<<20)
	r := rand.New(rand.NewPCG(7, 11))
	for i := 0; i+8 <= len(data); i += 8 {
		binary.LittleEndian.PutUint64(data[i:], r.Uint64())
	}
	if err := os.WriteFile(in, data, 0o600); err != nil {
		t.Fatal(err)
	}
	for i, addr := range []string{p.b.v4, p.b.v6} {
		out := filepath.Join(dir, fmt.Sprintf("out%d", i))
		port := strconv.Itoa(int(5200 + iperfPort.Add(1)))
		srv := netns.Start(t, p.b.ns, "sh", "-c", "exec ncat -l --recv-only "+addr+" "+port+" >"+out)
		netns.Eventually(t, 30*time.Second, "ncat transfer to "+addr, func() error {
			_, err := netns.Try(p.a.ns, nil, "sh", "-c", "exec ncat --send-only "+addr+" "+port+" <"+in)
			return err
		})
		if _, err := srv.Wait(t, 20*time.Second); err != nil {
			t.Fatalf("ncat server for %s: %v", addr, err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			n := 0
			for n < len(got) && n < len(data) && got[n] == data[n] {
				n++
			}
			t.Fatalf("TCP to %s: received %d bytes of %d, first difference at byte %d", addr, len(got), len(data), n)
		}
	}
}

// TestRefModeAgainstFastPath runs the conventional send path (wirelaned
// built with -tags wirelane_refmode)
// against the default one: both must carry traffic and interoperate.
func TestRefModeAgainstFastPath(t *testing.T) {
	need(t, implRef, "iperf3")
	p := newPair(t, implRef, implWirelane)
	p.a.ping(t, p.b.v4)
	p.b.ping(t, p.a.v6)
	iperf(t, p.a, p.b, p.b.v4, false, false)
	iperf(t, p.a, p.b, p.b.v4, false, true)
}

// TestRoaming changes B's listen port, then A's source address, and checks
// that the other side learns the new endpoint from authenticated traffic.
func TestRoaming(t *testing.T) {
	p := newSamePair(t)
	p.a.ping(t, p.b.v4)
	if got := p.a.endpointOf(t, p.b); got != "127.0.0.1:10002" {
		t.Fatalf("A's endpoint for B = %s, want 127.0.0.1:10002", got)
	}

	// B moves to another port; its next packets teach A the new one.
	p.b.wg(t, "set", p.b.ifname, "listen-port", "10003")
	p.b.ping(t, p.a.v4)
	if got := p.a.endpointOf(t, p.b); got != "127.0.0.1:10003" {
		t.Fatalf("after B's port change A's endpoint for B = %s, want 127.0.0.1:10003", got)
	}
	p.a.ping(t, p.b.v6)

	// A's loopback address changes under it: packets to 127.0.0.1 now
	// leave from 127.212.121.99, so A must give up its sticky source, and
	// B must learn A's new address.
	netns.Run(t, p.ns0, "ip", "addr", "del", "127.0.0.1/8", "dev", "lo")
	netns.Run(t, p.ns0, "ip", "addr", "add", "127.212.121.99/8", "dev", "lo")
	p.a.wg(t, "set", p.a.ifname, "peer", p.b.pub(), "endpoint", "127.0.0.1:10003")
	p.b.wg(t, "set", p.b.ifname, "peer", p.a.pub(), "endpoint", "127.0.0.1:10001")
	p.a.ping(t, p.b.v4)
	if got := p.b.endpointOf(t, p.a); got != "127.212.121.99:10001" {
		t.Fatalf("after A's address change B's endpoint for A = %s, want 127.212.121.99:10001", got)
	}
	p.b.ping(t, p.a.v6)
}

// TestAllowedIPsSourceFilter sends from an inner source address that B is
// not allowed to use: A must drop it, and accept it once allowed.
func TestAllowedIPsSourceFilter(t *testing.T) {
	p := newSamePair(t)
	p.b.ping(t, p.a.v4)
	spoofed := "192.168.241.99"
	p.b.run(t, "ip", "addr", "add", spoofed+"/24", "dev", p.b.ifname)
	// B's own allowed IPs for A cover A's address, so B sends; A sees a
	// source outside B's allowed IPs and drops it.
	p.b.pingFails(t, p.a.v4, "-I", spoofed)
	// Positive control: the same packet passes once A allows the source.
	p.a.wg(t, "set", p.a.ifname, "peer", p.b.pub(), "allowed-ips", p.b.v4+"/32,"+spoofed+"/32,"+p.b.v6+"/128")
	p.b.ping(t, p.a.v4, "-I", spoofed)
	// And is dropped again when taken away.
	p.a.wg(t, "set", p.a.ifname, "peer", p.b.pub(), "allowed-ips", p.b.v4+"/32,"+p.b.v6+"/128")
	p.b.pingFails(t, p.a.v4, "-I", spoofed)
}

// TestNATPersistentKeepalive puts A behind a masquerading router (ns0):
//
//	ns1 (A, 192.168.1.100) -veth- ns0 (router, MASQUERADE) -veth- ns2 (B, 10.0.0.100)
//
// With conntrack's UDP timeout at 2 s, B can reach A after 3 s of silence
// only because A's keepalives keep the mapping alive. (Showing the mapping
// expire without them is not reliable: the protocol's own timers may send
// a handshake at any time.)
func TestNATPersistentKeepalive(t *testing.T) {
	im := pairImpl(t, "iptables")
	ns0, ns1, ns2 := netns.New(t, "wl0n"), netns.New(t, "wl1n"), netns.New(t, "wl2n")
	netns.Veth(t, ns0, "vethrc", ns1, "vethc")
	netns.Veth(t, ns0, "vethrs", ns2, "veths")
	netns.Run(t, ns0, "ip", "addr", "add", "192.168.1.1/24", "dev", "vethrc")
	netns.Run(t, ns0, "ip", "addr", "add", "10.0.0.1/24", "dev", "vethrs")
	netns.Run(t, ns1, "ip", "addr", "add", "192.168.1.100/24", "dev", "vethc")
	netns.Run(t, ns1, "ip", "route", "add", "default", "via", "192.168.1.1")
	netns.Run(t, ns2, "ip", "addr", "add", "10.0.0.100/24", "dev", "veths")
	netns.Run(t, ns0, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	netns.Run(t, ns0, "iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "192.168.1.0/24", "-d", "10.0.0.0/24", "-j", "MASQUERADE")
	// The conntrack sysctls exist once the NAT rule has loaded conntrack.
	netns.Run(t, ns0, "sysctl", "-qw", "net.netfilter.nf_conntrack_udp_timeout=2")
	netns.Run(t, ns0, "sysctl", "-qw", "net.netfilter.nf_conntrack_udp_timeout_stream=2")

	// Daemons run in the namespaces their interfaces stay in.
	a := newSide(t, im, ns1, ns1, 10001, "192.168.241.1", "fd00::1")
	b := newSide(t, im, ns2, ns2, 10002, "192.168.241.2", "fd00::2")
	a.up(t)
	b.up(t)
	// B first: A's keepalive setting sends an initiation at once.
	b.addPeer(t, a, "")
	a.addPeer(t, b, "10.0.0.100:10002", "persistent-keepalive", "1")
	a.ping(t, b.v4)
	b.ping(t, a.v4)
	if got := b.endpointOf(t, a); got != "10.0.0.1:10001" {
		t.Fatalf("B sees A at %s, want the router's 10.0.0.1:10001", got)
	}
	time.Sleep(3 * time.Second)
	b.ping(t, a.v4)

	a.wg(t, "set", a.ifname, "peer", b.pub(), "persistent-keepalive", "0")
	if got := strings.TrimSpace(a.wg(t, "show", a.ifname, "persistent-keepalive")); !strings.HasSuffix(got, "off") {
		t.Fatalf("persistent keepalive not turned off: %q", got)
	}
}

// TestMTU checks that the MTU set on the interfaces is honoured, from small
// to the 65456 bytes wg-quick picks over loopback, in both families and
// both directions, on one pair of daemons.
func TestMTU(t *testing.T) {
	p := newSamePair(t)
	p.a.ping(t, p.b.v4)
	for _, mtu := range []int{1420, 1280, 9000, 65456} {
		t.Run(strconv.Itoa(mtu), func(t *testing.T) {
			for _, s := range []*side{p.a, p.b} {
				s.run(t, "ip", "link", "set", s.ifname, "mtu", strconv.Itoa(mtu))
			}
			v4Payload, v6Payload := mtu-28, mtu-48
			// Exactly one MTU, not fragmented, both families, both ways.
			p.a.ping(t, p.b.v4, "-M", "do", "-s", strconv.Itoa(v4Payload))
			p.b.ping(t, p.a.v6, "-M", "do", "-s", strconv.Itoa(v6Payload))
			p.b.ping(t, p.a.v4, "-M", "do", "-s", strconv.Itoa(v4Payload))
			p.a.ping(t, p.b.v6, "-M", "do", "-s", strconv.Itoa(v6Payload))
			// One byte more does not fit and is refused at the sender.
			if out, err := netns.Try(p.a.ns, nil, "ping", "-c", "1", "-W", "1", "-M", "do", "-s", strconv.Itoa(v4Payload+1), p.b.v4); err == nil {
				t.Fatalf("MTU %d: oversized ping went through:\n%s", mtu, out)
			}
		})
	}
}

// TestManyAllowedIPs loads a peer with 131,071 allowed IPs through
// `wg setconf` and reads them all back with `wg show`.
func TestManyAllowedIPs(t *testing.T) {
	im := pairImpl(t)
	ns0 := netns.New(t, "wl0n")
	s := newSide(t, im, ns0, ns0, 10001, "192.168.241.1", "fd00::1")
	startDaemon(t, im, ns0, s.ifname)
	peerPub := newSide(t, im, ns0, ns0, 0, "", "").pub()

	const n = 131071
	var conf strings.Builder
	fmt.Fprintf(&conf, "[Interface]\nPrivateKey = %s\nListenPort = 10001\n\n[Peer]\nPublicKey = %s\n", s.key, peerPub)
	want := make(map[string]bool, n)
	for i := 0; i < n; i++ {
		if i%1000 == 0 {
			if i > 0 {
				conf.WriteString("\n")
			}
			conf.WriteString("AllowedIPs = ")
		} else {
			conf.WriteString(", ")
		}
		var p string
		if i%2 == 0 {
			p = fmt.Sprintf("10.%d.%d.%d/32", i>>16&0xff, i>>8&0xff, i&0xff)
		} else {
			p = fmt.Sprintf("fd00:%x:%x::/96", i>>16, i&0xffff)
		}
		want[p] = true
		conf.WriteString(p)
	}
	conf.WriteString("\n")
	file := filepath.Join(t.TempDir(), s.ifname+".conf")
	if err := os.WriteFile(file, []byte(conf.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	s.wg(t, "setconf", s.ifname, file)
	t.Logf("wg setconf with %d allowed IPs: %v", n, time.Since(start))
	start = time.Now()
	out := s.wg(t, "show", s.ifname, "allowed-ips")
	t.Logf("wg show allowed-ips: %v", time.Since(start))
	f := strings.Fields(out)
	if len(f) != n+1 || f[0] != peerPub {
		t.Fatalf("wg show allowed-ips: %d fields, want the peer and %d prefixes", len(f), n)
	}
	for _, p := range f[1:] {
		if !want[p] {
			t.Fatalf("wg show lists %s, which was never set", p)
		}
		delete(want, p)
	}
	if len(want) != 0 {
		t.Fatalf("%d allowed IPs missing from wg show", len(want))
	}
}

// TestUDPSegmentsIntact sends UDP with segmentation offload (UDP_SEGMENT)
// into the tunnel, both families: the kernel hands such a send to the TUN
// device as one train, which the sending daemon cuts into datagrams itself
// (tun/split.go). Every datagram must arrive whole, with its own length
// and checksums (the receiving kernel drops a datagram whose checksum is
// wrong).
func TestUDPSegmentsIntact(t *testing.T) {
	p := newSamePair(t)
	p.a.ping(t, p.b.v4)
	const seg, perSend, sends = 1200, 10, 8
	for _, addr := range []string{p.b.v4, p.b.v6} {
		port := int(5200 + iperfPort.Add(1))
		dst := netip.AddrPortFrom(netip.MustParseAddr(addr), uint16(port))
		rx := udpIn(t, p.b.ns, dst)
		tx := udpIn(t, p.a.ns, netip.AddrPortFrom(netip.IPv6Unspecified(), 0))
		rc, err := tx.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, seg)
		}); err != nil || serr != nil {
			t.Fatalf("UDP_SEGMENT: %v %v", err, serr)
		}
		// Datagram k carries k in its first two bytes, then bytes that
		// depend on k and their position.
		buf := make([]byte, seg*perSend)
		for s := range sends {
			for i := range perSend {
				d := buf[i*seg : (i+1)*seg]
				k := s*perSend + i
				binary.BigEndian.PutUint16(d, uint16(k))
				for j := 2; j < seg; j++ {
					d[j] = byte(k*7 + j)
				}
			}
			if _, err := tx.WriteToUDPAddrPort(buf, dst); err != nil {
				t.Fatalf("send to %s: %v", dst, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		seen := make(map[int]bool)
		got := make([]byte, 65536)
		rx.SetReadDeadline(time.Now().Add(5 * time.Second))
		for len(seen) < sends*perSend {
			n, _, err := rx.ReadFromUDPAddrPort(got)
			if err != nil {
				t.Fatalf("%s: %d of %d datagrams arrived: %v", addr, len(seen), sends*perSend, err)
			}
			if n != seg {
				t.Fatalf("%s: a datagram of %d bytes, want %d", addr, n, seg)
			}
			k := int(binary.BigEndian.Uint16(got))
			for j := 2; j < seg; j++ {
				if got[j] != byte(k*7+j) {
					t.Fatalf("%s: datagram %d differs at byte %d", addr, k, j)
				}
			}
			if seen[k] {
				t.Fatalf("%s: datagram %d twice", addr, k)
			}
			seen[k] = true
		}
		rx.Close()
		tx.Close()
	}
}

// udpIn opens a UDP socket bound to laddr inside namespace ns. The socket
// stays in ns; the thread that entered ns ends with its goroutine.
func udpIn(t *testing.T, ns *netns.NS, laddr netip.AddrPort) *net.UDPConn {
	t.Helper()
	var c *net.UDPConn
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread is not reused
		var f *os.File
		if f, err = os.Open("/run/netns/" + ns.Name); err != nil {
			return
		}
		defer f.Close()
		if err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return
		}
		c, err = net.ListenUDP("udp", net.UDPAddrFromAddrPort(laddr))
	}()
	<-done
	if err != nil {
		t.Fatalf("UDP socket in %s: %v", ns.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}
