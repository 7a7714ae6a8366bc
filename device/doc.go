// Package device is Wirelane's WireGuard protocol engine: peers, sessions,
// handshakes, timers, cookies and the parallel data path between a TUN
// device and a conn.Bind. The handshake cryptography lives in device/noise,
// crypto-routing in device/allowedips and the replay window in
// device/replay; this package ties them to time, sockets and packets.
//
// # Lifecycle
//
// NewDevice starts the crypto workers, the handshake workers and the TUN
// reader; Up opens the bind and starts every peer's two sequential
// goroutines; Down stops them; Close tears everything down, including the
// TUN device and the bind, and Wait's channel closes. A TUN device that goes
// away closes the device.
//
// # Configuration
//
// Configure applies a Config (keys, port, mark, peers and their allowed
// IPs) with the semantics of a set operation of WireGuard's userspace
// protocol, and WriteStatus streams the state back through a StatusWriter
// as a get operation reports it. The protocol's text form is not this
// package's: internal/control/uapi parses it into a Config and writes a
// status as text, and maps ErrClosed and *BindError to its error numbers.
//
// # Data path
//
// The send and receive pipelines are drawn at the top of send.go and
// receive.go. Work moves in batches (up to conn.IdealBatchSize packets for
// one peer and one session): every lock, channel operation and timer event
// is paid once per batch, never per packet, and buffers come from free
// lists sized to the MTU, so steady state allocates nothing. On one or two
// cores batches are sealed and opened by the goroutine that built them
// (a hand-off costs more there than parallelism gains); elsewhere only
// small batches are. A Linux TUN device gets whole batches with room to
// merge each flow's packets (tun.HeadRoom), and reads (tun.Reader) are
// never limited by the current MTU: a packet larger than it (the MTU just
// grew) is taken from a scratch buffer, one it cannot carry is dropped,
// not fatal.
//
// The send path borrows each peer's route (conn.RouteCache.Borrow) inside
// an RCU read section (conn.RCU): no lock and no allocation between the
// sealed batch and Bind.Send. Roaming publishes a new route at most once per
// received batch; an endpoint set through Configure, a peer's removal and Close
// also wait for a grace period, so once they return no packet goes to the
// old place. Ref mode (refmode.go) takes the conventional locked path
// instead; it exists only for A/B measurements and is chosen by the
// benchmark harness through internal/sys/refmode, not through this
// package's API.
//
// # Sessions
//
// A peer holds up to three sessions: current (sends), previous (still
// decrypts late packets) and next (a responder's new session, promoted when
// its first packet arrives: key confirmation). Sessions are found on
// receive through random 32-bit local indices. Send counters are reserved
// per batch with one atomic add; the replay window is checked by the
// peer's receive goroutine, in order.
//
// # Timers
//
// Every protocol timer of the whitepaper runs per peer (timers.go) on a
// clock, which tests replace to drive time without sleeping. The durations
// are in constants.go under the whitepaper's names.
//
// # Denial of service
//
// Handshake messages go through a bounded queue. When it fills, the device
// is under load: initiations and responses need a valid mac2, others are
// answered with a cookie reply, and a per-source-IP token bucket limits the
// handshake work done for each address.
//
// # Locking, outermost first
//
//	cfgMu (configuration) > mu (peer map)
//	peer.hsMu > peer.kpMu > indices.mu
//	peer.stageMu > mu, pools.mu (stageMu is held while batches are queued
//	or sent directly by the TUN reader, so that send order is counter
//	order; a ref-mode direct send read-locks mu under it)
//	peer.recvMu > peer.stageMu, pools.mu (recvMu is held while a batch is
//	delivered; a key confirmation flushes staged packets under it)
//	allowedMu, rateLimiter.mu: held alone
//
// Each field's guard is written beside it.
package device
