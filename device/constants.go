package device

import (
	"math"
	"time"

	"github.com/wirelane/wirelane/device/noise"
)

// Protocol limits and timers, named as in the WireGuard whitepaper
// (section 6.1 and 6.4).
const (
	// RekeyAfterMessages is the send counter after which the initiator of a
	// session starts a new handshake.
	RekeyAfterMessages = 1 << 60
	// RejectAfterMessages is the counter at which a session may no longer
	// send or receive.
	RejectAfterMessages = math.MaxUint64 - (1 << 13)
	// RekeyAfterTime is the age after which the initiator of a session starts
	// a new handshake when it sends.
	RekeyAfterTime = 120 * time.Second
	// RekeyAttemptTime is how long handshake initiations are retried before
	// giving up.
	RekeyAttemptTime = 90 * time.Second
	// RekeyTimeout is the wait for a handshake response before retrying.
	RekeyTimeout = 5 * time.Second
	// RekeyTimeoutJitterMax is the largest random delay added to RekeyTimeout
	// and to the new-handshake timer.
	RekeyTimeoutJitterMax = 334 * time.Millisecond
	// RejectAfterTime is the age after which a session may no longer send or
	// receive.
	RejectAfterTime = 180 * time.Second
	// KeepaliveTimeout is how long a peer that received data waits for data
	// of its own to send before sending a keepalive.
	KeepaliveTimeout = 10 * time.Second
	// CookieRefreshTime is how long a cookie stays valid.
	CookieRefreshTime = noise.CookieRefreshTime
	// HandshakeInitiationRate is the shortest spacing between initiations
	// accepted from one peer.
	HandshakeInitiationRate = noise.HandshakeInitiationRate
	// MaxTimerHandshakes is how many initiations are sent for one attempt
	// before giving up (RekeyAttemptTime / RekeyTimeout).
	MaxTimerHandshakes = int(RekeyAttemptTime / RekeyTimeout)
	// ZeroKeyMaterialTime is how long keys live without a new handshake
	// before they are zeroed (3 x RejectAfterTime).
	ZeroKeyMaterialTime = 3 * RejectAfterTime
	// RekeyOnReceiveAge is the age of an initiator's session at which a
	// received packet triggers a new handshake
	// (RejectAfterTime - KeepaliveTimeout - RekeyTimeout).
	RekeyOnReceiveAge = RejectAfterTime - KeepaliveTimeout - RekeyTimeout
)

// Data path sizes and queue bounds.
const (
	// PaddingMultiple is the multiple plaintexts are padded to.
	PaddingMultiple = 16
	// MinBufferMTU is the smallest MTU buffers are sized for, so handshake
	// messages and small-MTU peers always fit.
	MinBufferMTU = 1280
	// MaxStagedPackets bounds each peer's queue of packets waiting for a
	// session; the oldest packet is dropped beyond it.
	MaxStagedPackets = 1024
	// PeerQueueBatches bounds each peer's queue of batches in flight in
	// either direction.
	PeerQueueBatches = 64
	// HandshakeQueueSize bounds the queue of handshake messages waiting for
	// a handshake worker.
	HandshakeQueueSize = 1024
	// HandshakePriorityQueueSize bounds the queue of handshake messages
	// whose mac2 was verified on receipt under load (the initiators that
	// answered a cookie), served before the others.
	HandshakePriorityQueueSize = 256
	// UnderLoadQueueSize is the handshake queue length at which the device
	// considers itself under load and requires cookies.
	UnderLoadQueueSize = HandshakeQueueSize / 8
	// UnderLoadWindow is the window over which a receive goroutine counts
	// handshake messages: UnderLoadQueueSize of them within it (about
	// 1000 a second) put the device under load.
	UnderLoadWindow = UnderLoadAfterTime / 8
	// UnderLoadAfterTime is how long the device stays under load after the
	// queue last crossed UnderLoadQueueSize.
	UnderLoadAfterTime = time.Second
	// StaleHandshakeAge is how long a handshake message (initiation,
	// response, cookie reply) may have waited in the socket's receive
	// buffer and still be worked on while the device is under load; an
	// older one is dropped unread (DropHandshakeStale). See stale.go for
	// why 100 ms.
	StaleHandshakeAge = 100 * time.Millisecond
)

// timing holds the protocol durations a device uses. It is a copy of the
// constants above; tests shorten it through an unexported hook before Up so
// that rekeying can be seen without waiting minutes. It is read-only once
// the device is up.
type timing struct {
	rekeyAfterTime     time.Duration
	rejectAfterTime    time.Duration
	rekeyAttemptTime   time.Duration
	rekeyTimeout       time.Duration
	keepaliveTimeout   time.Duration
	rekeyOnReceiveAge  time.Duration
	zeroKeyMaterial    time.Duration
	rekeyAfterMessages uint64
}

func defaultTiming() timing {
	return timing{
		rekeyAfterTime:     RekeyAfterTime,
		rejectAfterTime:    RejectAfterTime,
		rekeyAttemptTime:   RekeyAttemptTime,
		rekeyTimeout:       RekeyTimeout,
		keepaliveTimeout:   KeepaliveTimeout,
		rekeyOnReceiveAge:  RekeyOnReceiveAge,
		zeroKeyMaterial:    ZeroKeyMaterialTime,
		rekeyAfterMessages: RekeyAfterMessages,
	}
}

// maxHandshakes is how many retransmissions one attempt may make.
func (t *timing) maxHandshakes() int { return int(t.rekeyAttemptTime / t.rekeyTimeout) }
