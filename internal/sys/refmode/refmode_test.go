package refmode

import "testing"

func TestSetReturnsThePreviousMode(t *testing.T) {
	start := Enabled()
	if start != built {
		t.Fatalf("Enabled() = %v at start, want the build's %v", start, built)
	}
	if was := Set(!start); was != start || Enabled() == start {
		t.Fatalf("Set(%v) returned %v and left Enabled() = %v", !start, was, Enabled())
	}
	if was := Set(start); was == start || Enabled() != start {
		t.Fatalf("Set(%v) returned %v and left Enabled() = %v", start, was, Enabled())
	}
}
