package e2e

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
	"github.com/wirelane/wirelane/internal/testkit/netns"
	"github.com/wirelane/wirelane/internal/testkit/testnet"
	"github.com/wirelane/wirelane/tun"
)

// TestICMPErrorSourceThroughTUN pins the kernel behaviour behind the
// source address of the device's ICMP errors (device/icmp.go,
// docs/security.md): an error written into a TUN device is received by
// the host like any packet from outside. From the unreachable destination
// (what the device sends) ping shows it, in both families. From the
// pinger's own address (what the kernel's WireGuard uses for a sender on
// the same host, its error never leaving the host) the IPv4 error is a
// martian source and dropped (accept_local is off by default), while IPv6
// delivers it.
func TestICMPErrorSourceThroughTUN(t *testing.T) {
	netns.Need(t, "ping")
	for _, c := range []struct {
		name     string
		own, dst string // the pinger's address and the destination
		fromOwn  bool   // the error's source: own (else the destination)
		want     string // in ping's output; "" for no error seen
	}{
		{"IPv4 from the destination", "10.55.0.1", "10.55.0.2", false, "From 10.55.0.2 icmp_seq=1 Destination Host Unreachable"},
		{"IPv4 from the pinger's own address", "10.55.0.1", "10.55.0.2", true, ""},
		{"IPv6 from the destination", "fd55::1", "fd55::2", false, "From fd55::2 icmp_seq=1 Destination unreachable: Address unreachable"},
		{"IPv6 from the pinger's own address", "fd55::1", "fd55::2", true, "From fd55::1 icmp_seq=1 Destination unreachable: Address unreachable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ns := netns.New(t, "wlis")
			name := netns.Unique("wli")
			var dev tun.Device
			var err error
			if werr := testnet.InNamespace(ns.Name, func() { dev, err = tun.CreateTUN(name, 1420) }); werr != nil || err != nil {
				t.Fatalf("TUN in %s: %v %v", ns.Name, werr, err)
			}
			// A read blocks: closing the device ends it if the request
			// never comes.
			stop := time.AfterFunc(5*time.Second, func() { dev.Close() })
			defer func() {
				if stop.Stop() {
					dev.Close()
				}
			}()
			netns.Run(t, ns, "ip", "addr", "add", "10.55.0.1/24", "dev", name)
			netns.Run(t, ns, "ip", "addr", "add", "fd55::1/64", "dev", name, "nodad")
			netns.Run(t, ns, "ip", "link", "set", name, "up")
			ping := netns.Start(t, ns, "ping", "-c", "1", "-W", "2", c.dst)
			dstAddr := netip.MustParseAddr(c.dst)
			bufs, sizes := [][]byte{make([]byte, tun.Offset+2048)}, []int{0}
			wrote := false
			deadline := time.Now().Add(3 * time.Second)
			for !wrote && time.Now().Before(deadline) {
				n, err := dev.Read(bufs, sizes, tun.Offset)
				if err != nil && tun.ReadFatal(err) {
					t.Fatalf("TUN read: %v (no echo request)", err)
				}
				if err != nil || n == 0 {
					continue
				}
				pkt := bufs[0][tun.Offset : tun.Offset+sizes[0]]
				if e := icmpErrorFor(pkt, dstAddr, c.fromOwn); e != nil {
					buf := append(make([]byte, tun.Offset), e...)
					if _, err := dev.Write([][]byte{buf}, tun.Offset); err != nil {
						t.Fatal(err)
					}
					wrote = true
				}
			}
			out, _ := ping.Wait(t, 10*time.Second)
			if !wrote {
				t.Fatalf("no echo request read from the TUN device:\n%s", out)
			}
			if c.want == "" {
				if strings.Contains(out, "From ") {
					t.Errorf("the error was delivered, want it dropped as a martian:\n%s", out)
				}
			} else if !strings.Contains(out, c.want) {
				t.Errorf("want %q in:\n%s", c.want, out)
			}
		})
	}
}

// icmpErrorFor returns the host unreachable (ICMPv6 address unreachable)
// answering pkt when it is an echo request to dst, from dst or (fromOwn)
// from pkt's own source; else nil.
func icmpErrorFor(pkt []byte, dst netip.Addr, fromOwn bool) []byte {
	switch {
	case dst.Is4() && len(pkt) >= 28 && pkt[0]>>4 == 4 && pkt[9] == 1 && pkt[20] == 8 && netip.AddrFrom4([4]byte(pkt[16:20])) == dst:
		src := pkt[12:16]
		from := pkt[16:20]
		if fromOwn {
			from = src
		}
		e := make([]byte, 28+len(pkt))
		e[0], e[8], e[9] = 0x45, 64, 1
		binary.BigEndian.PutUint16(e[2:], uint16(len(e)))
		copy(e[12:16], from)
		copy(e[16:20], src)
		binary.BigEndian.PutUint16(e[10:], inetsum.Checksum(e[:20]))
		e[20], e[21] = 3, 1
		copy(e[28:], pkt)
		binary.BigEndian.PutUint16(e[22:], inetsum.Checksum(e[20:]))
		return e
	case dst.Is6() && len(pkt) >= 48 && pkt[0]>>4 == 6 && pkt[6] == 58 && pkt[40] == 128 && netip.AddrFrom16([16]byte(pkt[24:40])) == dst:
		src := pkt[8:24]
		from := pkt[24:40]
		if fromOwn {
			from = src
		}
		e := make([]byte, 48+len(pkt))
		binary.BigEndian.PutUint32(e[0:], 6<<28)
		binary.BigEndian.PutUint16(e[4:], uint16(8+len(pkt)))
		e[6], e[7] = 58, 64
		copy(e[8:24], from)
		copy(e[24:40], src)
		e[40], e[41] = 1, 3
		copy(e[48:], pkt)
		var ph [8]byte
		binary.BigEndian.PutUint32(ph[0:], uint32(8+len(pkt)))
		ph[7] = 58
		acc := inetsum.Add(inetsum.Add(inetsum.Add(0, e[8:40]), ph[:]), e[40:])
		binary.BigEndian.PutUint16(e[42:], ^inetsum.Fold(acc))
		return e
	}
	return nil
}
