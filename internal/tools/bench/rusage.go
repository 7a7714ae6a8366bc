package bench

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// snapshot is the process state a run compares before and after its
// measured window.
type snapshot struct {
	at      time.Time
	cpu     time.Duration // user + system time of the whole process
	mallocs uint64        // cumulative heap allocations (runtime.MemStats)
}

// takeSnapshot reads the clock, getrusage(RUSAGE_SELF) and the allocation
// counter. ReadMemStats stops the world briefly; it is called only at the
// edges of a window.
func takeSnapshot() (snapshot, error) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return snapshot{}, err
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return snapshot{
		at:      time.Now(),
		cpu:     time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		mallocs: ms.Mallocs,
	}, nil
}
