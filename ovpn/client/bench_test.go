package client

import (
	"bytes"
	"sync"
	"testing"

	"github.com/wirelane/wirelane/ovpn/data"
)

// discard is a transport that drops what it is given.
type discard struct{ n int }

func (d *discard) send(buf []byte, off, n int) error                { d.n += n; return nil }
func (d *discard) serve(*sync.WaitGroup, func([]byte), func(error)) {}
func (d *discard) close() error                                     { return nil }
func (d *discard) name() string                                     { return "UDPv4" }

func benchSession(tb testing.TB) (*Session, *discard) {
	d := &discard{}
	s := &Session{tr: d, closed: make(chan struct{})}
	s.txPool.New = func() any { b := make([]byte, sendHeadroom+data.Headroom+maxPkt+data.Tailroom); return &b }
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
