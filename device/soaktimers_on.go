//go:build wirelane_soaktimers

package device

import "os"

// soakTimersBuilt reports whether this binary was built with the
// wirelane_soaktimers tag (a test build for the rekey soak; never a
// release).
const soakTimersBuilt = true

// applySoakTimers shortens d's timers as SoakRekeyEnv says (soaktimers.go),
// loudly, before the device starts its workers. A bad value is logged and ignored: the timers stay the
// protocol's.
func applySoakTimers(d *Device) {
	tm, ok, err := parseSoakRekey(os.Getenv(SoakRekeyEnv))
	if err != nil {
		d.log.Error("soak timers: ignored", "err", err)
		return
	}
	if !ok {
		return
	}
	d.tm = tm
	d.log.Warn("soak timers: the protocol's timers are shortened for a test (a wirelane_soaktimers build, never a release)",
		"rekey_after", tm.rekeyAfterTime, "reject_after", tm.rejectAfterTime)
}
