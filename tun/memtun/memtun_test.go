package memtun

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/wirelane/wirelane/tun"
)

func TestReadBatchesInjectedPackets(t *testing.T) {
	d := New("mem0", 0)
	defer d.Close()
	if ev := <-d.Events(); ev != tun.EventUp {
		t.Fatalf("first event %v, want EventUp", ev)
	}
	for i := 0; i < 3; i++ {
		if err := d.Inject([]byte{byte(i), 1, 2}); err != nil {
			t.Fatal(err)
		}
	}
	bufs := make([][]byte, 8)
	for i := range bufs {
		bufs[i] = make([]byte, 64)
	}
	sizes := make([]int, 8)
	n, err := d.Read(bufs, sizes, 16)
	if err != nil || n != 3 {
		t.Fatalf("Read = %d, %v; want 3 packets", n, err)
	}
	for i := 0; i < n; i++ {
		if sizes[i] != 3 || bufs[i][16] != byte(i) {
			t.Errorf("packet %d: size %d first byte %d", i, sizes[i], bufs[i][16])
		}
	}
}

func TestWriteCopiesAndHook(t *testing.T) {
	d := New("mem0", 1280)
	defer d.Close()
	buf := []byte{9, 9, 1, 2, 3}
	if _, err := d.Write([][]byte{buf}, 2); err != nil {
		t.Fatal(err)
	}
	buf[2] = 7
	if got := <-d.Outbound(); !bytes.Equal(got, []byte{1, 2, 3}) {
		t.Fatalf("outbound %v, want [1 2 3] (a copy)", got)
	}
	var seen int
	d.SetWriteHook(func(p [][]byte, off int) { seen += len(p) })
	d.Write([][]byte{buf, buf}, 2)
	if seen != 2 {
		t.Fatalf("hook saw %d packets, want 2", seen)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	d := New("mem0", 0)
	done := make(chan error)
	go func() {
		_, err := d.Read([][]byte{make([]byte, 10)}, []int{0}, 0)
		done <- err
	}()
	d.Close()
	d.Close()
	if err := <-done; !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
	if err := d.Inject([]byte{1}); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Inject after Close: %v", err)
	}
	d.SetMTU(1000) // must not panic on a closed device
}
