package device

import "time"

// Clock is the device's source of time. Every protocol timer and every age
// check goes through it, so tests can drive time without sleeping.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has elapsed, like
	// time.AfterFunc.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call made by Clock.AfterFunc.
type Timer interface {
	// Stop cancels the call; it reports whether the call was pending.
	Stop() bool
	// Reset reschedules the call to d from now; it reports whether the
	// call was pending.
	Reset(d time.Duration) bool
}

// realClock is the Clock of the time package.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
