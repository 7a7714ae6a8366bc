// Package replay implements the sliding-window filter that stops a
// transport-data counter (nonce) from being accepted twice, as WireGuard
// requires of every keypair.
//
// # Model
//
// A Filter remembers the highest counter it has accepted, last, and which
// of the WindowSize counters below last it has already seen. A counter is
// accepted when it is below the caller's limit (RejectAfterMessages) and
// either above last, or no more than WindowSize below last and not yet
// seen. Everything else (duplicates, counters that fell behind the window,
// counters at or beyond the limit) is rejected. Packets may therefore
// arrive reordered by up to WindowSize positions, as they do when
// decryption runs in parallel, and each is still accepted exactly once.
//
// # Layout
//
// The bitmap follows RFC 6479: a ring of 128 words of 64 bits, indexed by
// counter/64 modulo 128, with bit counter%64 inside the word. Moving the
// window forward clears only the words that come into use, never shifts
// bits, and a jump of more than the ring's span clears the ring in 128
// stores. One word of the ring is always the one being filled, so the
// window guaranteed to be tracked is 127 words, WindowSize = 8128
// counters, the same as the reference implementations.
//
// Validate runs in constant time (a few instructions, plus at most 128
// word stores when the window moves), allocates nothing and never blocks.
// A Filter is 1,032 bytes.
//
// # Concurrency
//
// A Filter is not safe for concurrent use. The receive path serialises
// access: one goroutine validates the counters of a keypair's batch in
// order, after decryption and before the packets are delivered.
package replay
