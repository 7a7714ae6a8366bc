package rekeysoak

import (
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
