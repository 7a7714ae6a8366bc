package allowedips

// Lookup benchmarks against the allowed-IPs table of wireguard-go's device
// package, run on the same prefixes and probes as BenchmarkLookupBytes4/6.
// The reference table takes its own read lock per lookup, which is part of
// what it costs on its data path.

import (
	"net/netip"
	"testing"

	wgdevice "golang.zx2c4.com/wireguard/device"
)

func newReferenceSet(b *testing.B, v6 bool) (*wgdevice.AllowedIPs, [][]byte) {
	s := newLookupSet(b, v6)
	peers := make([]*wgdevice.Peer, 1000)
	for i := range peers {
		peers[i] = new(wgdevice.Peer)
	}
	ref := new(wgdevice.AllowedIPs)
	// Mirror the owners of s.tab so both tables route identically.
	for v := range 1000 {
		s.tab.Prefixes(v, func(p netip.Prefix) bool {
			ref.Insert(p, peers[v])
			return true
		})
	}
	for i, h := range s.hdrs {
		v, ok := s.tab.LookupBytes(h)
		got := ref.Lookup(h)
		if ok != (got != nil) || ok && got != peers[v] {
			b.Fatalf("tables disagree on %v", s.addrs[i])
		}
	}
	return ref, s.hdrs
}

func benchReference(b *testing.B, v6 bool) {
	ref, hdrs := newReferenceSet(b, v6)
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for i := 0; b.Loop(); i++ {
		if ref.Lookup(hdrs[i&4095]) != nil {
			n++
		}
	}
	sink += n
}

func BenchmarkReferenceLookupBytes4(b *testing.B) { benchReference(b, false) }
func BenchmarkReferenceLookupBytes6(b *testing.B) { benchReference(b, true) }
