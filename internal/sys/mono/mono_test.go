package mono

import (
	"testing"
	"time"
)

func TestStampsCountFromTheProcessAndMeasureIntervals(t *testing.T) {
	s := Now()
	if s <= 0 {
		t.Fatalf("Now() = %d, want > 0", s)
	}
	later := time.Now().Add(10 * time.Second)
	if d := Since(s, later); d < 10*time.Second || d > 11*time.Second {
		t.Fatalf("Since(Now(), now+10s) = %v, want about 10s", d)
	}
	if Of(later)-s < int64(10*time.Second) {
		t.Fatal("Of does not follow Add")
	}
}

// Stamps never go back, whatever the wall clock does meanwhile.
func TestNowIsMonotonic(t *testing.T) {
	prev := Now()
	for range 1000 {
		s := Now()
		if s < prev {
			t.Fatalf("stamp went back: %d after %d", s, prev)
		}
		prev = s
	}
}
