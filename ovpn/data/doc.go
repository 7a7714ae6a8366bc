// Package data is the OpenVPN data channel: AEAD encapsulation of IP
// packets in DATA_V2 (and DATA_V1 on receive), the packet-id replay window,
// primary/secondary key slots, and the keepalive and OCC exit payloads. It
// knows nothing about TLS: keys arrive as bytes, the way the Linux ovpn
// driver receives them from userspace.
//
// Send:    payload at buf[Headroom:] -> Channel.Encrypt -> [op|kid|peer-id][pid][tag][ct]
// Receive: packet (with Tailroom spare capacity) -> Channel.Decrypt (key by key id,
//
//	AEAD open in place, replay check) -> payload | Ping | Exit
//
// Neither direction allocates. The nonce is packet-id (4) || implicit IV (8);
// the additional data is the 4 header bytes (DATA_V2) followed by the packet-id,
// or the packet-id alone (DATA_V1).
package data
