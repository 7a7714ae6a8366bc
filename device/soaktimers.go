package device

// Shortened protocol timers for the rekey soaks, and nothing else. The
// in-process soak (soak_test.go) sets them directly; a daemon gets them
// only when it was built with -tags wirelane_soaktimers (soaktimers_on.go)
// and started with WIRELANE_SOAK_REKEY set: that is how the end-to-end
// soak (internal/testkit/e2e TestDaemonRekeySoakWireGuard) sees hundreds
// of rekeys through real daemons in seconds. A release build
// (scripts/install.sh, packaging) never has the tag, and without it the
// variable is ignored (soaktimers_off.go): no configuration, flag or
// exported API of the product can shorten the protocol's timers.

import (
	"fmt"
	"time"
)

// SoakRekeyEnv is the environment variable a wirelane_soaktimers build
// reads in NewDevice: a Go duration, the shortened RekeyAfterTime.
const SoakRekeyEnv = "WIRELANE_SOAK_REKEY"

// shortTiming returns the protocol's timers scaled down around a rekey
// every rekey of a session's life: sessions rejected at ten times that,
// retries and keepalives in proportion (for rekey = 60 ms: RekeyTimeout
// 50 ms, KeepaliveTimeout 100 ms, RejectAfterTime 600 ms), and a whole
// attempt kept at RekeyAttemptTime's 90 s at most, 5 s at least, so that
// a slow machine does not give up on a peer.
func shortTiming(rekey time.Duration) timing {
	t := defaultTiming()
	t.rekeyAfterTime = rekey
	t.rejectAfterTime = 10 * rekey
	t.rekeyTimeout = rekey * 5 / 6
	t.keepaliveTimeout = rekey * 5 / 3
	t.rekeyOnReceiveAge = t.rejectAfterTime - t.keepaliveTimeout - t.rekeyTimeout
	t.rekeyAttemptTime = min(max(5*time.Second, 50*rekey), RekeyAttemptTime)
	t.zeroKeyMaterial = 3 * t.rejectAfterTime
	return t
}

// parseSoakRekey reads SoakRekeyEnv's value: "" means unset (false); a
// duration from 10 ms to RekeyAfterTime gives the shortened timing.
func parseSoakRekey(v string) (timing, bool, error) {
	if v == "" {
		return timing{}, false, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 10*time.Millisecond || d > RekeyAfterTime {
		return timing{}, false, fmt.Errorf("%s=%q: want a duration from 10ms to %v", SoakRekeyEnv, v, RekeyAfterTime)
	}
	return shortTiming(d), true, nil
}
