// Package wire encodes and decodes OpenVPN 2.6 packets as they appear on the
// network: the opcode/key-id byte, control and ACK packets (without any
// tls-auth or tls-crypt wrapping, which package wrap adds), the DATA_V1 and
// DATA_V2 headers, and the 16-bit length framing used over TCP.
//
// Nothing here allocates on decode: decoded packets alias the input buffer.
package wire
