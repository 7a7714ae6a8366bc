package replay

// This file holds the filter itself:
//
//	Validate: limit check -> window move (clear new words) or age check
//	          -> test-and-set the counter's bit

const (
	wordBits  = 64
	ringWords = 128 // a power of two
	ringMask  = ringWords - 1

	// WindowSize is how far below the highest accepted counter a counter
	// may be and still be accepted (if not seen before).
	WindowSize = (ringWords - 1) * wordBits
)

// Filter is a replay window over 64-bit counters. The zero value is a
// fresh filter that has seen nothing; Reset returns a filter to that
// state. A Filter is not safe for concurrent use.
type Filter struct {
	last uint64            // highest counter accepted so far (0 when fresh)
	ring [ringWords]uint64 // bit c%64 of word (c/64)%128 marks counter c seen
}

// Reset forgets every counter, as for a new keypair.
func (f *Filter) Reset() {
	*f = Filter{}
}

// Validate reports whether counter may be accepted and, if so, records it
// as seen. It rejects counter >= limit, a counter seen before, and a
// counter more than WindowSize below the highest accepted one. Call it
// only after the packet has been authenticated, so that forged counters
// cannot move the window.
func (f *Filter) Validate(counter, limit uint64) bool {
	if counter >= limit {
		return false
	}
	word := counter / wordBits
	if counter > f.last {
		// Clear the words between the old and the new top; all of them
		// hold bits of counters that have now left the window.
		cur := f.last / wordBits
		n := min(word-cur, ringWords)
		for i := uint64(1); i <= n; i++ {
			f.ring[(cur+i)&ringMask] = 0
		}
		f.last = counter
	} else if f.last-counter > WindowSize {
		return false
	}
	bit := uint64(1) << (counter % wordBits)
	w := &f.ring[word&ringMask]
	if *w&bit != 0 {
		return false
	}
	*w |= bit
	return true
}
