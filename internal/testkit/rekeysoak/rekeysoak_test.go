package rekeysoak

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

// TestObserveFlagsExpiredKeys: the relay's check counts a packet under the
// lame duck after the transition window and one under a key older than the
// lame duck; packets under the current key, under the lame duck within the
// window, or under a newer key (one skipped id: a renegotiation that
// carried no data) pass.
func TestObserveFlagsExpiredKeys(t *testing.T) {
	r := &Relay{window: 100 * time.Millisecond}
	r.dirs[0].prev = -1
	t0 := time.Unix(1000, 0)
	data := func(kid uint8) []byte { return []byte{9<<3 | kid, 0, 0, 1} } // P_DATA_V2
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	r.observe(0, data(0), at(0))
	r.observe(0, []byte{4<<3 | 3}, at(1)) // a control packet: not looked at
	r.observe(0, data(1), at(10))
	r.observe(0, data(0), at(50)) // lame duck within the window
	if rep := r.Report(0); rep.Expired != 0 || rep.Rekeys != 1 || rep.Skipped != 0 || rep.Packets != 3 {
		t.Fatalf("within the window: %+v", rep)
	}
	r.observe(0, data(0), at(200)) // lame duck after the window
	if rep := r.Report(0); rep.Expired != 1 {
		t.Fatalf("lame duck after the window not counted: %+v", rep)
	}
	r.observe(0, data(3), at(210)) // skips 2
	if rep := r.Report(0); rep.Expired != 1 || rep.Skipped != 1 || rep.Rekeys != 2 {
		t.Fatalf("a skipped key id: %+v", rep)
	}
	r.observe(0, data(0), at(211)) // key 0: never again
	r.observe(0, data(7), at(212)) // behind 3 in the cycle (not the lame duck 1)
	if rep := r.Report(0); rep.Expired != 3 || rep.Rekeys != 2 {
		t.Fatalf("keys older than the lame duck: %+v", rep)
	}
	for id, want := range map[uint8]uint8{0: 1, 1: 2, 6: 7, 7: 1} {
		if got := nextKeyID(id); got != want {
			t.Errorf("nextKeyID(%d) = %d, want %d", id, got, want)
		}
	}
}

// TestStreamCountsBothWays: over loopback (nothing lost) every datagram of
// both directions is counted once, and a datagram that is not the
// stream's counts as a stray, not as a delivery.
func TestStreamCountsBothWays(t *testing.T) {
	lo := netip.MustParseAddrPort("127.0.0.1:0")
	s, err := StartStream(lo, lo, nil, nil, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	time.Sleep(100 * time.Millisecond)
	junk, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.conns[1].LocalAddr().(*net.UDPAddr).AddrPort()))
	if err != nil {
		t.Fatal(err)
	}
	junk.Write([]byte("not the stream's"))
	junk.Close()
	s.Stop()
	time.Sleep(50 * time.Millisecond)
	for dir, want := range []int64{1, 0} {
		c := s.Counts(dir)
		if c.Sent < 10 || c.Lost() != 0 || c.Duplicates != 0 || c.Strays != want || c.SendErrors != 0 {
			t.Errorf("direction %d: %v; want at least 10 sent, none lost, %d strays", dir, c, want)
		}
	}
}
