package service

// FakeHost is an IN-MEMORY STAND-IN FOR TESTS ONLY: no tunnel, no device,
// no file. It keeps tunnels in a map and walks them through the states a
// real Host would publish, so that the API, the event stream, the
// permissions and the metrics can be tested without root or engines. The
// real Host is the tunnel library's, wired in afterwards.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"
)

// FakeHost is an in-memory Host for tests (exported for the client tests).
type FakeHost struct {
	mu       sync.Mutex
	tunnels  map[string]*Tunnel // guarded by mu
	publish  func(Event)        // set by Watch; guarded by mu
	failUp   map[string]string  // Up fails with this message; guarded by mu
	counters []EngineCounter    // guarded by mu
	answers  []AuthAnswer       // guarded by mu
}

// Test keys (public keys only: a Host never shows a private one).
const (
	FakeKeyA = "hSDwCYkwp1R0i33ctD73Wg2/Og0mOBr066SpjqqbTmo="
	FakeKeyB = "xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg="
	FakeKeyD = "YCrJyPQ8J/0yJ6dCOx6tq7AFe45Jk1Ub3ZNChRZL+ko="
)

// NewFakeHost returns a FakeHost holding a down WireGuard tunnel wg0 (two
// peers, one named) and a down OpenVPN server ovs.
func NewFakeHost() *FakeHost {
	h := &FakeHost{tunnels: map[string]*Tunnel{}, failUp: map[string]string{}}
	ep := netip.MustParseAddrPort("192.0.2.1:51820")
	h.tunnels["wg0"] = &Tunnel{
		Name: "wg0", Kind: KindWireGuard, State: StateDown,
		Addresses: []netip.Prefix{netip.MustParsePrefix("10.9.0.1/24")},
		PublicKey: FakeKeyD,
		Peers: []Peer{
			{PublicKey: FakeKeyA, Name: "Alice's phone", Endpoint: &ep, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.2/32")}},
			{PublicKey: FakeKeyB, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.9.0.3/32"), netip.MustParsePrefix("fd00::3/128")}},
		},
	}
	h.tunnels["ovs"] = &Tunnel{Name: "ovs", Kind: KindOpenVPNServer, State: StateDown}
	return h
}

// List returns copies of the tunnels, sorted by name.
func (h *FakeHost) List() []Tunnel {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Tunnel
	for _, t := range h.tunnels {
		out = append(out, copyTunnel(t))
	}
	slices.SortFunc(out, func(a, b Tunnel) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Get returns a copy of one tunnel.
func (h *FakeHost) Get(name string) (Tunnel, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.tunnels[name]
	if !ok {
		return Tunnel{}, false
	}
	return copyTunnel(t), true
}

func copyTunnel(t *Tunnel) Tunnel {
	c := *t
	c.Addresses = slices.Clone(t.Addresses)
	c.Peers = slices.Clone(t.Peers)
	for i := range c.Peers {
		c.Peers[i].AllowedIPs = slices.Clone(c.Peers[i].AllowedIPs)
	}
	return c
}

// setStateLocked changes a tunnel's state and publishes it (with mu held,
// as a real Host may: publish never blocks).
func (h *FakeHost) setStateLocked(t *Tunnel, st State, reason, errMsg string) {
	t.State, t.Error = st, errMsg
	if h.publish != nil {
		c := copyTunnel(t)
		h.publish(Event{Type: EventTunnel, Tunnel: t.Name, State: st, Reason: reason, Error: errMsg, Status: &c})
	}
}

// Up walks a tunnel through starting to up (or failed, see FailUp).
func (h *FakeHost) Up(ctx context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.tunnels[name]
	if !ok {
		return fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	if t.State == StateUp {
		return nil
	}
	h.setStateLocked(t, StateStarting, "requested", "")
	if msg := h.failUp[name]; msg != "" {
		h.setStateLocked(t, StateFailed, "bring-up failed", msg)
		return errors.New(msg)
	}
	t.ListenPort = 51820
	h.setStateLocked(t, StateUp, "requested", "")
	return nil
}

// Down walks a tunnel through stopping to down.
func (h *FakeHost) Down(ctx context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.tunnels[name]
	if !ok {
		return fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	if t.State == StateDown {
		return nil
	}
	h.setStateLocked(t, StateStopping, "requested", "")
	t.ListenPort = 0
	h.setStateLocked(t, StateDown, "requested", "")
	return nil
}

// Import accepts any config whose lines are not "bad"; a line "bad" is a
// validation error on that line.
func (h *FakeHost) Import(ctx context.Context, req ImportRequest) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.tunnels[req.Name]; ok {
		return fmt.Errorf("%q: %w", req.Name, ErrExists)
	}
	for i, l := range strings.Split(req.Config, "\n") {
		if strings.TrimSpace(l) == "bad" {
			return &ConfigError{File: req.Name + ".conf", Line: i + 1, Msg: "this line is bad"}
		}
	}
	t := &Tunnel{Name: req.Name, Kind: req.Kind, State: StateDown}
	h.tunnels[req.Name] = t
	if h.publish != nil {
		c := copyTunnel(t)
		h.publish(Event{Type: EventTunnels, Tunnel: req.Name, Change: ChangeAdded, Status: &c})
	}
	return nil
}

// Delete removes a down or failed tunnel.
func (h *FakeHost) Delete(ctx context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	t, ok := h.tunnels[name]
	if !ok {
		return fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	if t.State != StateDown && t.State != StateFailed {
		return fmt.Errorf("%q is %s: %w", name, t.State, ErrBusy)
	}
	delete(h.tunnels, name)
	if h.publish != nil {
		h.publish(Event{Type: EventTunnels, Tunnel: name, Change: ChangeRemoved})
	}
	return nil
}

// Watch keeps publish until the returned function is called.
func (h *FakeHost) Watch(publish func(Event)) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.publish = publish
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.publish = nil
	}
}

// Answer records an auth answer (the Authenticator interface).
func (h *FakeHost) Answer(ctx context.Context, name string, a AuthAnswer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.tunnels[name]; !ok {
		return fmt.Errorf("%q: %w", name, ErrNotFound)
	}
	h.answers = append(h.answers, a)
	return nil
}

// EngineCounters returns what SetCounters stored (the CounterSource
// interface).
func (h *FakeHost) EngineCounters() []EngineCounter {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.counters)
}

// SetCounters sets the engine counters the next scrape shows.
func (h *FakeHost) SetCounters(c []EngineCounter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counters = c
}

// FailUp makes the next bring-ups of name fail with msg ("" = succeed).
func (h *FakeHost) FailUp(name, msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failUp[name] = msg
}

// Traffic adds bytes to a peer's counters (and the tunnel's).
func (h *FakeHost) Traffic(name string, peer int, rx, tx uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tunnels[name]
	t.Peers[peer].RxBytes += rx
	t.Peers[peer].TxBytes += tx
	t.RxBytes += rx
	t.TxBytes += tx
}

// Handshake sets a peer's latest handshake (and endpoint when ep is
// valid).
func (h *FakeHost) Handshake(name string, peer int, at time.Time, ep netip.AddrPort) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := &h.tunnels[name].Peers[peer]
	p.LatestHandshake = &at
	if ep.IsValid() {
		p.Endpoint = &ep
	}
}

// Connect adds an OpenVPN client to a server tunnel.
func (h *FakeHost) Connect(name, cn string, rx, tx uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tunnels[name]
	now := time.Now()
	ep := netip.MustParseAddrPort("198.51.100.7:40000")
	t.Peers = append(t.Peers, Peer{CommonName: cn, Endpoint: &ep, LatestHandshake: &now, RxBytes: rx, TxBytes: tx,
		AllowedIPs: []netip.Prefix{netip.MustParsePrefix("10.8.0.6/32")}})
	t.RxBytes += rx
	t.TxBytes += tx
}

// Answers returns the auth answers received.
func (h *FakeHost) Answers() []AuthAnswer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.answers)
}
