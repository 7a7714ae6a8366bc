package rekeysoak

import (
	"testing"
	"time"
)

// TestObserveFlagsExpiredKeys: the relay's check counts a packet under the
// lame duck after the transition window, under a key two generations old,
// and a key change that skips an id; packets under the current key, or
// under the lame duck within the window, pass.
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
	if rep := r.Report(0); rep.Expired != 0 || rep.Rekeys != 1 || rep.OutOfOrder != 0 || rep.Packets != 3 {
		t.Fatalf("within the window: %+v", rep)
	}
	r.observe(0, data(0), at(200)) // lame duck after the window
	if rep := r.Report(0); rep.Expired != 1 {
		t.Fatalf("lame duck after the window not counted: %+v", rep)
	}
	r.observe(0, data(2), at(210))
	r.observe(0, data(0), at(211)) // two generations old: a new key to the relay, out of order
	r.observe(0, data(4), at(220)) // skips 1
	if rep := r.Report(0); rep.OutOfOrder != 2 {
		t.Fatalf("key changes out of sequence: %+v", rep)
	}
	for id, want := range map[uint8]uint8{0: 1, 1: 2, 6: 7, 7: 1} {
		if got := nextKeyID(id); got != want {
			t.Errorf("nextKeyID(%d) = %d, want %d", id, got, want)
		}
	}
}
