package data

// ReplayWindowSize is the number of packet ids behind the highest one that
// are still accepted once (OpenVPN's default replay-window 64).
const ReplayWindowSize = 64

// replayWindow remembers which recent packet ids were seen. The zero value
// is ready; id 0 is never valid.
type replayWindow struct {
	highest uint32
	bits    uint64 // bit i set: highest-i seen
}

// check reports whether id is acceptable without recording it.
func (w *replayWindow) check(id uint32) bool {
	if id == 0 {
		return false
	}
	if id > w.highest {
		return true
	}
	d := w.highest - id
	if d >= ReplayWindowSize {
		return false
	}
	return w.bits&(1<<d) == 0
}

// update records id, which check accepted.
func (w *replayWindow) update(id uint32) {
	if id > w.highest {
		d := id - w.highest
		if d >= ReplayWindowSize {
			w.bits = 0
		} else {
			w.bits <<= d
		}
		w.highest = id
		w.bits |= 1
		return
	}
	w.bits |= 1 << (w.highest - id)
}
