package bench

import "sync"

// Teardowns of the sections that are running (namespaces, daemons), so
// that an interrupted run can still remove what it set up.
var cleanups struct {
	mu   sync.Mutex // guards the fields below
	next int
	fns  map[int]func()
	done bool // Interrupt ran: later registrations run at once
}

// addCleanup registers fn to run on Interrupt and returns a function that
// unregisters it (call it once fn has run the ordinary way).
func addCleanup(fn func()) (remove func()) {
	cleanups.mu.Lock()
	if cleanups.done {
		cleanups.mu.Unlock()
		fn()
		return func() {}
	}
	if cleanups.fns == nil {
		cleanups.fns = map[int]func(){}
	}
	id := cleanups.next
	cleanups.next++
	cleanups.fns[id] = fn
	cleanups.mu.Unlock()
	return func() {
		cleanups.mu.Lock()
		delete(cleanups.fns, id)
		cleanups.mu.Unlock()
	}
}

// Interrupt tears down what the running sections set up: their daemons
// and network namespaces. Call it when the run is interrupted (SIGINT,
// SIGTERM), then exit; the run in progress cannot go on.
func Interrupt() {
	cleanups.mu.Lock()
	fns := cleanups.fns
	cleanups.fns, cleanups.done = nil, true
	cleanups.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}
