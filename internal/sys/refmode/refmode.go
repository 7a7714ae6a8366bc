// Package refmode is the switch between the WireGuard engine's two send
// paths for A/B measurements: off (always, in the product) the borrowed
// route, on the conventional locked path that the tree keeps only to be
// measured against ("ref mode": device read lock and endpoint mutex per
// batch, a route built per send).
//
// It is not a setting of the product: no option, flag or exported engine
// API reaches it. The benchmark harness turns it on in-process (Set) around
// the creation of its "ref" devices, and a binary built with
// `-tags wirelane_refmode` starts with it on: that is how the harness,
// scripts/netns-ab.sh and the end-to-end tests get a ref-mode wirelaned.
// device.NewDevice reads it once; a device keeps the mode it was created
// with.
package refmode

import "sync/atomic"

var on atomic.Bool

func init() { on.Store(built) }

// Enabled reports whether devices created now take the ref path.
func Enabled() bool { return on.Load() }

// Set turns ref mode on or off for the devices created from now on and
// returns the previous value. It is process-wide: set it around the
// creation of the devices that should take the ref path, never while
// another goroutine creates devices that should not.
func Set(v bool) (was bool) { return on.Swap(v) }
