package device

import "time"

// clock is the device's source of time. Every protocol timer and every age
// check goes through it, so tests can drive time without sleeping (they
// create devices with newDevice and a fake clock).
type clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, like
	// time.AfterFunc.
	AfterFunc(d time.Duration, f func()) timer
}

// timer is a pending call made by clock.AfterFunc.
type timer interface {
	// Stop cancels the call; it reports whether the call was pending.
	Stop() bool
	// Reset reschedules the call to d from now; it reports whether the
	// call was pending.
	Reset(d time.Duration) bool
}

// realClock is the clock of the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) timer { return time.AfterFunc(d, f) }
