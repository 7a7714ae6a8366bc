//go:build !wirelane_soaktimers

package device

// soakTimersBuilt reports whether this binary was built with the
// wirelane_soaktimers tag: never in a release build.
const soakTimersBuilt = false

// applySoakTimers does nothing: without the wirelane_soaktimers tag,
// SoakRekeyEnv is ignored (soaktimers.go).
func applySoakTimers(*Device) {}
