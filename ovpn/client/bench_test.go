package client

import (
	"bytes"
	"net/netip"
	"sync"
	"testing"

	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/internal/pktqueue"
)

// discard is a transport that drops what it is given, keeping a copy of
// batched packets when keep is set.
type discard struct {
	n       int
	batches int
	keep    bool
	kept    [][]byte
}

func (d *discard) send(buf []byte, off, n int) error { d.n += n; return nil }
func (d *discard) sendBatch(pkts [][]byte) error {
	d.batches++
	for _, p := range pkts {
		d.n += len(p) - sendHeadroom
		if d.keep {
			d.kept = append(d.kept, append([]byte(nil), p[sendHeadroom:]...))
		}
	}
	return nil
}
func (d *discard) remote() netip.AddrPort                              { return netip.MustParseAddrPort("192.0.2.1:1194") }
func (d *discard) serve(*sync.WaitGroup, func() *rxBatch, func(error)) {}
func (d *discard) close() error                                        { return nil }
func (d *discard) name() string                                        { return "UDPv4" }

func benchSession(tb testing.TB) (*Session, *discard) {
	d := &discard{}
	s := &Session{tr: d, closed: make(chan struct{})}
	s.txPool.New = func() any { b := make([]byte, sendHeadroom+data.Headroom+maxPkt+data.Tailroom); return &b }
	s.batches.New = func() any { return new(txBatch) }
	k, err := data.NewKey(0, data.AES256GCM, bytes.Repeat([]byte{1}, 32), [8]byte{}, bytes.Repeat([]byte{2}, 32), [8]byte{})
	if err != nil {
		tb.Fatal(err)
	}
	ch := data.NewChannel(0)
	ch.Install(k)
	s.data.Store(ch)
	return s, d
}

func TestWritePacketFraming(t *testing.T) {
	s, d := benchSession(t)
	if err := s.WritePacket(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	if d.n != 4+4+16+100 {
		t.Fatalf("sent %d bytes, want a DATA_V2 packet of %d", d.n, 124)
	}
	if a := testing.AllocsPerRun(100, func() { s.WritePacket(make([]byte, 1400)[:1400]) }); a > 1 {
		t.Fatalf("%v allocations per WritePacket", a) // the 1 is the test's own make
	}
}

func BenchmarkWritePacket1400(b *testing.B) {
	s, _ := benchSession(b)
	p := make([]byte, 1400)
	b.SetBytes(1400)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.WritePacket(p); err != nil {
			b.Fatal(err)
		}
	}
}

// WritePackets hands whole batches to the transport, and each packet in
// them decrypts (on a channel with the mirrored key) to what was written.
func TestWritePacketsBatch(t *testing.T) {
	s, d := benchSession(t)
	d.keep = true
	var pkts [][]byte
	for i := range 70 { // more than one batch
		p := bytes.Repeat([]byte{byte(i)}, 60+i*17)
		pkts = append(pkts, p)
	}
	if err := s.WritePackets(pkts); err != nil {
		t.Fatal(err)
	}
	if d.batches != 2 || len(d.kept) != 70 {
		t.Fatalf("%d batches with %d packets, want 2 with 70", d.batches, len(d.kept))
	}
	k, err := data.NewKey(0, data.AES256GCM, bytes.Repeat([]byte{2}, 32), [8]byte{}, bytes.Repeat([]byte{1}, 32), [8]byte{})
	if err != nil {
		t.Fatal(err)
	}
	peer := data.NewChannel(0)
	peer.Install(k)
	for i, c := range d.kept {
		buf := make([]byte, len(c), len(c)+data.Tailroom)
		copy(buf, c)
		got, _, err := peer.Decrypt(buf)
		if err != nil || !bytes.Equal(got, pkts[i]) {
			t.Fatalf("packet %d: %v, payload equal %v", i, err, bytes.Equal(got, pkts[i]))
		}
	}
	if st := s.Stats(); st.TxBytes == 0 {
		t.Fatal("TxBytes not counted")
	}
	d.keep = false
	batch := pkts[:32]
	// sync.Pool drops items on purpose under the race detector.
	if a := testing.AllocsPerRun(50, func() { s.WritePackets(batch) }); a > 0 && !raceEnabled {
		t.Fatalf("%v allocations per WritePackets", a)
	}
	if err := s.WritePackets([][]byte{make([]byte, 10), make([]byte, maxPkt)}); err == nil {
		t.Fatal("an oversized packet was accepted")
	}
}

// ReadPackets returns what is queued without waiting for more.
func TestReadPacketsDrainsQueue(t *testing.T) {
	s := &Session{rx: pktqueue.New(4, 64), closed: make(chan struct{})}
	for i := range 3 {
		s.rx.Put([]byte{byte(i), 1, 2})
	}
	bufs := [][]byte{make([]byte, 20), make([]byte, 20), make([]byte, 20), make([]byte, 20)}
	sizes := make([]int, 4)
	n, err := s.ReadPackets(bufs, sizes, 16)
	if err != nil || n != 3 || sizes[2] != 3 || bufs[2][16] != 2 {
		t.Fatalf("ReadPackets = %d, %v (sizes %v)", n, err, sizes)
	}
	if s.rx.Len() != 0 {
		t.Fatalf("%d packets left queued", s.rx.Len())
	}
}

func BenchmarkWritePackets32x1400(b *testing.B) {
	s, _ := benchSession(b)
	pkts := make([][]byte, 32)
	for i := range pkts {
		pkts[i] = make([]byte, 1400)
	}
	b.SetBytes(32 * 1400)
	b.ReportAllocs()
	for b.Loop() {
		if err := s.WritePackets(pkts); err != nil {
			b.Fatal(err)
		}
	}
}
