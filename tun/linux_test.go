//go:build linux

package tun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

func needTUN(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (CAP_NET_ADMIN) to create TUN interfaces")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
}

// newTestTUN creates a TUN interface named after prefix with the given
// MTU, closed when the test ends; it skips the test without root or
// /dev/net/tun.
func newTestTUN(t *testing.T, prefix string, mtu int) (Device, string) {
	t.Helper()
	needTUN(t)
	name := uniqueName(prefix)
	d, err := CreateTUN(name, mtu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, name
}

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s%d%04x", prefix, os.Getpid()%1000, rand.Uint32()&0xffff)
}

func TestCreateTUNRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		mtu  int
		want string
	}{
		{"", 1420, "name must be"},
		{strings.Repeat("x", 16), 1420, "name must be"},
		{"wlbad0", 0, "MTU 0 out of range"},
		{"wlbad0", 70000, "MTU 70000 out of range"},
	} {
		_, err := CreateTUN(tc.name, tc.mtu)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CreateTUN(%q, %d) = %v, want error containing %q", tc.name, tc.mtu, err, tc.want)
		}
	}
	if _, err := CreateTUNFromFile(nil, 1420); err == nil {
		t.Error("CreateTUNFromFile(nil) succeeded")
	}
}

// bringUp gives the interface a /30 and sets it up, returning the local and
// the peer address of the subnet.
func bringUp(t *testing.T, name string) (local, peer netip.Addr) {
	t.Helper()
	link, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	b := byte(rand.IntN(64) * 4)
	local = netip.AddrFrom4([4]byte{10, 213, byte(rand.IntN(256)), b + 1})
	peer = netip.AddrFrom4([4]byte{10, 213, local.As4()[2], b + 2})
	addr, _ := netlink.ParseAddr(local.String() + "/30")
	if err := netlink.AddrAdd(link, addr); err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		t.Fatal(err)
	}
	return local, peer
}

// echoRequest builds an IPv4 ICMP echo request from src to dst.
func echoRequest(src, dst netip.Addr, id uint16) []byte {
	p := make([]byte, 20+8+16)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	p[8] = 64
	p[9] = unix.IPPROTO_ICMP
	s, d := src.As4(), dst.As4()
	copy(p[12:], s[:])
	copy(p[16:], d[:])
	binary.BigEndian.PutUint16(p[10:], checksum(p[:20]))
	icmp := p[20:]
	icmp[0] = 8 // echo request
	binary.BigEndian.PutUint16(icmp[4:], id)
	binary.BigEndian.PutUint16(icmp[6:], 1)
	copy(icmp[8:], "wirelane-tun-tst")
	binary.BigEndian.PutUint16(icmp[2:], checksum(icmp))
	return p
}

func checksum(b []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// readUntil reads packets from d until match accepts one or the deadline
// passes. Reads are done in a goroutine because a TUN read cannot time out.
func readUntil(t *testing.T, d Device, match func([]byte) bool) []byte {
	t.Helper()
	found := make(chan []byte, 1)
	go func() {
		bufs := make([][]byte, d.BatchSize())
		for i := range bufs {
			bufs[i] = make([]byte, 65536+16)
		}
		sizes := make([]int, len(bufs))
		for {
			n, err := d.Read(bufs, sizes, 16)
			if err != nil && n == 0 {
				close(found)
				return
			}
			for i := 0; i < n; i++ {
				p := bufs[i][16 : 16+sizes[i]]
				if match(p) {
					found <- append([]byte(nil), p...)
					return
				}
			}
		}
	}()
	select {
	case p, ok := <-found:
		if !ok {
			t.Fatal("TUN read failed before the expected packet arrived")
		}
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("expected packet did not arrive on the TUN within 5s")
	}
	return nil
}

func TestCreateTUNMovesPackets(t *testing.T) {
	d, name := newTestTUN(t, "wlt", 1380)
	if got, err := d.Name(); err != nil || got != name {
		t.Fatalf("Name() = %q, %v; want %q", got, err, name)
	}
	if mtu, err := d.MTU(); err != nil || mtu != 1380 {
		t.Fatalf("MTU() = %d, %v; want 1380", mtu, err)
	}
	if d.BatchSize() < 1 || d.File() == nil {
		t.Fatalf("BatchSize() = %d, File() = %v", d.BatchSize(), d.File())
	}
	local, peer := bringUp(t, name)

	// A packet from the "peer" side written into the TUN reaches the
	// kernel, whose answer comes back out of the TUN.
	id := uint16(rand.Uint32())
	req := echoRequest(peer, local, id)
	buf := make([]byte, 16+len(req))
	copy(buf[16:], req)
	if _, err := d.Write([][]byte{buf}, 16); err != nil {
		t.Fatalf("Write: %v", err)
	}
	reply := readUntil(t, d, func(p []byte) bool {
		return len(p) >= 28 && p[0]>>4 == 4 && p[9] == unix.IPPROTO_ICMP && p[20] == 0 &&
			binary.BigEndian.Uint16(p[24:]) == id
	})
	if src := netip.AddrFrom4([4]byte(reply[12:16])); src != local {
		t.Errorf("echo reply from %v, want %v", src, local)
	}
	if dst := netip.AddrFrom4([4]byte(reply[16:20])); dst != peer {
		t.Errorf("echo reply to %v, want %v", dst, peer)
	}
}

func TestCreateTUNFromBlockingFile(t *testing.T) {
	needTUN(t)
	name := uniqueName("wlf")
	orig, err := CreateTUN(name, 1420)
	if err != nil {
		t.Fatal(err)
	}
	// Duplicate the descriptor in blocking mode, as an inherited one may be.
	rc, err := orig.File().SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var dup int
	var dupErr error
	rc.Control(func(fd uintptr) {
		dup, dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0)
		if dupErr == nil {
			dupErr = unix.SetNonblock(dup, false)
		}
	})
	if dupErr != nil {
		t.Fatal(dupErr)
	}
	orig.Close()
	d, err := CreateTUNFromFile(os.NewFile(uintptr(dup), "inherited"), 1300)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	if got, _ := d.Name(); got != name {
		t.Fatalf("Name() = %q, want %q", got, name)
	}
	if mtu, _ := d.MTU(); mtu != 1300 {
		t.Fatalf("MTU() = %d, want 1300", mtu)
	}
	local, peer := bringUp(t, name)
	id := uint16(rand.Uint32())
	req := echoRequest(peer, local, id)
	buf := append(make([]byte, 16), req...)
	if _, err := d.Write([][]byte{buf}, 16); err != nil {
		t.Fatalf("Write: %v", err)
	}
	readUntil(t, d, func(p []byte) bool {
		return len(p) >= 28 && p[9] == unix.IPPROTO_ICMP && p[20] == 0 && binary.BigEndian.Uint16(p[24:]) == id
	})
}

func TestReadFailsWhenInterfaceDeleted(t *testing.T) {
	d, name := newTestTUN(t, "wld", 1420)
	errc := readUntilError(d)
	link, err := netlink.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkDel(link); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		t.Logf("Read after deletion: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("Read did not fail within 5s of the interface being deleted")
	}
}

// TestMTUFollowsInterfaceIntoAnotherNamespace moves the interface away, as
// the kernel test topology and wg-quick users do, and changes its MTU
// there: the device must report the change and the new value.
func TestMTUFollowsInterfaceIntoAnotherNamespace(t *testing.T) {
	d, name := newTestTUN(t, "wlm", 1420)
	ns := newNamespace(t, "wlmns")
	// A different interface with the same name stays behind, so that a
	// look-up by name in the old namespace would answer wrongly.
	moveLink(t, name, "", ns)
	runIP(t, "tuntap", "add", "dev", name, "mode", "tun")
	runIP(t, "link", "set", name, "mtu", "1300")
	t.Cleanup(func() { exec.Command("ip", "link", "del", name).Run() })

	for _, mtu := range []int{9000, 65456, 1280} {
		drain(d)
		runIP(t, "-n", ns, "link", "set", name, "mtu", fmt.Sprint(mtu))
		waitEvent(t, d, EventMTUUpdate)
		if got, err := d.MTU(); err != nil || got != mtu {
			t.Fatalf("after setting MTU %d in the other namespace: MTU() = %d, %v", mtu, got, err)
		}
	}

	// Moving it once more is followed too.
	ns2 := newNamespace(t, "wlmns")
	moveLink(t, name, ns, ns2)
	drain(d)
	runIP(t, "-n", ns2, "link", "set", name, "mtu", "4000")
	waitEvent(t, d, EventMTUUpdate)
	if got, err := d.MTU(); err != nil || got != 4000 {
		t.Fatalf("after a second move: MTU() = %d, %v; want 4000", got, err)
	}

	// Close ends the event stream.
	d.Close()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-d.Events():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Events not closed within 5s of Close")
		}
	}
}

func drain(d Device) {
	for {
		select {
		case <-d.Events():
		case <-time.After(50 * time.Millisecond):
			return
		}
	}
}

func waitEvent(t *testing.T, d Device, want Event) {
	t.Helper()
	deadline := time.After(3 * time.Second)
	for {
		select {
		case ev := <-d.Events():
			if ev&want != 0 {
				return
			}
		case <-deadline:
			t.Fatalf("no event %d within 3s", want)
		}
	}
}

// TestNamespaceDeletionEndsTheDevice moves the interface into a namespace
// and deletes that namespace (`ip netns delete`), as a user tearing down a
// test topology does. Nothing in this process may keep the namespace alive:
// the kernel must then destroy the interface, and Read must fail, which is
// what ends a daemon.
func TestNamespaceDeletionEndsTheDevice(t *testing.T) {
	d, name := newTestTUN(t, "wln", 1420)
	ns := newNamespace(t, "wlnns")
	// Let the follower notice the move and look at the namespace a few
	// times, then ask for the MTU there, so that a descriptor kept by
	// either would show. Earlier events are drained before the move: after
	// it, draining could swallow the very event awaited.
	drain(d)
	moveLink(t, name, "", ns)
	waitEvent(t, d, EventMTUUpdate)
	if mtu, err := d.MTU(); err != nil || mtu != 1420 {
		t.Fatalf("MTU in the other namespace = %d, %v", mtu, err)
	}
	time.Sleep(3 * followInterval)

	errc := readUntilError(d)
	runIP(t, "netns", "del", ns)
	select {
	case err := <-errc:
		t.Logf("Read after the namespace was deleted: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not fail within 10s of the interface's namespace being deleted: something keeps the namespace alive")
	}
}

// A deleted interface ends the device even when no Read is waiting to
// see it: the follower closes it, and the next Read says so.
func TestDeletedInterfaceClosesTheDevice(t *testing.T) {
	d, name := newTestTUN(t, "wld", 1420)
	runIP(t, "link", "del", name)
	n := d.(*nsDevice)
	select {
	case <-n.stop:
	case <-time.After(10 * followInterval):
		t.Fatalf("device still open %v after its interface was deleted", 10*followInterval)
	}
	bufs := [][]byte{make([]byte, 16+1<<16)}
	if _, err := d.Read(bufs, make([]int, 1), 16); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("Read after the deletion: %v, want os.ErrClosed", err)
	}
}
