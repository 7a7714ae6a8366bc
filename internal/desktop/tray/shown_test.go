package tray

import (
	"testing"
	"time"
)

// The settle policy works around fyne.io/systray's start-up race (see
// settle): every render re-sets the values while settling, and only
// changes afterwards.
func TestShownSetsEverythingWhileSettlingThenOnlyChanges(t *testing.T) {
	start := time.Unix(1000, 0)
	s := newShown(start)
	type want struct{ title, icon, tip bool }
	steps := []struct {
		at   time.Duration
		icon Icon
		tip  string
		want want
	}{
		{0, IconIdle, "Wirelane: connecting", want{true, true, true}},
		// Unchanged, but still settling: set again, in case the first
		// set fell into the library's export window.
		{time.Second, IconIdle, "Wirelane: connecting", want{true, true, true}},
		{settle - time.Millisecond, IconIdle, "no tunnel up", want{true, true, true}},
		// Settled: nothing changed, nothing is set.
		{settle, IconIdle, "no tunnel up", want{false, false, false}},
		{settle + time.Second, IconIdle, "wg0 up", want{false, false, true}},
		{settle + 2*time.Second, IconUp, "wg0 up", want{false, true, false}},
		{settle + 3*time.Second, IconUp, "wg0 up", want{false, false, false}},
	}
	for i, st := range steps {
		title, icon, tip := s.update(start.Add(st.at), st.icon, st.tip)
		if got := (want{title, icon, tip}); got != st.want {
			t.Errorf("step %d (+%v): set title/icon/tooltip = %+v, want %+v", i, st.at, got, st.want)
		}
	}
}
