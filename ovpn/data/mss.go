package data

// TCP MSS clamping (mssfix), as OpenVPN 2.6 does it: the MSS option of
// every TCP SYN that crosses the tunnel, in either direction, is lowered
// so that the peers' segments, once encapsulated, fit in mssfix bytes. It
// is what keeps TCP working over a path that drops large datagrams
// without an ICMP error (a path-MTU black hole): the TCP peers never send
// a segment that would need one.
//
//	mssfix 1492 mtu (the default)  1492 includes the IP and UDP (or TCP) headers
//	mssfix 1450                    1450 is the UDP payload (OpenVPN 2.5's meaning)
//	mssfix 1400 fixed              1400 is the inner IP packet: MSS 1360 (IPv6 1340)
//	mssfix 0                       off
//
// The MSS is worked out from the negotiated cipher and framing as OpenVPN
// 2.6's frame_calculate_mssfix does, for an IPv4 inner packet; IPv6
// packets get 20 bytes less. Only SYNs whose MSS is larger are changed,
// the TCP checksum adjusted (RFC 1624); an option is never added.

import (
	"encoding/binary"
	"strconv"
)

// MSSFix is an mssfix setting.
type MSSFix struct {
	// Max is the limit in bytes (0: off).
	Max int
	// Encap (the mtu flag): Max includes the transport's IP and UDP or
	// TCP headers. Fixed (the fixed flag): Max is the inner IP packet's
	// size and nothing else is counted. Neither: Max is the UDP payload.
	Encap, Fixed bool
}

// String is the setting as an mssfix line's arguments: "1492 mtu".
func (m MSSFix) String() string {
	switch {
	case m.Max <= 0:
		return "0 (off)"
	case m.Encap:
		return strconv.Itoa(m.Max) + " mtu"
	case m.Fixed:
		return strconv.Itoa(m.Max) + " fixed"
	}
	return strconv.Itoa(m.Max)
}

// DefaultMSSFix is OpenVPN 2.6's default, mssfix 1492 mtu.
var DefaultMSSFix = MSSFix{Max: 1492, Encap: true}

// Frame describes what a data channel puts around a payload, for
// MSSFix.MSS.
type Frame struct {
	Cipher  Cipher
	Digest  int     // HMAC size in bytes (CBC ciphers)
	DataV2  bool    // DATA_V2 (a peer-id): a 4-byte header, else 1
	Framing Framing // compression framing
	TCP     bool    // the transport is TCP (a 2-byte length each packet)
	IPv6    bool    // the transport's family
}

// MSS returns the largest TCP MSS an IPv4 SYN may announce through a
// channel framed as f, or 0 when m is off (or leaves no room).
func (m MSSFix) MSS(f Frame) int {
	if m.Max <= 0 {
		return 0
	}
	if m.Fixed {
		return max(m.Max-40, 0)
	}
	overhead, payload := 1, 0 // opcode; what precedes the IP packet inside the ciphertext
	if f.DataV2 {
		overhead = 4
	}
	if f.TCP {
		overhead += 2
	}
	cbc := !f.Cipher.AEAD()
	if cbc {
		overhead += cbcBlock + f.Digest // IV, HMAC
		payload += 4                    // the packet-id is encrypted
	} else {
		overhead += 4 + tagLen
	}
	if f.Framing == FramingLZO || f.Framing == FramingSwap {
		payload++
	}
	if m.Encap {
		switch {
		case f.IPv6 && f.TCP:
			overhead += 60
		case f.IPv6:
			overhead += 48
		case f.TCP:
			overhead += 40
		default:
			overhead += 28
		}
	}
	target := m.Max - overhead
	if cbc {
		// At least one byte of padding, and the ciphertext is whole blocks.
		target = target/cbcBlock*cbcBlock - 1
	}
	return max(target-payload-40, 0) // IPv4 and TCP headers without options
}

// ClampMSS lowers the MSS option of pkt, an IPv4 or IPv6 TCP SYN, to mss
// (mss-20 for IPv6) when it is larger, fixing the TCP checksum. It reports
// whether it changed pkt; anything else (not TCP, not a SYN, a fragment,
// a length that does not match the header, IPv6 extension headers) is left
// as it is.
func ClampMSS(pkt []byte, mss int) bool {
	if mss <= 0 || len(pkt) < 20 {
		return false
	}
	var tcp []byte
	switch pkt[0] >> 4 {
	case 4:
		hl := int(pkt[0]&0x0f) * 4
		if hl < 20 || pkt[9] != 6 || int(binary.BigEndian.Uint16(pkt[2:])) != len(pkt) ||
			binary.BigEndian.Uint16(pkt[6:])&0x1fff != 0 || len(pkt)-hl < 20 {
			return false
		}
		tcp = pkt[hl:]
	case 6:
		if len(pkt) < 60 || pkt[6] != 6 || int(binary.BigEndian.Uint16(pkt[4:]))+40 != len(pkt) {
			return false
		}
		tcp, mss = pkt[40:], mss-20
	default:
		return false
	}
	if tcp[13]&0x02 == 0 || mss <= 0 { // SYN
		return false
	}
	doff := int(tcp[12]>>4) * 4
	if doff <= 20 || doff > len(tcp) {
		return false
	}
	opts := tcp[20:doff]
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0: // end of options
			return false
		case 1: // no-op
			i++
			continue
		}
		if i+1 >= len(opts) || opts[i+1] < 2 || i+int(opts[i+1]) > len(opts) {
			return false
		}
		if opts[i] == 2 && opts[i+1] == 4 {
			old := binary.BigEndian.Uint16(opts[i+2:])
			if int(old) <= mss {
				return false
			}
			binary.BigEndian.PutUint16(opts[i+2:], uint16(mss))
			// RFC 1624: HC' = ~(~HC + ~m + m').
			sum := uint32(^binary.BigEndian.Uint16(tcp[16:])) + uint32(^old) + uint32(mss)
			sum = sum&0xffff + sum>>16
			sum = sum&0xffff + sum>>16
			binary.BigEndian.PutUint16(tcp[16:], ^uint16(sum))
			return true
		}
		i += int(opts[i+1])
	}
	return false
}

// SetMSS makes the channel clamp the MSS of TCP SYNs it encrypts and
// decrypts to mss (ClampMSS; 0: off). Call it before the channel is
// shared.
func (c *Channel) SetMSS(mss int) { c.mss = min(max(mss, 0), 0xffff) }

// MSS returns the channel's clamp (0: off).
func (c *Channel) MSS() int { return c.mss }
