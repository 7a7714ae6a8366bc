package service

import (
	"sync"
	"time"
)

// Periodic calls look every interval on a goroutine of its own until the
// returned stop is called; stop then runs after (once, however often stop
// is called) and returns. Hosts use it for their Watch loops.
func Periodic(interval time.Duration, look func(), after func()) (stop func()) {
	done := make(chan struct{})
	go func() {
		tk := time.NewTicker(interval)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
			}
			look()
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			after()
		})
	}
}
