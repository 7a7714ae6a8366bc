package service

import "context"

// Host owns the tunnels the service shows. The tunnel library implements it
// for real tunnels; it must be safe for concurrent use.
//
// Errors: a method returns an error wrapping ErrNotFound, ErrExists,
// ErrBusy, ErrInvalid or ErrUnsupported where one applies (the API answers
// 404, 409, 409, 400 and 501), a *ConfigError for a configuration that does
// not validate (400 with its line), and anything else for a failure of the
// machine (500).
type Host interface {
	// List returns every tunnel, sorted by name. The slices in the result
	// belong to the caller.
	List() []Tunnel
	// Get returns one tunnel, or false when there is none of that name.
	Get(name string) (Tunnel, bool)
	// Up brings a tunnel up and returns once it is up or has failed. It
	// publishes the states it passes through (starting, up or failed).
	// A tunnel already up is not an error.
	Up(ctx context.Context, name string) error
	// Down brings a tunnel down (stopping, down). A tunnel already down is
	// not an error.
	Down(ctx context.Context, name string) error
	// Import validates and stores a configuration (mode 0600), as a down
	// tunnel, and publishes a tunnels event. A stored name is ErrExists.
	Import(ctx context.Context, req ImportRequest) error
	// Delete removes a stored tunnel that is down (else ErrBusy) and
	// publishes a tunnels event.
	Delete(ctx context.Context, name string) error
	// Watch hands the Host the function that publishes events: tunnel
	// (every state change, with its reason), tunnels (added, removed) and
	// auth. publish never blocks and may be called from any goroutine,
	// also while the Host holds its own locks. The returned function stops
	// the Host's use of publish; Watch is called once.
	Watch(publish func(Event)) (stop func())
}

// Authenticator is implemented by a Host whose tunnels can ask for
// credentials (auth events). A Host without it answers 501 to
// POST /v1/tunnels/{name}/auth.
type Authenticator interface {
	// Answer gives a tunnel the credentials its auth event asked for. The
	// Host must not log or publish them.
	Answer(ctx context.Context, name string, a AuthAnswer) error
}

// CounterSource is implemented by a Host whose engines keep their own
// counters (handshakes, cookies, drops by reason, socket and TUN errors).
// The collector calls EngineCounters at every scrape; it must only read
// values the engines already keep.
type CounterSource interface {
	EngineCounters() []EngineCounter
}
