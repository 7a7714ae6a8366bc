// Package noise implements WireGuard's cryptography and handshake: keys and
// their textual forms, the Noise_IKpsk2_25519_ChaChaPoly_BLAKE2s handshake,
// transport key derivation, TAI64N timestamps, and the mac1/mac2/cookie
// defence against denial of service. It knows nothing of sockets, timers or
// transport traffic; the device package drives it.
//
// The model:
//
//   - Local is our static identity, immutable once built (a key change
//     means a new Local). It precomputes everything that depends only on our
//     key: public key, the responder's initial hash, the mac1 and cookie keys.
//   - Handshake is the state with one remote peer, guarded by its own mutex.
//     It precomputes the static-static Diffie-Hellman once, so an initiation
//     costs two scalar multiplications to create and one to consume.
//     The four steps (CreateInitiation, ConsumeInitiation, CreateResponse,
//     ConsumeResponse) are described in handshake.go; DeriveSession turns a
//     completed handshake into a Session and erases the handshake secrets.
//   - ConsumeInitiation enforces the per-peer rules: the timestamp must be
//     newer than the last accepted one (replay) and initiations are accepted
//     at most once per HandshakeInitiationRate (flood).
//   - Session carries the two ChaCha20-Poly1305 transport AEADs; counters and
//     replay windows belong to the caller.
//   - CookieChecker (responder) validates mac1 on every handshake packet
//     before any public-key work, and mac2 when under load, answering with a
//     MessageCookieReply otherwise. CookieGenerator (initiator, one per peer)
//     writes the MACs and absorbs cookie replies.
//   - Message types marshal to and from their fixed wire sizes without
//     allocating.
//
// Time is always passed in (a now parameter) rather than read, so callers
// control it and tests can move it. Secrets never appear in String output:
// PrivateKey and PresharedKey print as placeholders. Secrets this package
// owns are zeroed when no longer needed; crypto/ecdh and the AEADs keep
// internal copies of their keys that Go gives no way to erase.
package noise
