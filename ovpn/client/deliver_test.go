package client

import (
	"bytes"
	"testing"

	"github.com/wirelane/wirelane/internal/sys/mono"
	"github.com/wirelane/wirelane/ovpn/data"
	"github.com/wirelane/wirelane/ovpn/internal/pktqueue"
)

// recorder is a PacketWriter keeping a copy of every batch.
type recorder struct {
	batches [][][]byte
	offsets []int
}

func (r *recorder) Write(bufs [][]byte, offset int) (int, error) {
	var b [][]byte
	for _, p := range bufs {
		// Room to coalesce into is tun.BatchWriter's (its tests), and only
		// for kernel devices.
		b = append(b, append([]byte(nil), p[offset:]...))
	}
	r.batches = append(r.batches, b)
	r.offsets = append(r.offsets, offset)
	return len(bufs), nil
}

// serverSide returns a data channel that encrypts what benchSession's
// session decrypts.
func serverSide(tb testing.TB) *data.Channel {
	k, err := data.NewKey(0, data.AES256GCM, bytes.Repeat([]byte{2}, 32), [8]byte{}, bytes.Repeat([]byte{1}, 32), [8]byte{})
	if err != nil {
		tb.Fatal(err)
	}
	ch := data.NewChannel(0)
	ch.Install(k)
	return ch
}

// seal encrypts p as the server would, into a buffer with tailroom.
func seal(tb testing.TB, ch *data.Channel, p []byte) []byte {
	buf := make([]byte, data.Headroom+len(p)+data.Tailroom)
	enc, err := ch.EncryptPayload(buf, p)
	if err != nil {
		tb.Fatal(err)
	}
	return enc
}

// Without DeliverTo received packets are queued for ReadPacket(s); with
// it, a receive batch reaches the writer in one Write, in order, behind
// the asked-for headroom, and nothing is queued.
func TestDeliverTo(t *testing.T) {
	s, _ := benchSession(t)
	s.rx = pktqueue.New(8, 2048)
	srv := serverSide(t)
	rb := s.newRxBatch()
	rb.handle(seal(t, srv, []byte("queued")))
	rb.flush()
	got := make([]byte, 64)
	if n, err := s.ReadPacket(got); err != nil || string(got[:n]) != "queued" {
		t.Fatalf("ReadPacket = %q, %v", got[:n], err)
	}

	w := &recorder{}
	s.DeliverTo(w, 16)
	var want [][]byte
	for i := range 200 { // more than one Write's worth
		p := bytes.Repeat([]byte{byte(i)}, 40+i)
		want = append(want, p)
		rb.handle(seal(t, srv, p))
	}
	rb.flush()
	rb.flush() // nothing left: no empty Write
	if len(w.batches) != 2 || len(w.batches[0]) != deliverBatch || len(w.batches[1]) != 200-deliverBatch {
		t.Fatalf("%d writes", len(w.batches))
	}
	var all [][]byte
	for i, b := range w.batches {
		if w.offsets[i] != 16 {
			t.Fatalf("write %d with offset %d", i, w.offsets[i])
		}
		all = append(all, b...)
	}
	for i := range want {
		if !bytes.Equal(all[i], want[i]) {
			t.Fatalf("packet %d: %x, want %x", i, all[i], want[i])
		}
	}
	if s.rx.Len() != 0 {
		t.Fatalf("%d packets queued while a writer is attached", s.rx.Len())
	}
	if st := s.Stats(); st.RxBytes == 0 {
		t.Fatal("RxBytes not counted")
	}
}

// A warm receive path allocates nothing per packet or per Write.
func TestDeliverToAllocations(t *testing.T) {
	s, _ := benchSession(t)
	s.rx = pktqueue.New(8, 2048)
	srv := serverSide(t)
	s.DeliverTo(PacketWriterFunc(func([][]byte, int) (int, error) { return 0, nil }), 16)
	rb := s.newRxBatch()
	pkts := make([][]byte, 32*30) // distinct packet ids: no replays
	for i := range pkts {
		pkts[i] = seal(t, srv, make([]byte, 1400))
	}
	work := make([]byte, 0, 1500+data.Tailroom)
	i := 0
	step := func() {
		for range 32 {
			p := append(work[:0], pkts[i]...)
			i++
			rb.handle(p)
		}
		rb.flush()
	}
	step()
	if a := testing.AllocsPerRun(20, step); a > 0 {
		t.Fatalf("%v allocations per receive batch", a)
	}
	if st := s.Stats(); st.RxBytes != uint64(i*1400) {
		t.Fatalf("RxBytes %d after %d packets: some were dropped", st.RxBytes, i)
	}
}

// PacketWriterFunc adapts a function to PacketWriter (tests only).
type PacketWriterFunc func(bufs [][]byte, offset int) (int, error)

func (f PacketWriterFunc) Write(bufs [][]byte, offset int) (int, error) { return f(bufs, offset) }

// A receive batch of 32 packets of 1400 bytes to a writer, including the
// server side's encryption of each (packet ids must not repeat).
func BenchmarkDeliver32x1400(b *testing.B) {
	s, _ := benchSession(b)
	s.rx = pktqueue.New(8, 2048)
	srv := serverSide(b)
	s.DeliverTo(PacketWriterFunc(func(bufs [][]byte, _ int) (int, error) { return len(bufs), nil }), 16)
	rb := s.newRxBatch()
	p := make([]byte, 1400)
	work := make([]byte, data.Headroom+1400+data.Tailroom)
	b.SetBytes(32 * 1400)
	b.ReportAllocs()
	for b.Loop() {
		for range 32 {
			enc, err := srv.EncryptPayload(work, p)
			if err != nil {
				b.Fatal(err)
			}
			rb.handle(enc)
		}
		rb.flush()
	}
}

// The receive time the keepalive timers read (lastRecv) is taken once per
// receive batch, at its flush, and only when the batch held a packet that
// authenticated: a forged packet leaves it alone.
func TestReceiveTimePerBatch(t *testing.T) {
	s, _ := benchSession(t)
	s.rx = pktqueue.New(8, 2048)
	srv := serverSide(t)
	rb := s.newRxBatch()

	forged := seal(t, srv, []byte("forged"))
	forged[len(forged)-1] ^= 1
	rb.handle(forged)
	rb.flush()
	if got := s.lastRecv.Load(); got != 0 {
		t.Fatalf("lastRecv = %d after a forged packet, want 0", got)
	}

	before := mono.Now()
	for range 3 {
		rb.handle(seal(t, srv, []byte("data")))
	}
	rb.flush()
	got := s.lastRecv.Load()
	if got < before {
		t.Fatalf("lastRecv = %d after a batch of authenticated packets, want >= %d", got, before)
	}
	rb.flush() // nothing received since: the time stays
	if s.lastRecv.Load() != got {
		t.Fatal("an empty flush moved lastRecv")
	}
}
