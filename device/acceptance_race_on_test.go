//go:build race

package device

// acceptanceRace reports whether the race detector is on (it allocates).
const acceptanceRace = true
