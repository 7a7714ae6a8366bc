package device

import (
	"testing"
	"time"
)

// TestSoakTimersNeedTheBuildTag: the test binaries and every release build
// are built without the wirelane_soaktimers tag, and there a device
// ignores WIRELANE_SOAK_REKEY: its timers are the protocol's. (The tagged
// daemon is exercised by internal/testkit/e2e TestDaemonRekeySoakWireGuard,
// which counts its rekeys.)
func TestSoakTimersNeedTheBuildTag(t *testing.T) {
	if soakTimersBuilt {
		t.Skip("built with -tags wirelane_soaktimers: the soak build, where the variable counts")
	}
	t.Setenv(SoakRekeyEnv, "100ms")
	p := newPair(t, pairOpts{})
	for _, d := range []*Device{p.a, p.b} {
		if d.tm != defaultTiming() {
			t.Fatalf("with %s set and no build tag the timers are %+v, want the protocol's %+v", SoakRekeyEnv, d.tm, defaultTiming())
		}
	}
}

// TestParseSoakRekey: the soak build's variable takes a duration from
// 10 ms to RekeyAfterTime and scales every timer from it; anything else
// is refused (and the timers stay the protocol's).
func TestParseSoakRekey(t *testing.T) {
	tm, ok, err := parseSoakRekey("200ms")
	if err != nil || !ok {
		t.Fatalf("200ms: %v, %v", ok, err)
	}
	want := timing{
		rekeyAfterTime: 200 * time.Millisecond, rejectAfterTime: 2 * time.Second,
		rekeyTimeout: 200 * time.Millisecond * 5 / 6, keepaliveTimeout: 200 * time.Millisecond * 5 / 3,
		rekeyAttemptTime: 10 * time.Second, zeroKeyMaterial: 6 * time.Second, rekeyAfterMessages: RekeyAfterMessages,
	}
	want.rekeyOnReceiveAge = want.rejectAfterTime - want.keepaliveTimeout - want.rekeyTimeout
	if tm != want {
		t.Errorf("200ms: %+v\nwant %+v", tm, want)
	}
	if tm.rekeyTimeout >= tm.rekeyAfterTime || tm.rekeyOnReceiveAge <= tm.rekeyAfterTime || tm.maxHandshakes() < 10 {
		t.Errorf("200ms: timers out of the protocol's order: %+v", tm)
	}
	if _, ok, err := parseSoakRekey(""); ok || err != nil {
		t.Errorf("unset: %v, %v; want ignored", ok, err)
	}
	for _, bad := range []string{"fast", "5ms", "-1s", "3m", "0"} {
		if _, ok, err := parseSoakRekey(bad); ok || err == nil {
			t.Errorf("%q: accepted (%v, %v)", bad, ok, err)
		}
	}
}
