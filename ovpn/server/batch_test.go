package server

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/client"
	"github.com/wirelane/wirelane/tun"
	"github.com/wirelane/wirelane/tun/memtun"
)

// WritePackets to two clients, interleaved, with sizes that end and
// restart GSO runs: every packet arrives once, in order, intact, and the
// byte counters and ReadPackets agree.
func TestWritePacketsBatchesPerClient(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
	b := dialClient(t, f.clientConfig(t, s, "b", ""), client.Options{})
	srv := s.TunnelAddress().Addr()
	var pkts [][]byte
	want := map[netip.Addr][]uint16{}
	for i := range 150 {
		c := a
		if i%40 >= 30 { // runs of 30 for a, then 10 for b
			c = b
		}
		dst := c.Pushed().Local.Addr()
		size := 1200
		if i%7 == 6 {
			size = 300 // a shorter one ends a GSO run
		}
		pkts = append(pkts, testnet.ICMPEcho(0, srv, dst, 1, uint16(i), make([]byte, size)))
		want[dst] = append(want[dst], uint16(i))
	}
	gso, _ := s.bind.Offload()
	t.Logf("GSO on the server socket: %v", gso)
	if err := s.WritePackets(pkts); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Session{a, b} {
		dst := c.Pushed().Local.Addr()
		buf := make([]byte, 2048)
		for k, seq := range want[dst] {
			p, ok := readPacketWithin(c, buf, 3*time.Second)
			if !ok {
				t.Fatalf("client %s: packet %d of %d (seq %d) never arrived", dst, k, len(want[dst]), seq)
			}
			if len(p) < 28 || binary.BigEndian.Uint16(p[26:]) != seq || netip.AddrFrom4([4]byte(p[16:20])) != dst {
				t.Fatalf("client %s: packet %d is %x..., want seq %d", dst, k, p[:min(len(p), 28)], seq)
			}
		}
	}
	var tx uint64
	for _, c := range s.Clients() {
		tx += c.TxBytes
	}
	var sum uint64
	for _, p := range pkts {
		sum += uint64(len(p))
	}
	if tx != sum {
		t.Fatalf("TxBytes %d, want %d", tx, sum)
	}

	// Client to host, one batch (the client sends it with UDP GSO, which
	// loopback hands to the server's UDP_GRO socket still coalesced):
	// ReadPackets returns the packets in order, several at once.
	var up [][]byte
	for i := range 5 {
		up = append(up, testnet.ICMPEcho(8, a.Pushed().Local.Addr(), srv, 2, uint16(i), make([]byte, 100)))
	}
	if err := a.WritePackets(up); err != nil {
		t.Fatal(err)
	}
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 16+2048)
	}
	sizes := make([]int, 8)
	total := 0
	deadline := time.Now().Add(3 * time.Second)
	for total < 5 && time.Now().Before(deadline) {
		n, err := s.ReadPackets(bufs, sizes, 16)
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if sizes[i] != 128 || binary.BigEndian.Uint16(bufs[i][16+26:]) != uint16(total+i) {
				t.Fatalf("ReadPackets packet %d: size %d", total+i, sizes[i])
			}
		}
		total += n
	}
	if total != 5 {
		t.Fatalf("ReadPackets returned %d packets, want 5", total)
	}
}

// WritePackets looks a destination up once per run of packets to it:
// runs broken by a packet for an address no client has, by one that is
// not IP, and by the other client still reach the right client each, in
// order, and only the unroutable two count as NoRoute.
func TestWritePacketsRunLookup(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(UDP), Options{})
	a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
	b := dialClient(t, f.clientConfig(t, s, "b", ""), client.Options{})
	srv := s.TunnelAddress().Addr()
	da, db, nobody := a.Pushed().Local.Addr(), b.Pushed().Local.Addr(), netip.MustParseAddr("10.8.0.250")
	order := []netip.Addr{da, da, nobody, da, {}, da, db, db, da, nobody, nobody}
	var pkts [][]byte
	want := map[netip.Addr][]uint16{}
	for i, dst := range order {
		if !dst.IsValid() {
			pkts = append(pkts, []byte{0x00, 1, 2, 3}) // not IP
			continue
		}
		pkts = append(pkts, testnet.ICMPEcho(0, srv, dst, 1, uint16(i), make([]byte, 100)))
		want[dst] = append(want[dst], uint16(i))
	}
	before := s.Stats().NoRoute.Load()
	if err := s.WritePackets(pkts); !errors.Is(err, ErrNoRoute) {
		t.Fatalf("WritePackets = %v, want ErrNoRoute (the first error)", err)
	}
	if n := s.Stats().NoRoute.Load() - before; n != 4 {
		t.Fatalf("NoRoute counted %d, want 4 (three for nobody, one not IP)", n)
	}
	for _, c := range []*client.Session{a, b} {
		dst := c.Pushed().Local.Addr()
		buf := make([]byte, 2048)
		for k, seq := range want[dst] {
			p, ok := readPacketWithin(c, buf, 3*time.Second)
			if !ok {
				t.Fatalf("client %s: packet %d of %d (seq %d) never arrived", dst, k, len(want[dst]), seq)
			}
			if len(p) < 28 || binary.BigEndian.Uint16(p[26:]) != seq || netip.AddrFrom4([4]byte(p[16:20])) != dst {
				t.Fatalf("client %s: packet %d is %x..., want seq %d", dst, k, p[:min(len(p), 28)], seq)
			}
		}
	}
}

// With a TUN device attached, the receive goroutine (the UDP reader, a TCP
// connection's reader) writes what clients send straight to the device,
// a receive batch (or a run of frames already read) per Write, behind
// tun.Offset through its own tun.BatchWriter, in order, without the rx
// queue and without a hand-off to the TUN writer goroutine; ReadPackets
// then sees nothing.
func TestAttachTUNWritesReceiveBatches(t *testing.T) {
	for _, tc := range []struct {
		proto  Proto
		reader string // the function that must be on the stack of every device write
	}{{UDP, "(*Server).readUDP"}, {TCP, "(*Server).serveTCP"}} {
		t.Run(tc.reader, func(t *testing.T) { attachTUNWritesReceiveBatches(t, tc.proto, tc.reader) })
	}
}

func attachTUNWritesReceiveBatches(t *testing.T, proto Proto, reader string) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(proto), Options{})
	a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
	dev := memtun.New("tun-test", 1500)
	defer dev.Close()
	type write struct {
		seqs   []uint16
		offset int
		inline bool // the receive goroutine wrote it
	}
	writes := make(chan write, 64)
	dev.SetWriteHook(func(pkts [][]byte, offset int) {
		stack := make([]byte, 64<<10)
		w := write{offset: offset, inline: bytes.Contains(stack[:runtime.Stack(stack, false)], []byte(reader))}
		for _, p := range pkts {
			w.seqs = append(w.seqs, binary.BigEndian.Uint16(p[offset+26:]))
		}
		writes <- w
	})
	attached := make(chan error, 1)
	go func() { attached <- s.AttachTUN(dev) }()
	netns.Eventually(t, 3*time.Second, "device attached", func() error {
		if s.tun.Load() == nil {
			return errors.New("not yet")
		}
		return nil
	})
	srv := s.TunnelAddress().Addr()
	// A reader already waiting when the device was attached takes it up
	// after its next receive: one packet first, whichever way it goes.
	warm := testnet.ICMPEcho(8, a.Pushed().Local.Addr(), srv, 3, 1000, make([]byte, 100))
	if err := a.WritePacket(warm); err != nil {
		t.Fatal(err)
	}
	for warmed := false; !warmed; {
		select {
		case w := <-writes:
			warmed = len(w.seqs) == 1 && w.seqs[0] == 1000
			if !warmed {
				t.Fatalf("first device write %v, want the one packet 1000", w.seqs)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("the first packet never reached the device")
		}
	}
	var up [][]byte
	for i := range 40 {
		up = append(up, testnet.ICMPEcho(8, a.Pushed().Local.Addr(), srv, 3, uint16(i), make([]byte, 1000)))
	}
	if err := a.WritePackets(up); err != nil {
		t.Fatal(err)
	}
	next, nwrites := 0, 0
	for next < len(up) {
		select {
		case w := <-writes:
			nwrites++
			if w.offset != tun.Offset {
				t.Fatalf("write with offset %d, want %d", w.offset, tun.Offset)
			}
			if !w.inline {
				t.Fatalf("a device write of %d packets came from another goroutine than %s", len(w.seqs), reader)
			}
			for _, seq := range w.seqs {
				if seq != uint16(next) {
					t.Fatalf("packet %d arrived as number %d", seq, next)
				}
				next++
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("%d of %d packets reached the device", next, len(up))
		}
	}
	t.Logf("%d packets in %d device writes", next, nwrites)
	if s.rx.Len() != 0 || s.Stats().RxFull.Load() != 0 {
		t.Fatalf("%d packets went to the rx queue", s.rx.Len())
	}
	s.Close()
	if err := <-attached; err != nil {
		t.Fatalf("AttachTUN after Close: %v", err)
	}
	if s.tun.Load() != nil {
		t.Fatal("the device is still attached after AttachTUN returned")
	}
}

// readPacketWithin reads one packet from c into buf, waiting at most d:
// false when none came in time; a failed read gives a nil packet, for the
// caller's check of its contents to refuse.
func readPacketWithin(c *client.Session, buf []byte, d time.Duration) ([]byte, bool) {
	got := make(chan []byte, 1)
	go func() {
		n, err := c.ReadPacket(buf)
		if err != nil {
			got <- nil
			return
		}
		got <- buf[:n]
	}()
	select {
	case p := <-got:
		return p, true
	case <-time.After(d):
		return nil, false
	}
}
