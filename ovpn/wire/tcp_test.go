package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// frame returns pkt with its length prefix, as a TCP peer sends it.
func frame(pkt []byte) []byte {
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(pkt))), pkt...)
}

// withHeadroom returns pkt behind TCPPrefixLen free bytes.
func withHeadroom(pkt string) []byte { return append(make([]byte, TCPPrefixLen), pkt...) }

func TestTCPFramesRoundTrip(t *testing.T) {
	var stream bytes.Buffer
	w := NewTCPWriter(&stream)
	big := bytes.Repeat([]byte{0xa5}, MaxTCPPacket)
	if err := w.Write(append(make([]byte, TCPPrefixLen), big...), TCPPrefixLen, len(big)); err != nil {
		t.Fatal(err)
	}
	one := withHeadroom("abc")
	if err := w.Write(append(one, "trailing bytes are not sent"...), TCPPrefixLen, 3); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteBatch([][]byte{withHeadroom("de"), withHeadroom("f"), withHeadroom("ghij")}); err != nil {
		t.Fatal(err)
	}
	r := NewTCPReader(&stream, 16, MaxTCPPacket, 16)
	for _, want := range [][]byte{big, []byte("abc"), []byte("de"), []byte("f"), []byte("ghij")} {
		got, err := r.Next()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("got %d bytes (%v), want %d", len(got), err, len(want))
		}
		if cap(got)-len(got) < 16 {
			t.Fatalf("packet of %d bytes has %d bytes of tailroom, want 16", len(got), cap(got)-len(got))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

func TestTCPReaderShortReads(t *testing.T) {
	stream := append(frame([]byte("hello")), frame([]byte("world!"))...)
	r := NewTCPReader(iotest.OneByteReader(bytes.NewReader(stream)), 16, 100, 0)
	for _, want := range []string{"hello", "world!"} {
		got, err := r.Next()
		if err != nil || string(got) != want {
			t.Fatalf("got %q (%v), want %q", got, err, want)
		}
	}
	for _, cut := range []int{1, 2, 4} {
		r := NewTCPReader(bytes.NewReader(stream[:cut]), 16, 100, 0)
		if _, err := r.Next(); err != io.ErrUnexpectedEOF {
			t.Errorf("stream cut after %d bytes: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
}

func TestTCPReaderReady(t *testing.T) {
	stream := append(frame([]byte("abc")), frame([]byte("defgh"))[:4]...)
	r := NewTCPReader(bytes.NewReader(stream), 64, 100, 0)
	if r.Ready() {
		t.Fatal("ready before anything was read")
	}
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	if r.Ready() {
		t.Fatal("ready with half a frame buffered")
	}
}

func TestTCPFramesBadLengthsRejected(t *testing.T) {
	if _, err := NewTCPReader(bytes.NewReader([]byte{0, 0}), 16, 100, 0).Next(); !errors.Is(err, ErrBadLength) {
		t.Errorf("zero-length frame: %v", err)
	}
	over := frame(make([]byte, 101))
	if _, err := NewTCPReader(bytes.NewReader(over), 16, 100, 0).Next(); !errors.Is(err, ErrBadLength) {
		t.Errorf("frame above the reader's maximum: %v", err)
	}
	var sink bytes.Buffer
	w := NewTCPWriter(&sink)
	huge := make([]byte, TCPPrefixLen+MaxTCPPacket+1)
	if err := w.Write(huge, TCPPrefixLen, MaxTCPPacket+1); !errors.Is(err, ErrBadLength) {
		t.Errorf("oversized packet: %v", err)
	}
	if err := w.Write(withHeadroom("x"), 1, 1); !errors.Is(err, ErrBadLength) {
		t.Errorf("buffer without headroom: %v", err)
	}
	if err := w.Write(withHeadroom("x"), TCPPrefixLen, 5); !errors.Is(err, ErrBadLength) {
		t.Errorf("packet past the buffer: %v", err)
	}
	if err := w.WriteBatch([][]byte{withHeadroom("ok"), huge}); !errors.Is(err, ErrBadLength) {
		t.Errorf("batch with an oversized packet: %v", err)
	}
	if err := w.WriteBatch([][]byte{withHeadroom("")}); !errors.Is(err, ErrBadLength) {
		t.Errorf("batch with an empty packet: %v", err)
	}
	if sink.Len() != 0 {
		t.Errorf("rejected writes sent %d bytes", sink.Len())
	}
}

// TestTCPFramesDoNotAllocate holds the framer to the data-path rule: no
// allocation per packet, reading or writing.
func TestTCPFramesDoNotAllocate(t *testing.T) {
	one := frame([]byte("packet"))
	stream := bytes.Repeat(one, 200)
	src := bytes.NewReader(stream)
	r := NewTCPReader(src, 4096, 1500, 16)
	if n := testing.AllocsPerRun(100, func() {
		if src.Len() == 0 {
			src.Reset(stream)
		}
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("TCPReader.Next: %v allocations per packet", n)
	}
	w := NewTCPWriter(io.Discard)
	buf := withHeadroom("packet")
	if n := testing.AllocsPerRun(100, func() {
		if err := w.Write(buf, TCPPrefixLen, 6); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("TCPWriter.Write: %v allocations per packet", n)
	}
	batch := make([][]byte, 4)
	if n := testing.AllocsPerRun(100, func() {
		for i := range batch {
			batch[i] = buf
		}
		if err := w.WriteBatch(batch); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("TCPWriter.WriteBatch: %v allocations per batch", n)
	}
}

func FuzzTCPReader(f *testing.F) {
	f.Add([]byte{0, 3, 'a', 'b', 'c', 0, 1})
	f.Add([]byte{0, 0})
	f.Add([]byte{0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewTCPReader(bytes.NewReader(b), 16, 1500, 8)
		used := 0
		for {
			ready := r.Ready()
			pkt, err := r.Next()
			if err != nil {
				if ready && !errors.Is(err, ErrBadLength) {
					t.Fatalf("Ready, then %v", err)
				}
				return
			}
			if len(pkt) == 0 || len(pkt) > 1500 || cap(pkt)-len(pkt) < 8 {
				t.Fatalf("packet of %d bytes, capacity %d", len(pkt), cap(pkt))
			}
			if !bytes.Equal(pkt, b[used+TCPPrefixLen:used+TCPPrefixLen+len(pkt)]) {
				t.Fatal("packet differs from the stream")
			}
			used += TCPPrefixLen + len(pkt)
			_, _, _, _, _ = DecodeDataHeader(pkt)
		}
	})
}

// vecWriter is a BuffersWriter that records how it was called.
type vecWriter struct {
	bytes.Buffer
	vectors int // WriteBuffers calls
}

func (v *vecWriter) WriteBuffers(bufs [][]byte) (int64, error) {
	v.vectors++
	var n int64
	for _, b := range bufs {
		m, _ := v.Buffer.Write(b)
		n += int64(m)
	}
	return n, nil
}

func TestTCPWriterBatchUsesWriteBuffers(t *testing.T) {
	var v vecWriter
	w := NewTCPWriter(&v)
	pkts := [][]byte{append(make([]byte, TCPPrefixLen), "one"...), append(make([]byte, TCPPrefixLen), "three"...)}
	if err := w.WriteBatch(pkts); err != nil {
		t.Fatal(err)
	}
	if v.vectors != 1 {
		t.Fatalf("WriteBuffers called %d times for one batch, want 1", v.vectors)
	}
	want := []byte("\x00\x03one\x00\x05three")
	if !bytes.Equal(v.Bytes(), want) {
		t.Fatalf("stream %q, want %q", v.Bytes(), want)
	}
}
