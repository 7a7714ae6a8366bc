package server

// Failed handshakes, by reason (Stats.FailedHandshakes), for operators
// (the service's /metrics). Each is counted once where the server gives
// up on the attempt, never per packet of a handshake that succeeds:
//
//	client reset that fails tls-auth / tls-crypt / tls-crypt-v2  -> tls_wrap
//	tls-crypt-v2 key refused (metadata-allow, max-age)           -> key_refused
//	newPeer: max-clients                                         -> max_clients
//	newPeer: unproven sessions per source, connect-freq;
//	    a TCP connection refused at accept (tcpgate.go)          -> rate_limit
//	runKeyState (first key), Run failed:
//	    the client was refused after the key exchange (AUTH_FAILED) -> auth
//	    the client's certificate was refused (control.ErrVerify)    -> verify
//	    hand-window passed                                          -> timeout
//	    the TLS handshake failed otherwise                          -> tls
//	    anything else (a bad key_method_2, no pool address)         -> other
//
// A first key state that ends because its session ended for another
// reason (replaced by a newer session, an exit notification, the server
// closing) is not a failure. The stateless checks (tls_wrap, key_refused,
// max_clients, rate_limit) count packets: a client retransmits its reset,
// so one attempt refused there may count a few times.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/ovpn/control"
	"github.com/wirelane/wirelane/ovpn/wire"
)

// HandshakeFailure is why the server gave up on a client's handshake.
type HandshakeFailure uint8

// The reasons a handshake fails.
const (
	// FailTLSWrap: a client reset that failed the tls-auth, tls-crypt or
	// tls-crypt-v2 check (a wrong or missing key).
	FailTLSWrap HandshakeFailure = iota
	// FailKeyRefused: a tls-crypt-v2 client key that checked but is
	// refused by tls-crypt-v2-metadata-allow or tls-crypt-v2-max-age.
	FailKeyRefused
	// FailMaxClients: max-clients clients are connected.
	FailMaxClients
	// FailRateLimit: too many sessions from the source have not finished
	// their handshake, connect-freq was reached, or a TCP connection was
	// refused at accept (Stats.TCPRefused).
	FailRateLimit
	// FailTLS: the TLS handshake failed for another reason than the
	// client's certificate (TLS versions or ciphers, a client that refused
	// the server's certificate, a broken TLS stream).
	FailTLS
	// FailVerify: the client's certificate was refused (not from the CA,
	// expired, revoked, wrong usage or name, no certificate).
	FailVerify
	// FailAuth: the client was turned away after the key exchange with
	// AUTH_FAILED (no shared data cipher, disabled in client-config-dir,
	// ccd-exclusive without a file).
	FailAuth
	// FailTimeout: the handshake did not finish within hand-window.
	FailTimeout
	// FailOther: anything else (a malformed key_method_2, no address
	// left in the pool).
	FailOther
	numHandshakeFailures
)

var handshakeFailureNames = [numHandshakeFailures]string{"tls_wrap", "key_refused", "max_clients", "rate_limit", "tls", "verify", "auth", "timeout", "other"}

// String returns the reason as the metrics label has it.
func (f HandshakeFailure) String() string {
	if f < numHandshakeFailures {
		return handshakeFailureNames[f]
	}
	return "unknown"
}

// HandshakeFailureReasons lists the reasons' label names, in
// HandshakeFailure order.
func HandshakeFailureReasons() []string {
	return append([]string(nil), handshakeFailureNames[:]...)
}

// HandshakeFailures counts failed handshakes by reason.
type HandshakeFailures struct {
	n [numHandshakeFailures]atomic.Uint64
}

// Load returns the count of one reason.
func (h *HandshakeFailures) Load(f HandshakeFailure) uint64 {
	if f >= numHandshakeFailures {
		return 0
	}
	return h.n[f].Load()
}

// Total returns the count of every reason.
func (h *HandshakeFailures) Total() uint64 {
	var t uint64
	for i := range h.n {
		t += h.n[i].Load()
	}
	return t
}

// Each calls f with every reason's label name and count, in
// HandshakeFailure order.
func (h *HandshakeFailures) Each(f func(reason string, n uint64)) {
	for i := range h.n {
		f(handshakeFailureNames[i], h.n[i].Load())
	}
}

func (h *HandshakeFailures) add(f HandshakeFailure) { h.n[f].Add(1) }

// resetRefused counts a packet that failed the tls-auth, tls-crypt or
// tls-crypt-v2 check when it is a client's reset (the start of a
// handshake; any other packet from an unknown source is only BadControl).
func (s *Server) resetRefused(raw []byte) {
	if len(raw) == 0 {
		return
	}
	if op, _ := wire.Header(raw[0]); op == wire.HardResetClientV2 || op == wire.HardResetClientV3 {
		s.stats.FailedHandshakes.add(FailTLSWrap)
	}
}

// tlsFailure marks an error of the TLS handshake stage (side.Explain).
type tlsFailure struct{ error }

func (e tlsFailure) Unwrap() error { return e.error }

// firstKeyFailed counts why the first key state's exchange failed (err
// from Exchange.Run), unless the session ended for another reason.
func (p *peer) firstKeyFailed(err error) {
	s := p.s
	if s.isClosed() {
		return
	}
	p.mu.Lock()
	refused := p.authFail != ""
	p.mu.Unlock()
	var tf tlsFailure
	f := FailOther
	switch {
	case refused:
		f = FailAuth
	case errors.Is(err, control.ErrVerify):
		f = FailVerify
	case errors.Is(err, context.DeadlineExceeded) || time.Since(p.created) >= s.handWindow:
		f = FailTimeout
	case p.isClosed():
		return // replaced, an exit notification: not a failure
	case errors.As(err, &tf):
		f = FailTLS
	}
	s.stats.FailedHandshakes.add(f)
}

// isClosed reports whether the session has ended.
func (p *peer) isClosed() bool {
	select {
	case <-p.closed:
		return true
	default:
		return false
	}
}
