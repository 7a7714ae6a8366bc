//go:build !race

package data

// raceEnabled reports a race-detector build, where allocation counts are
// not meaningful (sync.Pool drops items on purpose).
const raceEnabled = false
