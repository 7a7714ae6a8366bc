package device

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
	"github.com/wirelane/wirelane/tun"
)

func echo4(src, dst [4]byte, icmpType byte, fragOff uint16) []byte {
	p := make([]byte, 20+8+32)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	binary.BigEndian.PutUint16(p[6:8], fragOff)
	p[8], p[9] = 64, 1
	copy(p[12:16], src[:])
	copy(p[16:20], dst[:])
	p[20] = icmpType
	return p
}

func echo6(src, dst [16]byte, next, icmpType byte) []byte {
	p := make([]byte, 40+8+32)
	p[0] = 0x60
	binary.BigEndian.PutUint16(p[4:6], uint16(len(p)-40))
	p[6], p[7] = next, 64
	copy(p[8:24], src[:])
	copy(p[24:40], dst[:])
	p[40] = icmpType
	return p
}

func TestUnreachable4(t *testing.T) {
	e := newICMPErrors()
	src, dst := [4]byte{192, 168, 241, 1}, [4]byte{192, 168, 241, 9}
	in := echo4(src, dst, 8, 0)
	b := e.unreachable(in)
	if b == nil {
		t.Fatal("no error for an echo request to no peer")
	}
	m := b[tun.Offset:]
	if len(m) != 28+len(in) || inetsum.Checksum(m[:20]) != 0 || inetsum.Checksum(m[20:]) != 0 {
		t.Fatalf("bad length or checksums: % x", m)
	}
	if string(m[12:16]) != string(dst[:]) || string(m[16:20]) != string(src[:]) || m[9] != 1 || m[20] != 3 || m[21] != 1 {
		t.Fatalf("wrong addresses or type: % x", m[:28])
	}
	if string(m[28:]) != string(in) {
		t.Fatal("the offending packet is not quoted whole")
	}
	big := make([]byte, 1400)
	copy(big, in)
	binary.BigEndian.PutUint16(big[2:4], 1400)
	if m := e.unreachable(big)[tun.Offset:]; len(m) != icmp4Max {
		t.Fatalf("error for a 1400-byte packet is %d bytes, want %d", len(m), icmp4Max)
	}
	for name, p := range map[string][]byte{
		"ICMP error":      echo4(src, dst, 3, 0),
		"later fragment":  echo4(src, dst, 8, 100),
		"multicast dst":   echo4(src, [4]byte{224, 0, 0, 1}, 8, 0),
		"broadcast dst":   echo4(src, [4]byte{255, 255, 255, 255}, 8, 0),
		"unspecified src": echo4([4]byte{}, dst, 8, 0),
		"short":           in[:19],
	} {
		if e.unreachable(p) != nil {
			t.Errorf("%s: got an ICMP error, want none", name)
		}
	}
}

func TestUnreachable6(t *testing.T) {
	e := newICMPErrors()
	src, dst := [16]byte{0xfd, 15: 1}, [16]byte{0xfd, 15: 9}
	in := echo6(src, dst, 58, 128)
	b := e.unreachable(in)
	if b == nil {
		t.Fatal("no error for an echo request to no peer")
	}
	m := b[tun.Offset:]
	if len(m) != 48+len(in) || m[6] != 58 || m[40] != 1 || m[41] != 3 {
		t.Fatalf("bad error: % x", m[:48])
	}
	if string(m[8:24]) != string(dst[:]) || string(m[24:40]) != string(src[:]) {
		t.Fatal("wrong addresses")
	}
	var ph [8]byte
	binary.BigEndian.PutUint32(ph[0:4], uint32(len(m)-40))
	ph[7] = 58
	if inetsum.Fold(inetsum.Add(inetsum.Add(inetsum.Add(0, m[8:40]), ph[:]), m[40:])) != 0xffff {
		t.Fatal("bad ICMPv6 checksum")
	}
	for name, p := range map[string][]byte{
		"ICMPv6 error":    echo6(src, dst, 58, 1),
		"multicast dst":   echo6(src, [16]byte{0xff, 0x02, 15: 1}, 58, 128),
		"unspecified src": echo6([16]byte{}, dst, 58, 128),
	} {
		if e.unreachable(p) != nil {
			t.Errorf("%s: got an ICMP error, want none", name)
		}
	}
	if e.unreachable(echo6(src, dst, 17, 0)) == nil {
		t.Error("no error for UDP")
	}
}

func TestUnreachableRateLimit(t *testing.T) {
	e := newICMPErrors()
	now := time.Unix(1000, 0)
	n := 0
	for i := 0; i < 200; i++ {
		if e.allow(now) {
			n++
		}
	}
	if n != icmpBurst {
		t.Fatalf("%d errors allowed at once, want the burst of %d", n, icmpBurst)
	}
	if !e.allow(now.Add(2 * time.Millisecond)) {
		t.Fatal("no token 2 ms later")
	}
}

func TestUnreachableNoAlloc(t *testing.T) {
	e := newICMPErrors()
	in := echo4([4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 8, 0)
	if a := testing.AllocsPerRun(100, func() { e.unreachable(in) }); a != 0 {
		t.Fatalf("%v allocations per error", a)
	}
}

// FuzzUnreachable: any packet read from the TUN device gets either no
// error or a well-formed one, never a panic.
func FuzzUnreachable(f *testing.F) {
	f.Add(echo4([4]byte{10, 0, 0, 1}, [4]byte{10, 0, 0, 2}, 8, 0))
	f.Add(echo6([16]byte{0xfd, 15: 1}, [16]byte{0xfd, 15: 9}, 58, 128))
	f.Add([]byte{0x4f, 0, 0, 0})
	e := newICMPErrors()
	f.Fuzz(func(t *testing.T, pkt []byte) {
		b := e.unreachable(pkt)
		if b == nil {
			return
		}
		m := b[tun.Offset:]
		if m[0]>>4 == 4 && (len(m) > icmp4Max || inetsum.Checksum(m[:20]) != 0 || inetsum.Checksum(m[20:]) != 0) {
			t.Fatalf("bad IPv4 error: % x", m)
		}
		if m[0]>>4 == 6 && (len(m) > icmp6Max || int(binary.BigEndian.Uint16(m[4:6])) != len(m)-40) {
			t.Fatalf("bad IPv6 error: % x", m)
		}
	})
}
