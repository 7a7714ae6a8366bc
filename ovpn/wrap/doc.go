// Package wrap protects OpenVPN control packets with a pre-shared static
// key: tls-auth (an HMAC in front of the packet) or tls-crypt (AES-256-CTR
// encryption with an HMAC-SHA256 synthetic IV); and with tls-crypt-v2, a
// tls-crypt key per client that travels wrapped by the server key
// (tlscryptv2key.go: the keys and the WKc; tlscryptv2.go: the client's
// and the server's wrappers). It also parses OpenVPN static key files.
//
//	plain:     op|kid (1) | session id (8) | rest
//	tls-auth:  op|kid | session id | HMAC | replay id (4) | time (4) | rest
//	           HMAC over replay id, time, op|kid, session id, rest
//	tls-crypt: op|kid | session id | replay id (4) | time (4) | tag (32) | AES-256-CTR(rest)
//	           tag = HMAC-SHA256(header | rest), CTR IV = tag[:16]
//
// Key directions: the 256-byte static key holds two halves, each
// cipher(64) | hmac(64). Direction 0 (server) sends with half 0 and
// receives with half 1; direction 1 (client) the reverse. tls-crypt always
// uses 0 on the server and 1 on the client; tls-auth without key-direction
// uses half 0 both ways.
package wrap
