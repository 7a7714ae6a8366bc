//go:build linux

package tun

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"

	wgtun "golang.zx2c4.com/wireguard/tun"
)

// fakeReads is a wgtun.Device whose Reads return prepared batches, each
// packet a few bytes whose first byte numbers it.
type fakeReads struct {
	wgtun.Device
	batches [][]int // packet lengths per Read; packet numbers run on
	num     byte
}

func (f *fakeReads) BatchSize() int { return 8 }
func (f *fakeReads) File() *os.File { return nil }

func (f *fakeReads) Read(bufs [][]byte, sizes []int, offset int) (int, error) {
	if len(f.batches) == 0 {
		return 0, errors.New("no more")
	}
	b := f.batches[0]
	f.batches = f.batches[1:]
	for i, l := range b {
		if offset+l > len(bufs[i]) {
			return i, io.ErrShortBuffer
		}
		bufs[i][offset] = f.num
		f.num++
		sizes[i] = l
	}
	return len(b), nil
}

// gatherAll reads from g until want packets came, with nb buffers of size
// bufSize (the first 64 KiB, as the engine's), and returns the numbers in
// order and the packets per Read.
func gatherAll(t *testing.T, g *gatherer, d *fakeReads, nb, bufSize, want int) (nums []byte, perRead []int) {
	t.Helper()
	bufs := make([][]byte, nb)
	bufs[0] = make([]byte, 16+1<<16)
	for i := 1; i < nb; i++ {
		bufs[i] = make([]byte, bufSize)
	}
	sizes := make([]int, nb)
	for len(nums) < want {
		n, err := g.read(d, bufs, sizes, 16)
		if err != nil && !errors.Is(err, io.ErrShortBuffer) {
			t.Fatalf("read after %d packets: %v", len(nums), err)
		}
		for i := 0; i < n; i++ {
			nums = append(nums, bufs[i][16])
		}
		perRead = append(perRead, n)
	}
	return nums, perRead
}

// Single packets are gathered while more wait; a train that does not fit
// the caller's buffers is handed out over the next Reads, in order.
func TestGathererOrderAndLeftovers(t *testing.T) {
	d := &fakeReads{batches: [][]int{{100}, {100}, {100}, {100, 100, 100, 100, 100}, {100}}}
	waiting := 4 // Reads after the first that find a packet
	g := &gatherer{more: func() bool { waiting--; return waiting >= 0 }}
	nums, perRead := gatherAll(t, g, d, 4, 1500, 9)
	for i, n := range nums {
		if n != byte(i) {
			t.Fatalf("packets came as %v, want in order", nums)
		}
	}
	// First Read: 1 + 1 + 1 + the first of the train (bufs full); then
	// the train's 4 left; then the last single packet.
	if len(perRead) != 3 || perRead[0] != 4 || perRead[1] != 4 || perRead[2] != 1 {
		t.Fatalf("packets per Read %v, want [4 4 1]", perRead)
	}
}

// A waiting packet too big for the caller's buffers but the first (the
// MTU grew) goes to the first of the next Read; one too big for that too
// is dropped with an error, not returned forever.
func TestGathererOversizedLeftover(t *testing.T) {
	d := &fakeReads{batches: [][]int{{100}, {3000}, {100}}}
	waiting := 1
	g := &gatherer{more: func() bool { waiting--; return waiting >= 0 }}
	nums, perRead := gatherAll(t, g, d, 4, 1500, 3)
	if string(nums) != "\x00\x01\x02" || len(perRead) != 3 {
		t.Fatalf("numbers %v per Read %v, want 0 | 1 (in the 64 KiB buffer) | 2", nums, perRead)
	}

	d = &fakeReads{batches: [][]int{{100}, {3000}, {100}}}
	waiting = 1
	g = &gatherer{more: func() bool { waiting--; return waiting >= 0 }}
	bufs := [][]byte{make([]byte, 16+1500), make([]byte, 16+1500)}
	sizes := make([]int, 2)
	if n, err := g.read(d, bufs, sizes, 16); n != 1 || err != nil {
		t.Fatalf("first Read: %d, %v", n, err)
	}
	if n, err := g.read(d, bufs, sizes, 16); n != 0 || !errors.Is(err, io.ErrShortBuffer) {
		t.Fatalf("Read of a packet that fits nowhere: %d, %v; want 0, ErrShortBuffer", n, err)
	}
	if n, err := g.read(d, bufs, sizes, 16); n != 1 || err != nil || bufs[0][16] != 2 {
		t.Fatalf("Read after the dropped packet: %d, %v, packet %d", n, err, bufs[0][16])
	}
}

// On a real TUN device: datagrams written one by one come out of one
// Read, in order.
func TestReadGathersSinglePackets(t *testing.T) {
	d, name := newTestTUN(t, "wlg", 1400)
	local, peer := bringUp(t, name)
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: local.AsSlice()}, &net.UDPAddr{IP: peer.AsSlice(), Port: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 40
	for i := 0; i < n; i++ {
		if _, err := c.Write([]byte{byte(i), 'w', 'l'}); err != nil {
			t.Fatal(err)
		}
	}
	bufs := make([][]byte, d.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, 16+1500)
	}
	bufs[0] = make([]byte, 16+1<<16)
	sizes := make([]int, len(bufs))
	var got []byte
	most := 0
	for len(got) < n {
		k, err := d.Read(bufs, sizes, 16)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		ours := 0
		for i := 0; i < k; i++ {
			p := bufs[i][16 : 16+sizes[i]]
			if len(p) == 20+8+3 && p[9] == 17 && binary.BigEndian.Uint16(p[22:24]) == 9 {
				got = append(got, p[28])
				ours++
			}
		}
		most = max(most, ours)
	}
	for i, b := range got {
		if b != byte(i) {
			t.Fatalf("datagrams came as %v, want in order", got)
		}
	}
	if most < n/2 {
		t.Fatalf("at most %d of %d waiting datagrams in one Read", most, n)
	}

	// Gathering allocates nothing: the batch is read by the caller, the
	// poll goes through a closure made once.
	allocs := testing.AllocsPerRun(20, func() {
		g := d.(*nsDevice).gather
		for i := 0; i < 4; i++ {
			g.more() // poll, as a gathering Read does
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per poll", allocs)
	}
}

// A caller whose buffers are all large (it reads anything anywhere) is
// not gathered for: the spares would cost megabytes.
func TestGathererSkipsLargeBufferCallers(t *testing.T) {
	d := &fakeReads{batches: [][]int{{100}, {100}}}
	g := &gatherer{more: func() bool { return true }}
	_, perRead := gatherAll(t, g, d, 4, 16+1<<16, 2)
	if len(perRead) != 2 || perRead[0] != 1 {
		t.Fatalf("packets per Read %v, want [1 1]", perRead)
	}
	if g.spare != nil {
		t.Fatalf("spare buffers allocated: %d", len(g.spare))
	}
}
