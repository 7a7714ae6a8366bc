package server

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/ovpn/client"
)

// WritePackets frames a run of packets to one TCP client into one writev:
// runs longer than a batch (70 > maxWriteBatch), runs cut by the other
// client and sizes that vary inside a run all arrive once, in order,
// intact, and TxBytes counts every payload byte.
func TestWritePacketsTCPRuns(t *testing.T) {
	f := newFixture(t)
	s := startServer(t, f.serverConfig(TCP), Options{})
	a := dialClient(t, f.clientConfig(t, s, "a", ""), client.Options{})
	b := dialClient(t, f.clientConfig(t, s, "b", ""), client.Options{})
	srv := s.TunnelAddress().Addr()
	var pkts [][]byte
	want := map[netip.Addr][][]byte{}
	for i := range 240 {
		c := a
		if i%80 >= 70 { // runs of 70 for a, then 10 for b
			c = b
		}
		dst := c.Pushed().Local.Addr()
		body := make([]byte, 100+i*53%1200)
		for j := range body {
			body[j] = byte(i + j)
		}
		p := testnet.ICMPEcho(0, srv, dst, 1, uint16(i), body)
		pkts = append(pkts, p)
		want[dst] = append(want[dst], p)
	}
	if err := s.WritePackets(pkts); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*client.Session{a, b} {
		dst := c.Pushed().Local.Addr()
		buf := make([]byte, 2048)
		for k, w := range want[dst] {
			p, ok := readPacketWithin(c, buf, 5*time.Second)
			if !ok {
				t.Fatalf("client %s: packet %d of %d never arrived", dst, k, len(want[dst]))
			}
			if string(p) != string(w) {
				t.Fatalf("client %s: packet %d is %d bytes, seq %d; want %d bytes, seq %d", dst, k,
					len(p), binary.BigEndian.Uint16(p[26:]), len(w), binary.BigEndian.Uint16(w[26:]))
			}
		}
	}
	var tx, sum uint64
	for _, c := range s.Clients() {
		tx += c.TxBytes
	}
	for _, p := range pkts {
		sum += uint64(len(p))
	}
	if tx != sum {
		t.Fatalf("TxBytes %d, want %d", tx, sum)
	}
}
