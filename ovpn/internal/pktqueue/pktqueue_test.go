package pktqueue

import (
	"bytes"
	"testing"
	"time"
)

func TestPutReadBatchAndDrop(t *testing.T) {
	q := New(3, 8)
	done := make(chan struct{})
	for i := range 3 {
		if !q.Put(bytes.Repeat([]byte{byte(i)}, 4+i*4)) { // the third outgrows its buffer
			t.Fatalf("Put %d refused", i)
		}
	}
	if q.Put([]byte{9}) {
		t.Fatal("Put accepted a packet with every buffer in use")
	}
	bufs := [][]byte{make([]byte, 20), make([]byte, 20)}
	sizes := make([]int, 2)
	n, ok := q.ReadBatch(bufs, sizes, 4, done)
	if !ok || n != 2 || sizes[0] != 4 || sizes[1] != 8 || bufs[1][4] != 1 {
		t.Fatalf("ReadBatch = %d %v sizes %v", n, ok, sizes)
	}
	b := make([]byte, 20)
	if n, ok := q.Read(b, done); !ok || n != 12 || b[0] != 2 {
		t.Fatalf("Read = %d %v", n, ok)
	}
	for range 3 { // every buffer is back, cut to its size
		if fb := <-q.free; len(fb.b) != 8 {
			t.Fatalf("recycled buffer of %d bytes", len(fb.b))
		}
	}
}

func TestReadEndsWhenDone(t *testing.T) {
	q := New(1, 8)
	done := make(chan struct{})
	go func() { time.Sleep(10 * time.Millisecond); close(done) }()
	if _, ok := q.Read(make([]byte, 8), done); ok {
		t.Fatal("Read returned a packet from an empty queue")
	}
	if _, ok := q.ReadBatch([][]byte{make([]byte, 8)}, []int{0}, 0, done); ok {
		t.Fatal("ReadBatch returned a packet from an empty queue")
	}
}

func BenchmarkPutRead1400(b *testing.B) {
	q := New(16, 2048)
	p := make([]byte, 1400)
	dst := make([]byte, 2048)
	done := make(chan struct{})
	b.SetBytes(1400)
	b.ReportAllocs()
	for b.Loop() {
		q.Put(p)
		q.Read(dst, done)
	}
}
