package noise

import (
	"crypto/cipher"
	"time"
)

// Session holds the transport keys of one completed handshake (a "keypair"
// in the whitepaper). Its fields are set once by DeriveSession and never
// change; the AEADs are safe for concurrent use (each Seal/Open is
// independent), so the data path may share a Session without locking. The
// caller owns nonce (counter) management and the replay window.
type Session struct {
	// Send encrypts transport data to the peer; Receive decrypts from it.
	// Both are ChaCha20-Poly1305 with a 64-bit little-endian counter in the
	// last 8 bytes of a 12-byte nonce.
	Send, Receive cipher.AEAD
	// IsInitiator is true when this side sent the initiation; only the
	// initiator may send transport data before receiving any.
	IsInitiator bool
	// LocalIndex is the index the peer puts in the Receiver field of
	// messages to us; RemoteIndex is the one we put in ours.
	LocalIndex, RemoteIndex uint32
	// Created is the time passed to DeriveSession; rekey and expiry timers
	// count from it.
	Created time.Time
}
