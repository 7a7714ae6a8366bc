package device

import (
	"crypto/cipher"
	"sync/atomic"
	"time"

	"github.com/wirelane/wirelane/device/noise"
	"github.com/wirelane/wirelane/device/replay"
)

// keypair is one session's transport keys plus the counters that go with
// them. Its keys and identity never change after creation.
type keypair struct {
	send, receive cipher.AEAD
	isInitiator   bool
	created       time.Time
	localIndex    uint32
	remoteIndex   uint32
	peer          *peer

	// sendNonce is the next send counter; the staging stage reserves a
	// whole batch with one Add.
	sendNonce atomic.Uint64
	// replay is touched only by the owning peer's receive goroutine.
	replay replay.Filter
}

func newKeypair(s *noise.Session, p *peer) *keypair {
	return &keypair{
		send:        s.Send,
		receive:     s.Receive,
		isInitiator: s.IsInitiator,
		created:     s.Created,
		localIndex:  s.LocalIndex,
		remoteIndex: s.RemoteIndex,
		peer:        p,
	}
}

// canSend reports whether the session may still send at now.
func (kp *keypair) canSend(now time.Time, t *timing) bool {
	return kp != nil && kp.sendNonce.Load() < RejectAfterMessages && now.Sub(kp.created) < t.rejectAfterTime
}

// keypairs is a peer's set of sessions: the one that sends (current), the
// one before it (previous, still accepted on receive) and a responder's
// new session awaiting its first packet (next, the key confirmation).
type keypairs struct {
	// current is written only under peer.kpMu; the send path loads it
	// without a lock once per batch.
	current atomic.Pointer[keypair]
	// previous and next are guarded by peer.kpMu.
	previous *keypair
	next     *keypair
}
