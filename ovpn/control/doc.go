// Package control is OpenVPN's control channel: one TLS session per key
// state carried over the reliability layer, the key_method_2 exchange,
// peer-info, push messages and the certificate checks OpenVPN makes.
//
// Pipeline (Channel owns the packet side, KeyState the TLS side):
//
//	transport -> Channel.HandlePacket -> unwrap (tls-auth/tls-crypt) -> decode
//	          -> key state by key id -> reliable (acks, order) -> TLS input bytes
//	TLS writes -> KeyState conn -> reliable queue -> flusher goroutine (Poll:
//	          retransmits, acks) -> encode -> wrap -> transport
//
// The TLS handshake and the messages after it run in the caller's goroutine
// on a *tls.Conn over the KeyState's net.Conn adapter (KeyState.Conn).
// Exchange (keyexchange.go) is that goroutine's loop for both the client
// and the server: TLS, key_method_2, the data key, then the key state's
// control messages, with a Side for what differs between the two.
package control
