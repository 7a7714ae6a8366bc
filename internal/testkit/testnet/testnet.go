// Package testnet holds network helpers for the ovpn tests: running code
// inside a named network namespace and building ICMP echo packets. Only
// tests import it.
package testnet

import (
	"encoding/binary"
	"net/netip"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/wirelane/wirelane/internal/sys/inetsum"
)

// InNamespace runs fn on an OS thread switched into the network namespace
// ns (a name under /var/run/netns); the thread is discarded afterwards
// (the goroutine exits while locked).
func InNamespace(ns string, fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		fn()
		errc <- nil
	}()
	return <-errc
}

// ICMPEcho builds an IPv4 ICMP echo request (typ 8) or reply (typ 0).
func ICMPEcho(typ byte, src, dst netip.Addr, id, seq uint16, payload []byte) []byte {
	p := make([]byte, 20+8+len(payload))
	p[0], p[8], p[9] = 0x45, 64, 1
	binary.BigEndian.PutUint16(p[2:], uint16(len(p)))
	s4, d4 := src.As4(), dst.As4()
	copy(p[12:16], s4[:])
	copy(p[16:20], d4[:])
	binary.BigEndian.PutUint16(p[10:], inetsum.Checksum(p[:20]))
	icmp := p[20:]
	icmp[0] = typ
	binary.BigEndian.PutUint16(icmp[4:], id)
	binary.BigEndian.PutUint16(icmp[6:], seq)
	copy(icmp[8:], payload)
	binary.BigEndian.PutUint16(icmp[2:], inetsum.Checksum(icmp))
	return p
}
