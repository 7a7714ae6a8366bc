package conn

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FuzzParseMessage feeds arbitrary sockaddrs and control messages to the
// receive-path parser: it must never panic, and a source it reports must
// be of the peer's family.
func FuzzParseMessage(f *testing.F) {
	for _, tc := range []struct {
		dst string
		src string
	}{
		{"127.0.0.1:51820", "127.0.0.2"},
		{"[2001:db8::1]:443", "2001:db8::2"},
		{"[fe80::1%7]:1", ""},
	} {
		var sa rawSockaddr
		l := putSockaddr(&sa, netip.MustParseAddrPort(tc.dst))
		name := append([]byte(nil), (*[unix.SizeofSockaddrInet6]byte)(unsafe.Pointer(&sa))[:l]...)
		var oob []byte
		if tc.src != "" {
			oob = stickyControl(Endpoint{Dst: netip.MustParseAddrPort(tc.dst), Src: netip.MustParseAddr(tc.src), SrcIfindex: 3})
		}
		f.Add(name, oob)
		f.Add(name, append(append([]byte(nil), oob...), groControl(1200)...))
	}
	f.Add([]byte{}, []byte{})
	f.Add([]byte{2, 0}, []byte{255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0, 8, 0, 0, 0})
	f.Fuzz(func(t *testing.T, name, oob []byte) {
		ep, gso, _, ok := parseMessage(name, oob)
		if !ok {
			return
		}
		if gso < 0 {
			t.Fatalf("negative segment size %d", gso)
		}
		if ep.Src.IsValid() && ep.Src.Is4() != ep.Dst.Addr().Is4() {
			t.Fatalf("source %v for peer %v", ep.Src, ep.Dst)
		}
		// What parses as an address must build a route that reads back.
		r := NewRoute(ep, 1)
		back, ok := parseSockaddr((*[unix.SizeofSockaddrInet6]byte)(unsafe.Pointer(&r.sa))[:r.saLen])
		if !ok || back.Addr().WithZone("") != ep.Dst.Addr().WithZone("") || back.Port() != ep.Dst.Port() {
			t.Fatalf("route for %v reads back as %v", ep.Dst, back)
		}
	})
}

// FuzzInvalidatesSources feeds arbitrary netlink datagrams to the source
// watcher's filter: it must never panic or loop.
func FuzzInvalidatesSources(f *testing.F) {
	f.Add(nlmsg(unix.RTM_DELADDR, 8))
	f.Add(append(nlmsg(unix.RTM_NEWADDR, 5), nlmsg(unix.RTM_NEWROUTE, 12)...))
	f.Add([]byte{16, 0, 0, 0, 20, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		invalidatesSources(b)
	})
}

// TestStickyControlRoundTrip: the control message a route sends with is the
// one the receive path reads back.
func TestStickyControlRoundTrip(t *testing.T) {
	for _, ep := range []Endpoint{
		{Dst: netip.MustParseAddrPort("192.0.2.1:1"), Src: netip.MustParseAddr("198.51.100.7"), SrcIfindex: 4},
		{Dst: netip.MustParseAddrPort("[2001:db8::1]:1"), Src: netip.MustParseAddr("2001:db8::7"), SrcIfindex: 9},
	} {
		c := stickyControl(ep)
		src, ifi, gso, _ := parseControl(append(c, groControl(1337)...))
		if src != ep.Src || ifi != ep.SrcIfindex || gso != 1337 {
			t.Errorf("%v: read back src %v ifindex %d gso %d", ep, src, ifi, gso)
		}
	}
}

// groControl builds the UDP_GRO control message the kernel attaches to a
// coalesced datagram.
func groControl(size int) []byte {
	b := make([]byte, groSpace)
	putCmsgHeader(b, unix.SOL_UDP, unix.UDP_GRO, 4)
	binary.NativeEndian.PutUint32(b[cmsgHdrLen:], uint32(size))
	return b
}
