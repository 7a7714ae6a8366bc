package conn

import (
	"net/netip"
	"testing"
)

// Every segmented message a send builds fits a device whole: at most
// maxGSOSegments datagrams, at most the payload cap, and with its IP, UDP
// and an Ethernet header under the default gso_max_size of 64 KiB.
func TestSegmentedMessagesFitTheDevice(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		dst := netip.MustParseAddrPort("192.0.2.1:51820")
		ipHdr, maxPayload := 20, maxGSOPayload4
		if v6 {
			dst = netip.MustParseAddrPort("[2001:db8::1]:51820")
			ipHdr, maxPayload = 40, maxGSOPayload6
		}
		r := NewRoute(Endpoint{Dst: dst}, 1)
		for size := 32; size <= 9000; size += 4 {
			bufs := makeBufs(IdealBatchSize, size)
			st := newSendState(new(RCU), false)
			st.build(bufs, r, nil, noSegLimit, false)
			start := 0
			for m := 0; m < st.nmsg; m++ {
				end := int(st.end[m])
				total := 0
				for _, b := range bufs[start:end] {
					total += len(b)
				}
				if end-start > maxGSOSegments {
					t.Fatalf("v6=%v size %d: message %d has %d segments", v6, size, m, end-start)
				}
				if st.seg[m] && (total > maxPayload || 14+ipHdr+8+total > gsoMaxSize) {
					t.Fatalf("v6=%v size %d: message %d carries %d bytes", v6, size, m, total)
				}
				start = end
			}
			if start != len(bufs) {
				t.Fatalf("v6=%v size %d: messages cover %d of %d datagrams", v6, size, start, len(bufs))
			}
			st.clear()
		}
	}
}
