//go:build linux

package tun

import (
	"bytes"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
	wgtun "golang.zx2c4.com/wireguard/tun"
)

// On a real TUN device: a UDP send with segmentation offload reaches the
// device as one train, and one Read hands it out as valid datagrams, in
// order, without allocating.
func TestReadSplitsAUDPTrain(t *testing.T) {
	d, name := newTestTUN(t, "wlr", 1400)
	if d.(*nsDevice).reader.(*rawReader) == nil {
		t.Fatal("no raw reader on a device with offloads")
	}
	local, peer := bringUp(t, name)
	c, err := net.DialUDP("udp4", &net.UDPAddr{IP: local.AsSlice()}, &net.UDPAddr{IP: peer.AsSlice(), Port: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 1000) }); err != nil || serr != nil {
		t.Fatalf("UDP_SEGMENT: %v %v", err, serr)
	}
	payload := payloads(1, 4500)[0]

	bufs := make([][]byte, d.BatchSize())
	for i := range bufs {
		bufs[i] = make([]byte, testOffset+1500)
	}
	sizes := make([]int, len(bufs))
	// readTrain sends the payload and reads until its datagrams come (the
	// kernel may queue others first, such as IPv6 router solicitations,
	// which the same Read may gather); it returns the index in bufs of
	// the first and how many one Read gave.
	readTrain := func() (first, n int) {
		if _, err := c.Write(payload); err != nil {
			t.Fatal(err)
		}
		for {
			k, err := d.Read(bufs, sizes, testOffset)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			for i := range k {
				p := bufs[i][testOffset : testOffset+sizes[i]]
				if len(p) > 28 && p[0] == 0x45 && p[9] == 17 && p[22] == 0 && p[23] == 9 {
					if n == 0 {
						first = i
					}
					n++
				}
			}
			if n > 0 {
				return first, n
			}
		}
	}
	first, n := readTrain()
	if n != 5 {
		t.Fatalf("one Read gave %d datagrams, want 5", n)
	}
	var got []byte
	for i := first; i < first+5; i++ {
		got = append(got, checkUDP(t, bufs[i][testOffset:testOffset+sizes[i]])...)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("the datagrams do not carry the payload in order")
	}
	if allocs := testing.AllocsPerRun(10, func() { readTrain() }); allocs != 0 {
		t.Fatalf("%v allocations per send and Read", allocs)
	}
}

// A TUN device whose file is blocking gets none of the raw paths: a raw
// read on it would hold the thread (with one Go thread, the process) until
// a packet came. CreateTUNFromFile makes such a file non-blocking first
// (so the daemon's WG_TUN_FD gets the raw paths); a device made elsewhere
// keeps the tun package's own Read and Write.
func TestBlockingFileGetsNoRawPaths(t *testing.T) {
	needTUN(t)
	open := func() (*os.File, string) {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0) // blocking
		if err != nil {
			t.Fatal(err)
		}
		name := uniqueName("wlb")
		ifr, err := unix.NewIfreq(name)
		if err != nil {
			t.Fatal(err)
		}
		ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
		if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
			unix.Close(fd)
			t.Fatal(err)
		}
		return os.NewFile(uintptr(fd), "/dev/net/tun"), name
	}

	f, _ := open()
	d, err := wgtun.CreateTUNFromFile(f, 1400)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if r, w, g := newRawReader(d), newGROWriter(d), newGatherer(d); r != nil || w != nil || g != nil {
		t.Fatalf("blocking file: raw reader %v, raw writer %v, gatherer %v; want none", r != nil, w != nil, g != nil)
	}

	f2, _ := open()
	d2, err := CreateTUNFromFile(f2, 1400)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d2.Close() })
	n := d2.(*nsDevice)
	if _, raw := n.reader.(*rawReader); !raw || n.gro == nil || n.gather == nil {
		t.Fatalf("CreateTUNFromFile with a blocking file: raw reader %v, raw writer %v, gatherer %v; want all", raw, n.gro != nil, n.gather != nil)
	}
}
