package server

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Datagrams from two senders arrive with their source addresses and
// contents, and a warm read allocates nothing.
func TestBatchReader(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bufs := make([][]byte, 4)
	for i := range bufs {
		bufs[i] = make([]byte, 2048)
	}
	r, err := newBatchReader(c, bufs)
	if err != nil {
		t.Fatal(err)
	}
	var senders []*net.UDPConn
	for range 2 {
		s, err := net.DialUDP("udp4", nil, c.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		senders = append(senders, s)
	}
	want := map[netip.AddrPort][]byte{}
	for i, s := range senders {
		p := bytes.Repeat([]byte{byte(i + 1)}, 100+i)
		if _, err := s.Write(p); err != nil {
			t.Fatal(err)
		}
		want[s.LocalAddr().(*net.UDPAddr).AddrPort()] = p
	}
	got := 0
	for got < 2 {
		n, err := r.readBatch()
		if err != nil {
			t.Fatal(err)
		}
		for i := range n {
			size, from, seg := r.message(i)
			if w, ok := want[from]; !ok || !bytes.Equal(bufs[i][:size], w) || seg != 0 {
				t.Fatalf("message from %v: %d bytes, segment %d", from, size, seg)
			}
			got++
		}
	}
	p := make([]byte, 64)
	if a := testing.AllocsPerRun(20, func() {
		senders[0].Write(p)
		if n, err := r.readBatch(); err != nil || n != 1 {
			t.Fatalf("readBatch = %d, %v", n, err)
		}
	}); a > 0 {
		t.Fatalf("%v allocations per read", a)
	}
}

func TestSockaddrAddrPort(t *testing.T) {
	var sa unix.RawSockaddrInet6
	sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(&sa))
	sa4.Family = unix.AF_INET
	sa4.Addr = [4]byte{192, 0, 2, 7}
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa4.Port))[:], 1194)
	if got := sockaddrAddrPort(&sa, unix.SizeofSockaddrInet4); got != netip.MustParseAddrPort("192.0.2.7:1194") {
		t.Fatalf("IPv4: %v", got)
	}
	if got := sockaddrAddrPort(&sa, 4); got.IsValid() {
		t.Fatalf("short IPv4 sockaddr gave %v", got)
	}
	sa = unix.RawSockaddrInet6{Family: unix.AF_INET6}
	sa.Addr = netip.MustParseAddr("::ffff:198.51.100.1").As16()
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&sa.Port))[:], 40000)
	if got := sockaddrAddrPort(&sa, unix.SizeofSockaddrInet6); got != netip.MustParseAddrPort("198.51.100.1:40000") {
		t.Fatalf("mapped IPv6: %v", got)
	}
	sa.Addr = netip.MustParseAddr("2001:db8::5").As16()
	if got := sockaddrAddrPort(&sa, unix.SizeofSockaddrInet6); got != netip.MustParseAddrPort("[2001:db8::5]:40000") {
		t.Fatalf("IPv6: %v", got)
	}
	sa.Family = unix.AF_UNIX
	if got := sockaddrAddrPort(&sa, unix.SizeofSockaddrInet6); got.IsValid() {
		t.Fatalf("AF_UNIX gave %v", got)
	}
}

// cmsg builds one control message.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(unix.CmsgLen(len(data)))
	copy(b[unix.CmsgLen(0):], data)
	return b
}

func TestGROSegmentRaw(t *testing.T) {
	seg := binary.NativeEndian.AppendUint32(nil, 1424)
	other := cmsg(unix.SOL_IP, unix.IP_TOS, []byte{0})
	for _, c := range []struct {
		name string
		oob  []byte
		want int
	}{
		{"none", nil, 0},
		{"gro", cmsg(unix.SOL_UDP, unix.UDP_GRO, seg), 1424},
		{"gro after another", append(other, cmsg(unix.SOL_UDP, unix.UDP_GRO, seg)...), 1424},
		{"16-bit", cmsg(unix.SOL_UDP, unix.UDP_GRO, binary.NativeEndian.AppendUint16(nil, 700)), 700},
		{"other only", other, 0},
		{"truncated", cmsg(unix.SOL_UDP, unix.UDP_GRO, seg)[:unix.CmsgLen(0)+2], 0},
	} {
		if got := groSegmentRaw(c.oob); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// Control bytes of any shape give a size or 0, never a panic.
func FuzzGROSegmentRaw(f *testing.F) {
	f.Add(cmsg(unix.SOL_UDP, unix.UDP_GRO, binary.NativeEndian.AppendUint32(nil, 1424)))
	f.Add(cmsg(unix.SOL_IP, unix.IP_TOS, []byte{1}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, oob []byte) {
		if n := groSegmentRaw(oob); n < 0 {
			t.Fatalf("negative segment size %d", n)
		}
	})
}
