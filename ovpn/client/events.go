package client

// The phases of a connection as events (Options.OnEvent), named after the
// states of OpenVPN's management interface so a service can report them
// as OpenVPN GUIs know them.

import (
	"net/netip"
	"sync"
	"time"

	"github.com/wirelane/wirelane/ovpn/config"
)

// State is a phase of a client connection, named as OpenVPN's management
// interface names it (`state` command).
type State string

// States, in the order a connection goes through them. The client
// reports RESOLVE to GET_CONFIG and RECONNECTING between attempts; the
// tunnel around it (internal/tunnel/ovpntunnel) reports ASSIGN_IP,
// ADD_ROUTES, CONNECTED, RECONNECTING after a session ended, and EXITING.
const (
	StateResolve     State = "RESOLVE"      // looking up a remote's host name
	StateConnecting  State = "CONNECTING"   // a UDP remote: sending the first packet
	StateTCPConnect  State = "TCP_CONNECT"  // a TCP remote: connecting
	StateWait        State = "WAIT"         // waiting for the server's first reply
	StateAuth        State = "AUTH"         // TLS handshake, then authentication (key_method_2)
	StateGetConfig   State = "GET_CONFIG"   // PUSH_REQUEST sent, then the pushed options
	StateAssignIP    State = "ASSIGN_IP"    // the tunnel address given to the device
	StateAddRoutes   State = "ADD_ROUTES"   // the pushed routes installed
	StateConnected   State = "CONNECTED"    // the tunnel carries traffic
	StateReconnect   State = "RECONNECTING" // an attempt or a session failed; trying again
	StateExiting     State = "EXITING"      // giving up or shutting down
	StateAuthPending State = "AUTH_PENDING" // the server asked for more authentication
)

// Event is one step of a connection. Several events may carry the same
// state (AUTH for the TLS handshake and then for the authentication; a
// failed attempt repeats the state it failed in, with Err set); a state
// machine follows State.
type Event struct {
	// State is the phase.
	State State
	// Time is when it happened; Elapsed is the time since Dial started.
	Time    time.Time
	Elapsed time.Duration
	// Remote is the remote entry ("host:port"), Proto its transport and
	// Addr the address it resolved to (when known).
	Remote string
	Proto  config.Proto
	Addr   netip.AddrPort
	// Attempt counts the rounds over the remotes, from 1.
	Attempt int
	// Detail describes the step for a person ("TLS handshake",
	// "pushed options: ..."), without secrets.
	Detail string
	// Err is set when the step failed: the attempt on this remote is
	// over.
	Err error
}

// emitter delivers one Dial's events in order, one at a time, until it is
// stopped (events of later renegotiations are not phases of the dial).
type emitter struct {
	fn    func(Event)
	start time.Time

	mu      sync.Mutex // guards the fields below and serialises fn
	stopped bool
	remote  config.Remote
	addr    netip.AddrPort
	attempt int
}

func newEmitter(fn func(Event)) *emitter {
	return &emitter{fn: fn, start: time.Now()}
}

// at sets the remote (and its address, when resolved) later events name.
func (e *emitter) at(r config.Remote, addr netip.AddrPort, attempt int) {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.remote, e.addr, e.attempt = r, addr, attempt
	e.mu.Unlock()
}

// emit reports one event (nothing once stopped or without a callback).
func (e *emitter) emit(st State, detail string, err error) {
	if e == nil || e.fn == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped {
		return
	}
	now := time.Now()
	e.fn(Event{State: st, Time: now, Elapsed: now.Sub(e.start), Remote: e.remote.Address(), Proto: e.remote.Proto,
		Addr: e.addr, Attempt: e.attempt, Detail: detail, Err: err})
}

// stop ends the delivery.
func (e *emitter) stop() {
	if e == nil {
		return
	}
	e.mu.Lock()
	e.stopped = true
	e.mu.Unlock()
}
