package tun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
)

// stepDevice is a Device whose Reads run scripted steps and whose Writes
// are recorded. file makes it look like a kernel device (File not nil).
type stepDevice struct {
	Device // unused methods
	mtu    int
	batch  int
	file   *os.File
	steps  []func(bufs [][]byte, sizes []int) (int, error)
	writes [][][]byte // per Write: the buffers as given
	count  bool       // only count Writes (in nwrites), keeping nothing
	nwrite int
}

func (d *stepDevice) BatchSize() int    { return d.batch }
func (d *stepDevice) MTU() (int, error) { return d.mtu, nil }
func (d *stepDevice) File() *os.File    { return d.file }
func (d *stepDevice) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if offset != Offset {
		panic(fmt.Sprintf("read at offset %d", offset))
	}
	step := d.steps[0]
	d.steps = d.steps[1:]
	return step(bufs, sizes)
}
func (d *stepDevice) Write(bufs [][]byte, offset int) (int, error) {
	if d.count {
		d.nwrite++
		return len(bufs), nil
	}
	d.writes = append(d.writes, append([][]byte(nil), bufs...))
	return len(bufs), nil
}

// deliver puts packets of the given sizes into bufs.
func deliver(bufs [][]byte, sizes []int, n ...int) int {
	for i, l := range n {
		for j := range l {
			bufs[i][Offset+j] = byte(i)
		}
		sizes[i] = l
	}
	return len(n)
}

// The Reader's buffers: the first for any packet, the others for the MTU
// (at least 1500); after a dropped read they follow a raised MTU.
func TestReaderBuffersFollowTheMTU(t *testing.T) {
	d := &stepDevice{mtu: 1400, batch: 8}
	var lens []int
	d.steps = append(d.steps,
		func(bufs [][]byte, sizes []int) (int, error) {
			for _, b := range bufs {
				lens = append(lens, len(b))
			}
			d.mtu = 9000
			return 0, errors.New("tun: segment of 9040 bytes does not fit")
		},
		func(bufs [][]byte, sizes []int) (int, error) {
			if len(bufs[1]) != Offset+9000 || len(bufs[0]) != Offset+MaxPacket {
				t.Errorf("after the drop: buffers of %d and %d bytes", len(bufs[0]), len(bufs[1]))
			}
			return deliver(bufs, sizes, 9000), nil
		})
	r := NewReader(d, ReaderConfig{})
	if n, err := r.Read(); n != 0 || err != nil {
		t.Fatalf("dropped read: %d, %v", n, err)
	}
	if len(lens) != 8 || lens[0] != Offset+MaxPacket || lens[1] != Offset+1500 || lens[7] != Offset+1500 {
		t.Fatalf("buffer sizes %v", lens)
	}
	if n, err := r.Read(); n != 1 || err != nil || len(r.Packet(0)) != 9000 {
		t.Fatalf("read after the drop: %d, %v", n, err)
	}
}

// The ReadFatal rule: a read that dropped a packet is reported to Dropped
// and reading goes on; ErrTooManySegments delivers what fit; a fatal
// error ends the loop, after the packets that came with it.
func TestReaderReadFatalContinueRule(t *testing.T) {
	d := &stepDevice{mtu: 1500, batch: 4}
	fatal := os.NewSyscallError("read", syscall.EBADFD)
	d.steps = append(d.steps,
		func(bufs [][]byte, sizes []int) (int, error) { return 0, errors.New("one bad packet") },
		func(bufs [][]byte, sizes []int) (int, error) {
			return deliver(bufs, sizes, 100, 200), ErrTooManySegments
		},
		func(bufs [][]byte, sizes []int) (int, error) { return deliver(bufs, sizes, 300), fatal },
		func(bufs [][]byte, sizes []int) (int, error) { panic("read after a fatal error") },
	)
	var dropped []error
	r := NewReader(d, ReaderConfig{Dropped: func(err error) { dropped = append(dropped, err) }})
	if n, err := r.Read(); n != 0 || err != nil || len(dropped) != 1 {
		t.Fatalf("a dropped packet: %d, %v, %d drops reported", n, err, len(dropped))
	}
	if n, err := r.Read(); n != 2 || err != nil || len(r.Packet(1)) != 200 {
		t.Fatalf("too many segments: %d, %v", n, err)
	}
	if n, err := r.Read(); n != 1 || err != nil || len(r.Packet(0)) != 300 {
		t.Fatalf("packets with a fatal error: %d, %v", n, err)
	}
	if n, err := r.Read(); n != 0 || !errors.Is(err, syscall.EBADFD) {
		t.Fatalf("after them: %d, %v; want the fatal error", n, err)
	}
	for _, c := range []struct {
		err   error
		fatal bool
	}{
		{os.ErrClosed, true},
		{io.EOF, true},
		{&os.PathError{Op: "read", Path: "/dev/net/tun", Err: syscall.EIO}, true},
		{syscall.EBADF, true},
		{errors.New("packet too large for the buffer"), false},
		{ErrTooManySegments, false},
	} {
		if ReadFatal(c.err) != c.fatal {
			t.Errorf("ReadFatal(%v) = %v, want %v", c.err, !c.fatal, c.fatal)
		}
	}
}

// A Fatal of the caller's replaces ReadFatal; CallerBuffers leaves
// bufs[1:] to the caller.
func TestReaderCallerPolicyAndBuffers(t *testing.T) {
	errGone := errors.New("engine closed")
	d := &stepDevice{mtu: 1500, batch: 4}
	mine := make([]byte, Offset+777)
	d.steps = append(d.steps, func(bufs [][]byte, sizes []int) (int, error) {
		if &bufs[1][0] != &mine[0] {
			t.Error("the caller's buffer was not used")
		}
		return 0, errGone
	})
	r := NewReader(d, ReaderConfig{CallerBuffers: true, Fatal: func(err error) bool { return err == errGone }})
	if b := r.Buffers(); b[1] != nil || len(b[0]) != Offset+MaxPacket {
		t.Fatal("CallerBuffers: the reader allocated more than its first buffer")
	}
	r.Buffers()[1] = mine
	if _, err := r.Read(); err != errGone {
		t.Fatalf("the caller's fatal error: %v", err)
	}
}

// BatchWriter: packets copied behind the offset, one Write per batch; on
// a kernel device the predicted first packet of a TCP run gets head room
// (64 KiB) and the others stay in small buffers; on an in-memory device
// nothing is prepared.
func TestBatchWriterHeadRoom(t *testing.T) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	for _, kernel := range []bool{true, false} {
		d := &stepDevice{mtu: 1500, batch: MaxBatch}
		if kernel {
			d.file = devNull
		}
		w := NewBatchWriter(d, Offset, 0)
		for range 20 {
			if err := w.Add(tcpPacket(1000, 1380)); err != nil {
				t.Fatal(err)
			}
		}
		if w.Len() != 20 || len(d.writes) != 0 {
			t.Fatalf("%d packets waiting, %d writes before Flush", w.Len(), len(d.writes))
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if len(d.writes) != 1 || len(d.writes[0]) != 20 || w.Len() != 0 {
			t.Fatalf("kernel %v: %d writes", kernel, len(d.writes))
		}
		for i, b := range d.writes[0] {
			if len(b) != Offset+1420 {
				t.Fatalf("packet %d: %d bytes", i, len(b))
			}
			room := cap(b) >= headBufferSize(Offset)
			if want := kernel && i == 0; room != want {
				t.Fatalf("kernel %v: packet %d has head room %v, want %v", kernel, i, room, want)
			}
		}
	}
}

// A full batch is written before the next packet is added; the writer
// allocates nothing once its buffers have grown.
func TestBatchWriterFullBatchAndAllocs(t *testing.T) {
	d := &stepDevice{mtu: 1500, batch: 4}
	w := NewBatchWriter(d, Offset, 4)
	pkt := tcpPacket(1, 100)
	for range 9 {
		w.Add(pkt)
	}
	if len(d.writes) != 2 || len(d.writes[0]) != 4 || w.Len() != 1 {
		t.Fatalf("%d writes, %d waiting", len(d.writes), w.Len())
	}
	d.count = true
	if a := testing.AllocsPerRun(50, func() {
		w.Add(pkt)
		w.Add(pkt)
		w.Flush()
	}); a != 0 {
		t.Fatalf("%v allocations per batch", a)
	}
}

// BenchmarkBatchWriter measures one receive batch through the writer: 32
// TCP segments of 1380 bytes copied in, head room prepared (a kernel
// device), one Write.
func BenchmarkBatchWriter(b *testing.B) {
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		b.Fatal(err)
	}
	defer devNull.Close()
	d := &stepDevice{mtu: 1500, batch: MaxBatch, file: devNull, count: true}
	w := NewBatchWriter(d, Offset, 0)
	pkt := tcpPacket(1000, 1380)
	b.SetBytes(int64(32 * len(pkt)))
	b.ReportAllocs()
	for b.Loop() {
		for range 32 {
			w.Add(pkt)
		}
		w.Flush()
	}
}
