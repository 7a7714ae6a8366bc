package noise

import (
	"encoding/hex"
	"testing"
	"time"
)

func TestTAI64NEncoding(t *testing.T) {
	ts := TAI64N(time.Unix(0, 0))
	if got := hex.EncodeToString(ts[:]); got != "400000000000000a00000000" {
		t.Errorf("TAI64N(epoch) = %s", got)
	}
	ts = TAI64N(time.Unix(1700000000, 123456789))
	if got := hex.EncodeToString(ts[:]); got != "400000006553f10a075bcd15" {
		t.Errorf("TAI64N = %s", got)
	}
	if back := ts.Time(); !back.Equal(time.Unix(1700000000, 123456789)) {
		t.Errorf("Time() = %v", back)
	}
}

func TestTimestampOrder(t *testing.T) {
	base := time.Unix(1700000000, 999_999_999)
	a := TAI64N(base)
	b := TAI64N(base.Add(time.Nanosecond)) // crosses a second boundary
	if !b.After(a) || a.After(b) || a.After(a) {
		t.Error("After does not follow time order")
	}
	if !TAI64N(base).After(TAI64N(time.Unix(1, 0))) {
		t.Error("later second not after")
	}
}

func TestWhitening(t *testing.T) {
	base := time.Unix(1700000000, 0)
	w := whitened(base.Add(TimestampGranularity + 5*time.Millisecond))
	if !w.Equal(base.Add(TimestampGranularity)) {
		t.Errorf("whitened = %v", w.Sub(base))
	}
	// Two instants in the same granule encode equally; in consecutive
	// granules, strictly increasing.
	x := TAI64N(whitened(base.Add(1 * time.Millisecond)))
	y := TAI64N(whitened(base.Add(15 * time.Millisecond)))
	z := TAI64N(whitened(base.Add(HandshakeInitiationRate)))
	if x != y || !z.After(y) {
		t.Error("whitening granularity")
	}
}
