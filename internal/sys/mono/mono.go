// Package mono stamps instants on the monotonic clock as integers, for
// the atomics that hold "when did this last happen" on hot paths.
//
// A stamp taken with time.Now().UnixNano() reads the wall clock, which NTP,
// a resumed virtual machine or an operator can step by seconds or hours;
// the interval between two such stamps is then wrong by the step. A step
// forward of ten seconds would end every OpenVPN session by ping-restart at
// once, and a step back would keep ping-restart from firing for as long as
// the step. Stamps from this package count on the monotonic clock, which
// never steps.
package mono

import "time"

// base is the instant every stamp counts from; it carries a monotonic
// reading, so differences from it ignore wall-clock steps.
var base = time.Now()

// Now returns the stamp of the current instant. Stamps taken in this
// process are never 0, so callers may keep 0 for "never".
func Now() int64 { return Of(time.Now()) }

// Of returns the stamp of t, which must carry a monotonic reading: a time
// from time.Now or a Ticker, or one moved from those by Add. Instants
// after the process started have stamps above 0.
func Of(t time.Time) int64 { return int64(t.Sub(base)) + 1 }

// Since returns how long before t the instant stamped s was.
func Since(s int64, t time.Time) time.Duration { return time.Duration(Of(t) - s) }
