// Package testtimers shortens the OpenVPN client's and server's timers for
// the rekey soak (ovpn/server TestRekeySoak, ovpn/client
// TestE2ERekeySoak): a renegotiation every few hundred milliseconds
// instead of reneg-sec's whole seconds, checked by a timer that ticks
// faster than the product's once a second.
//
// Only packages under ovpn/ can import it, so only they can make a
// Timers that changes anything: client.Options.Timers and
// server.Options.Timers are nil in the product, and no configuration
// file, directive or command-line flag reaches them. A Timers made any
// other way is the zero value, which changes nothing.
package testtimers

import "time"

// Timers is a shortened timer setting; nil or the zero value means the
// product's timers.
type Timers struct {
	tick  time.Duration
	reneg time.Duration
}

// New returns timers that tick every tick and renegotiate every reneg
// (0: as reneg-sec says).
func New(tick, reneg time.Duration) *Timers { return &Timers{tick: tick, reneg: reneg} }

// Tick is how often the session's timers run: once a second unless
// shortened.
func (t *Timers) Tick() time.Duration {
	if t == nil || t.tick <= 0 {
		return time.Second
	}
	return t.tick
}

// Reneg is the renegotiation interval replacing reneg-sec, or 0 to keep
// reneg-sec.
func (t *Timers) Reneg() time.Duration {
	if t == nil || t.reneg <= 0 {
		return 0
	}
	return t.reneg
}
