package noise

import "time"

// Test hooks: questions only the tests ask a Handshake.

// LastInitiationConsumed returns when the last initiation from this peer was
// accepted (zero if never).
func (h *Handshake) LastInitiationConsumed() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lastInitiation
}
